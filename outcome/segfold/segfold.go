// Package segfold folds a directory of TokenFuse Parquet segments into an
// outcome.Reducer: it drives processing with what consumer reads, so the
// input layer (consumer) knows nothing of the reduction and outcome knows
// nothing of Parquet.
package segfold

import (
	"context"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segment"
)

// DirOptions configures a directory replay.
type DirOptions struct {
	// Strict makes the first bad segment fatal. Otherwise a bad segment is
	// recorded in DirStats.Failed and the replay goes on.
	Strict bool
	// OnSegment, if non-nil, is called after each segment (read or failed)
	// with the segment; for progress reporting. It is called from the
	// workers (one call at a time), in no set order when Procs > 1.
	OnSegment func(segment.Segment)
	// Procs is the number of goroutines reducing row groups in parallel,
	// each into its own reducer, merged into the caller's at the end; 0
	// means 1. Whatever the number, the result is the sequential replay's,
	// field for field.
	Procs int
	// HugePages makes the workers ask for transparent huge pages for their
	// large arrays (outcome.Reducer.UseHugePages, segment.Scanner.UseHugePages):
	// fewer page faults and TLB misses, for a process that reduces and
	// exits, not for a long-running one.
	HugePages bool
	// TuneGC, when $GOGC is not set, collects garbage a quarter as often
	// as the default while the reduction runs (GOGC 400, through
	// debug.SetGCPercent, restored when it returns): its
	// heap is nearly all live state (run and intern tables that only
	// grow), so the default pace reclaims next to nothing for 6% of the
	// wall time of 10 M rows, and the peak RSS stays where it was. For a
	// process that reduces and exits; it sets the whole process's pace.
	TuneGC bool
}

// tunedGCPercent is the GOGC a TuneGC reduction runs with.
const tunedGCPercent = 400

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
// segment is folded all or nothing: a segment that fails halfway leaves
// no trace in r (the pass is redone without it). Memory is one batch per
// worker plus the per-run state: no file is held whole. ReduceDir returns
// early with ctx's error when ctx is done.
func ReduceDir(ctx context.Context, dir string, r *outcome.Reducer, opts DirOptions) (DirStats, error) {
	segs, ignored, err := segment.List(dir)
	if err != nil {
		return DirStats{}, err
	}
	return ReduceSegments(ctx, segs, ignored, r, opts)
}
