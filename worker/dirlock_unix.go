//go:build unix

package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive lock on dir/lock for the life of the
// process (or until the returned release is called): two workers never
// share a data directory. The lock is released by the kernel when the
// process dies, so a crashed worker never leaves it behind.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another verdryx process (lock %s); give this one its own Options.DataDir", dir, path)
		}
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
