//go:build !unix && !windows

package index

import (
	"errors"
	"os"
)

// errWouldBlock is what lockFile returns when another process holds the
// lock.
var errWouldBlock = errors.New("file is locked")

// errNoLocks is what lockFile returns where neither flock nor LockFileEx
// exists: a staging directory with a lock file is then never taken for
// stale.
var errNoLocks = errors.New("no file locks on this platform")

func lockFile(*os.File) error { return errNoLocks }

func lockShared(*os.File) error { return errNoLocks }
