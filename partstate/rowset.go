package partstate

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/verdryx/verdryx/internal/wire"
)

// rowSet is the set of a segment's rows a partition has applied, as sorted,
// disjoint, non-adjacent closed intervals of row indices. A batch carries
// every row of its partition between its first and last row, so applying
// it adds one interval; a segment replayed whole is one interval [0, last]
// however it was cut into batches. This is the partition's dedupe state
// for segment rows: one small entry per segment, not a key per row.
type rowSet []rowSpan

type rowSpan struct{ lo, hi uint64 } // inclusive

// Has reports whether row is in the set.
func (r rowSet) Has(row uint64) bool {
	i, _ := slices.BinarySearchFunc(r, row, func(s rowSpan, row uint64) int {
		switch {
		case s.hi < row:
			return -1
		case s.lo > row:
			return 1
		}
		return 0
	})
	return i < len(r) && r[i].lo <= row && row <= r[i].hi
}

// Covers reports whether every row of [lo, hi] is in the set.
func (r rowSet) Covers(lo, hi uint64) bool {
	for _, s := range r {
		if s.lo <= lo && hi <= s.hi {
			return true
		}
	}
	return false
}

// add returns the set with [lo, hi] added (lo <= hi), merging spans that
// overlap or touch it. It does not modify r.
func (r rowSet) add(lo, hi uint64) rowSet {
	out := make(rowSet, 0, len(r)+1)
	for _, s := range r {
		switch {
		case hi != ^uint64(0) && s.lo > hi+1, lo != 0 && s.hi < lo-1:
			out = append(out, s) // apart
		default:
			lo, hi = min(lo, s.lo), max(hi, s.hi)
		}
	}
	out = append(out, rowSpan{lo, hi})
	slices.SortFunc(out, func(a, b rowSpan) int { return cmp.Compare(a.lo, b.lo) })
	return out
}

// rowSetVersion leads an encoded rowSet.
const rowSetVersion = 1

func (r rowSet) encode(b []byte) []byte {
	b = append(b, rowSetVersion)
	b = binary.AppendUvarint(b, uint64(len(r)))
	prev := uint64(0)
	for _, s := range r {
		b = binary.AppendUvarint(b, s.lo-prev)
		b = binary.AppendUvarint(b, s.hi-s.lo)
		prev = s.hi
	}
	return b
}

func decodeRowSet(b []byte) (rowSet, error) {
	if len(b) == 0 || b[0] != rowSetVersion {
		return nil, errors.New("segment rows: unknown format")
	}
	d := decoder{wire.Reader{B: b[1:]}}
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Err = fmt.Errorf("%d spans", n)
	}
	var r rowSet
	prev := uint64(0)
	for i := uint64(0); i < n && d.Err == nil; i++ {
		gap, width := d.Uvarint(), d.Uvarint()
		lo := prev + gap
		if d.Err == nil && (lo < prev || (i > 0 && gap < 2) || lo+width < lo) {
			d.Err = errors.New("spans out of order")
		}
		r = append(r, rowSpan{lo, lo + width})
		prev = lo + width
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, fmt.Errorf("segment rows: %w", d.Err)
	}
	return r, nil
}
