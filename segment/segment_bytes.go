package segment

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/verdryx/verdryx/calls"
)

// ScanBytes is ScanFile over a segment already read into memory (named
// name in errors): a caller that read the file through a confinement rule
// scans exactly the bytes it checked and never reopens the path.
func (s *Scanner) ScanBytes(name string, b []byte, fn func(*calls.Batch) error) error {
	base := filepath.Base(name)
	r := bytes.NewReader(b)
	pf, err := OpenParquet(r, int64(len(b)))
	if err != nil {
		return &Error{File: base, RowGroup: -1, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	if err := s.bind(pf, base, r, int64(len(b))); err != nil {
		return err
	}
	for gi, rg := range pf.RowGroups() {
		if err := s.scanRowGroup(rg, gi, base, fn); err != nil {
			return err
		}
	}
	return nil
}
