//go:build unix

package envelope

import (
	"errors"
	"os"
	"syscall"
)

// errWouldBlock is what lockFile returns when another writer holds the lock.
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
