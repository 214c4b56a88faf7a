package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// A process serving a generation (a worker answering asks from it) holds
// a lease on it: a shared file lock on <data>/index/leases/<id>.lease for
// as long as it serves. Prune removes a generation only while holding the
// exclusive lock on that file, created if absent, and removes the lease
// file after the generation, before unlocking; a lease taken after that
// finds the generation gone. Any number of processes share a lease; the
// kernel drops a holder's lock when it dies, however it dies, so a dead
// worker never blocks gc. Lease files are never removed while a
// generation exists (a holder locks the file it opened: unlinking it
// would let Prune lock a new one under a holder's feet).
const (
	leasesDir   = "leases"
	leaseSuffix = ".lease"
)

// Active returns the id of the generation active.json names, or
// ErrNoActive. It reads only the pointer.
func (s *Store) Active() (string, error) { return s.activeID() }

// Lease marks generation id as served by this process until release is
// called or the process dies: Prune keeps it meanwhile and says why. Take
// the lease before opening the generation (rag.OpenStored) and release it
// once nothing reads the generation any more; release may be called more
// than once; a lease also ends when release is no longer referenced (the
// lock file's finalizer closes it), so hold it for as long as the
// generation is served. A generation that does not exist (removed by a Prune before
// the lease was taken) is ErrCorrupt. On a platform without file locks a
// lease holds nothing.
func (s *Store) Lease(id string) (release func(), err error) {
	if !validGenerationID(id) {
		return nil, fmt.Errorf("%w: generation %q is not 32 lowercase hex digits", ErrCorrupt, id)
	}
	f, err := s.openLease(id)
	if err != nil {
		return nil, err
	}
	if err := lockShared(f); err != nil && !errors.Is(err, errNoLocks) {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w: generation %s is being removed", ErrCorrupt, id)
		}
		return nil, fmt.Errorf("lease generation %s: %w", id, err)
	}
	// Checked under the lock: a Prune that removed it is done with it.
	ok, err := checkDir(filepath.Join(s.root, generationsDir, id))
	if err == nil && !ok {
		err = fmt.Errorf("%w: generation %s does not exist", ErrCorrupt, id)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, nil
}

// openLease opens (creating it and leases/ when absent) the lease file of
// generation id.
func (s *Store) openLease(id string) (*os.File, error) {
	if _, err := checkDir(s.root); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.root, leasesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if _, err := checkDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, id+leaseSuffix)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lease %s: %w", path, err)
	}
	return f, nil
}

// PruneResult is what Prune did: the generations it removed, and those it
// would have removed but kept, with why.
type PruneResult struct {
	Removed []string
	Kept    []Kept
}

// Kept is a generation Prune kept although past --keep, and why.
type Kept struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// reasonLeased is why Prune keeps a leased generation.
const reasonLeased = "leased: a running process (a worker) serves it"

// removeUnleased removes generation id unless a lease holds it, and
// reports whether one did. It holds the exclusive lease lock from before
// the removal until after the lease file is gone.
func (s *Store) removeUnleased(id string) (leased bool, err error) {
	f, err := s.openLease(id)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := lockFile(f); err != nil && !errors.Is(err, errNoLocks) {
		if errors.Is(err, errWouldBlock) {
			return true, nil
		}
		return false, fmt.Errorf("lock the lease of generation %s: %w", id, err)
	}
	if err := os.RemoveAll(filepath.Join(s.root, generationsDir, id)); err != nil {
		return false, fmt.Errorf("remove generation %s: %w", id, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		return false, fmt.Errorf("remove the lease of generation %s: %w", id, err)
	}
	return false, nil
}
