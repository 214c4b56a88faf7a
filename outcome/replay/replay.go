// Package replay folds a directory of TokenFuse Parquet segments into an
// outcome.Reducer: it drives processing with what consumer reads, so the
// input layer (consumer) knows nothing of the reduction and outcome knows
// nothing of Parquet.
package replay

import (
	"context"
	"path/filepath"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/outcome"
)

// DirOptions configures a directory replay.
type DirOptions struct {
	// Strict makes the first bad segment fatal. Otherwise a bad segment is
	// recorded in DirStats.Failed and the replay goes on.
	Strict bool
	// OnSegment, if non-nil, is called after each segment (read or failed)
	// with the segment; for progress reporting. With Procs > 1 it is called
	// from the workers (one call at a time), in no set order.
	OnSegment func(segment.Segment)
	// Procs is the number of goroutines reducing row groups in parallel,
	// each into its own reducer, merged into the caller's at the end; 0 or
	// 1 reduces in the calling goroutine. Either way the result is the
	// sequential replay's, field for field.
	Procs int
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
	segs, ignored, err := segment.List(dir)
	if err != nil {
		return DirStats{}, err
	}
	return ReduceSegments(ctx, segs, ignored, r, opts)
}

// ReduceSegments is ReduceDir over a listed set of segments. Row i of
// segs[k] is added at position outcome.Pos(k, i). With opts.Procs > 1 the
// row groups are reduced in parallel and merged into r (which must have no
// open transaction); a bad segment is still left out whole, and with
// Strict the error returned is that of the first bad segment in segs order
// and r is left unchanged.
func ReduceSegments(ctx context.Context, segs []segment.Segment, ignored int, r *outcome.Reducer, opts DirOptions) (DirStats, error) {
	if opts.Procs > 1 {
		return reduceParallel(ctx, segs, ignored, r, opts)
	}
	st := DirStats{Ignored: ignored}
	sc := segment.NewScanner(r.Fields(), r.RunSymbols(), r.Symbols())
	for i, seg := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		var rows int64
		r.Begin()
		r.SetPos(outcome.Pos(uint32(i), 0))
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
