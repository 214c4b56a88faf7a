package consumer

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/verdryx/verdryx/outcome"
)

// ScanBytes is ScanFile over a segment already read into memory (named
// name in errors): a caller that read the file through a confinement rule
// scans exactly the bytes it checked and never reopens the path.
func (s *Scanner) ScanBytes(name string, b []byte, fn func(*outcome.Batch) error) error {
	base := filepath.Base(name)
	pf, err := openParquet(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return &SegmentError{File: base, RowGroup: -1, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	if err := s.bind(pf, base); err != nil {
		return err
	}
	for gi, rg := range pf.RowGroups() {
		if err := s.scanRowGroup(rg, gi, base, fn); err != nil {
			return err
		}
	}
	return nil
}

// ReadSegmentBytes is ReadSegment over a segment's bytes.
func ReadSegmentBytes(name string, b []byte, fn func(outcome.Call) error) error {
	runs, syms := outcome.NewSymbols(), outcome.NewSymbols()
	sc := NewScanner(outcome.AllFields, runs, syms)
	return sc.ScanBytes(name, b, func(batch *outcome.Batch) error {
		for i := range batch.Len {
			if err := fn(batch.Call(i, runs, syms)); err != nil {
				return err
			}
		}
		return nil
	})
}
