//go:build unix

package index

import (
	"errors"
	"os"
	"syscall"
)

// errWouldBlock is what lockFile returns when another process (or another
// open file of this one) holds the lock.
const errWouldBlock = syscall.EWOULDBLOCK

// lockFile takes an exclusive, non-blocking flock on f for as long as f is
// open; the kernel drops it when the process dies.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errWouldBlock
	}
	return err
}

// lockShared takes a shared, non-blocking flock on f for as long as f is
// open: any number of holders share it, and it excludes lockFile's.
func lockShared(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errWouldBlock
	}
	return err
}

// errNoLocks is never returned here: file locks exist on this platform.
var errNoLocks = errors.New("no file locks on this platform")
