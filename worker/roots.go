package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Roots are the directories paths named in messages may resolve under. A
// path outside every root, or a symlink leading out of one, is refused
// before anything is read.
type Roots []string

// ErrOutsideRoots is returned for a path that escapes every root.
var ErrOutsideRoots = errors.New("worker: path is outside the allowed roots")

// Resolve returns the real path of name if it lies under a root. A
// relative name is tried against each root in order.
func (r Roots) Resolve(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty path")
	}
	var candidates []string
	if filepath.IsAbs(name) {
		candidates = []string{name}
	} else {
		for _, root := range r {
			candidates = append(candidates, filepath.Join(root, name))
		}
	}
	var firstErr error
	for _, c := range candidates {
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, root := range r {
			rr, err := filepath.EvalSymlinks(root)
			if err != nil {
				continue
			}
			if real == rr || strings.HasPrefix(real, rr+string(os.PathSeparator)) {
				return real, nil
			}
		}
		return "", fmt.Errorf("%w: %s resolves to %s", ErrOutsideRoots, name, real)
	}
	if firstErr != nil && len(candidates) > 0 {
		return "", fmt.Errorf("%s: %w", name, firstErr)
	}
	return "", fmt.Errorf("%w: %s", ErrOutsideRoots, name)
}
