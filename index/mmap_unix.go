//go:build unix

package index

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps path read-only and shared, populated up front, and returns
// its bytes and the function that unmaps them (empty files are read).
// Generations are immutable, so the bytes never change under a reader;
// a generation removed while mapped keeps its space until unmapped.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Size() == 0 {
		return nil, func() {}, nil
	}
	if int64(int(fi.Size())) != fi.Size() {
		return nil, nil, fmt.Errorf("map %s: %d bytes do not fit in memory", path, fi.Size())
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED|mapPopulate)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", path, err)
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
