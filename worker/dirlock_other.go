//go:build !unix

package worker

// lockDataDir is a no-op where flock is not available; the instance lease
// still refuses a second live worker with the same instance id.
func lockDataDir(dir string) (release func(), err error) { return func() {}, nil }
