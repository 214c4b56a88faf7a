package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/verdryx/verdryx/outcome"
)

// Segment is one TokenFuse segment file of a directory.
type Segment struct {
	Path  string
	PID   uint64
	Nanos uint64
	Seq   uint64
	Size  int64
}

// ParseSegmentName parses a TokenFuse segment file name,
// calls-{pid:x}-{nanos:x}-{seq:08}.parquet (pid and nanos lowercase hex, seq
// decimal of at least 8 digits).
func ParseSegmentName(base string) (pid, nanos, seq uint64, ok bool) {
	rest, found := strings.CutPrefix(base, "calls-")
	if !found {
		return 0, 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".parquet")
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 || len(parts[2]) < 8 {
		return 0, 0, 0, false
	}
	isHex := func(s string) bool {
		return s != "" && strings.Trim(s, "0123456789abcdef") == ""
	}
	if !isHex(parts[0]) || !isHex(parts[1]) || strings.Trim(parts[2], "0123456789") != "" {
		return 0, 0, 0, false
	}
	var err error
	if pid, err = strconv.ParseUint(parts[0], 16, 64); err != nil {
		return 0, 0, 0, false
	}
	if nanos, err = strconv.ParseUint(parts[1], 16, 64); err != nil {
		return 0, 0, 0, false
	}
	if seq, err = strconv.ParseUint(parts[2], 10, 64); err != nil {
		return 0, 0, 0, false
	}
	return pid, nanos, seq, true
}

// ListSegments returns the segment files of dir in replay order: by the
// nanos in their names, then sequence, then pid. Files whose names do not
// match the segment pattern, and directories, are left out; ignored
// returns how many.
func ListSegments(dir string) (segs []Segment, ignored int, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list trace directory: %w", err)
	}
	for _, e := range entries {
		pid, nanos, seq, ok := ParseSegmentName(e.Name())
		if !ok || e.IsDir() {
			ignored++
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, 0, fmt.Errorf("stat segment %s: %w", e.Name(), err)
		}
		segs = append(segs, Segment{Path: filepath.Join(dir, e.Name()), PID: pid, Nanos: nanos, Seq: seq, Size: info.Size()})
	}
	slices.SortFunc(segs, func(a, b Segment) int {
		return cmp.Or(cmp.Compare(a.Nanos, b.Nanos), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.PID, b.PID))
	})
	return segs, ignored, nil
}

// DirOptions configures a directory replay.
type DirOptions struct {
	// Strict makes the first bad segment fatal. Otherwise a bad segment is
	// recorded in DirStats.Failed and the replay goes on.
	Strict bool
	// OnSegment, if non-nil, is called after each segment (read or failed)
	// with the segment; for progress reporting.
	OnSegment func(Segment)
}

// SegmentFailure is a segment the replay skipped.
type SegmentFailure struct {
	File string `json:"file"`
	Err  error  `json:"-"`
	// Reason is Err's message.
	Reason string `json:"error"`
}

// DirStats counts a directory replay.
type DirStats struct {
	Segments int              `json:"segments"`
	Rows     int64            `json:"rows"`
	Bytes    int64            `json:"bytes"`
	Ignored  int              `json:"ignored_files"`
	Failed   []SegmentFailure `json:"failed_segments"`
}

// ReduceDir replays every segment of dir, in name order, into r. Each
// segment is folded all or nothing (r.Begin/Commit/Rollback), so a segment
// that fails halfway leaves no trace in r. Memory is one batch plus the
// reducer's per-run state: no file is held whole. ReduceDir returns early
// with ctx's error when ctx is done.
func ReduceDir(ctx context.Context, dir string, r *outcome.Reducer, opts DirOptions) (DirStats, error) {
	segs, ignored, err := ListSegments(dir)
	if err != nil {
		return DirStats{}, err
	}
	return ReduceSegments(ctx, segs, ignored, r, opts)
}

// ReduceSegments is ReduceDir over a listed set of segments.
func ReduceSegments(ctx context.Context, segs []Segment, ignored int, r *outcome.Reducer, opts DirOptions) (DirStats, error) {
	st := DirStats{Ignored: ignored}
	sc := NewScanner(r.Fields(), r.RunSymbols(), r.Symbols())
	for _, seg := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		var rows int64
		r.Begin()
		err := sc.ScanFile(seg.Path, func(b *calls.Batch) error {
			rows += int64(b.Len)
			r.AddBatch(b)
			return nil
		})
		if err != nil {
			r.Rollback()
			if opts.Strict {
				return st, err
			}
			st.Failed = append(st.Failed, SegmentFailure{File: filepath.Base(seg.Path), Err: err, Reason: err.Error()})
		} else {
			r.Commit()
			st.Segments++
			st.Rows += rows
			st.Bytes += seg.Size
		}
		if opts.OnSegment != nil {
			opts.OnSegment(seg)
		}
	}
	return st, nil
}

// ReadSegment calls fn with every call of the segment at path, in row
// order, every column read. It stops at the first error, from the segment
// (a *SegmentError) or from fn (returned as is). Memory is one batch plus
// the segment's distinct strings.
func ReadSegment(path string, fn func(calls.Call) error) error {
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	sc := NewScanner(calls.AllFields, runs, syms)
	return sc.ScanFile(path, func(b *calls.Batch) error {
		for i := range b.Len {
			if err := fn(b.Call(i, runs, syms)); err != nil {
				return err
			}
		}
		return nil
	})
}

// IsSegmentError reports whether err is a bad segment (as opposed to an I/O
// or callback error).
func IsSegmentError(err error) bool {
	var se *SegmentError
	return errors.As(err, &se)
}
