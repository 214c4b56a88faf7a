//go:build windows

package index

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// errWouldBlock is what lockFile returns when another process (or another
// open file of this one) holds the lock.
const errWouldBlock = windows.ERROR_LOCK_VIOLATION

// lockFile takes an exclusive, non-blocking lock on f for as long as f is
// open. It locks one byte far past any real end of file, so writes through
// f itself are never blocked by the lock.
func lockFile(f *os.File) error {
	ol := &windows.Overlapped{Offset: 0xFFFFFFFE, OffsetHigh: 0x7FFFFFFF}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return errWouldBlock
	}
	return err
}

// lockShared takes a shared, non-blocking lock on f for as long as f is
// open, on the byte lockFile locks: any number of holders share it, and
// it excludes lockFile's.
func lockShared(f *os.File) error {
	ol := &windows.Overlapped{Offset: 0xFFFFFFFE, OffsetHigh: 0x7FFFFFFF}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return errWouldBlock
	}
	return err
}

// errNoLocks is never returned here: file locks exist on this platform.
var errNoLocks = errors.New("no file locks on this platform")
