//go:build unix

package soak

import "syscall"

// flushDisks asks the kernel to write every dirty page back (sync(2)), so
// that a timed phase does not share the disk with the writeback of what
// ran before it.
func flushDisks() { syscall.Sync() }
