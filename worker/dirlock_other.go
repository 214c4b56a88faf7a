//go:build !unix

package worker

// LockDataDir is a no-op where flock is not available; the instance lease
// still refuses a second live worker with the same instance id.
func LockDataDir(dir string) (release func(), err error) { return func() {}, nil }
