package index

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A save writes its generation in generations/.staging-<random>/ and holds
// an exclusive file lock on generations/.staging-<random>.lock from before
// the directory exists until after it is renamed away or removed. The
// kernel drops the lock when the process dies, however it dies (kill -9,
// power loss), so a staging directory whose lock can be taken, or which
// has no lock file (an older build's, or one whose cleanup was itself
// interrupted), belongs to no running save: it is stale. No pid (reused),
// no age (a slow save is not a dead one), no clock.
const (
	stagingPrefix = ".staging-"
	lockSuffix    = ".lock"
)

// newStaging creates a locked, empty staging directory in gens. release
// drops the lock and removes the lock file; call it once the directory has
// been renamed or removed.
func newStaging(gens string) (dir string, release func(), err error) {
	for range 8 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", nil, fmt.Errorf("staging directory name: %w", err)
		}
		dir = filepath.Join(gens, stagingPrefix+hex.EncodeToString(b[:]))
		lock, err := os.OpenFile(dir+lockSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create staging lock: %w", err)
		}
		release = func() {
			lock.Close()
			os.Remove(dir + lockSuffix)
		}
		if err := lockFile(lock); err != nil && !errors.Is(err, errNoLocks) {
			release()
			return "", nil, fmt.Errorf("lock %s: %w", dir+lockSuffix, err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			release()
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return "", nil, fmt.Errorf("create staging directory: %w", err)
		}
		return dir, release, nil
	}
	return "", nil, fmt.Errorf("create staging directory in %s: every name tried exists", gens)
}

// RemoveStale removes the staging directories of saves that are no longer
// running (interrupted by a crash or a kill) and returns them: each one's
// name under generations/ and the bytes of the files it held.
// The staging directory of a save running now, in this process or
// another, is kept; completed generations are never touched. On a
// platform without file locks only staging directories without a lock
// file are removed.
func (s *Store) RemoveStale() (map[string]int64, error) {
	if err := s.preflight(); err != nil {
		return nil, err
	}
	gens := filepath.Join(s.root, generationsDir)
	entries, err := os.ReadDir(gens)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gens, err)
	}
	removed := map[string]int64{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, stagingPrefix) {
			continue
		}
		if base, ok := strings.CutSuffix(name, lockSuffix); ok && !e.IsDir() {
			// A lock left beside no directory: its save died after the
			// rename, or a cleanup died between its two removals.
			if _, err := os.Lstat(filepath.Join(gens, base)); errors.Is(err, fs.ErrNotExist) {
				if _, err := removeIfStale(filepath.Join(gens, base)); err != nil {
					return removed, err
				}
			}
			continue
		}
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(gens, name)
		size := treeSize(dir)
		ok, err := removeIfStale(dir)
		if err != nil {
			return removed, err
		}
		if ok {
			removed[name] = size
			s.logger.Info("stale staging directory removed", "dir", name, "bytes", size)
		}
	}
	if len(removed) > 0 {
		if err := syncDir(gens); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// removeIfStale removes dir (when it exists) and then its lock file,
// unless a running save holds the lock; it reports whether dir was
// removed.
func removeIfStale(dir string) (bool, error) {
	lockPath := dir + lockSuffix
	lock, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("open %s: %w", lockPath, err)
	}
	// No lock file: never a running save's (a save locks before mkdir).
	if err == nil {
		if err := lockFile(lock); err != nil {
			lock.Close()
			if errors.Is(err, errWouldBlock) || errors.Is(err, errNoLocks) {
				return false, nil // a running save's, or no way to tell here
			}
			return false, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		defer func() {
			lock.Close()
			os.Remove(lockPath)
		}()
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("remove stale staging directory %s: %w", dir, err)
	}
	return true, nil
}

// treeSize is the total size of the regular files under dir (what a stale
// staging directory held), 0 where it cannot be read.
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
