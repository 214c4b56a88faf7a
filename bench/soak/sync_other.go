//go:build !unix

package soak

// flushDisks does nothing where sync(2) is not there.
func flushDisks() {}
