package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/outcome"
)

// rowGroup is one unit of parallel work.
type rowGroup struct {
	seg      int   // index in segs
	gi       int   // row group index in the file
	firstRow int64 // row index of its first row in the segment
	rows     int64
}

// segTally is the progress of one segment in a parallel pass.
type segTally struct {
	groups, done int
	failed       error
	failedGroup  int
}

// ReduceSegments is ReduceDir over a listed set of segments. Row i of
// segs[k] is added at position outcome.Pos(k, i). The row groups are
// reduced by opts.Procs workers (at least one), each into a reducer of its
// own, and merged into r (which must have no open transaction) when every
// segment is read, so the merged state is the sequential replay's. A
// segment that fails in any row group is left out whole: the pass is redone
// without it (rare: only with bad segments), so no worker keeps its other
// row groups and no reducer needs an undo log. With Strict, the failure of
// the first bad segment (in segs order) is returned and r is not changed.
func ReduceSegments(ctx context.Context, segs []segment.Segment, ignored int, r *outcome.Reducer, opts DirOptions) (DirStats, error) {
	opts.Procs = max(1, opts.Procs)
	st := DirStats{Ignored: ignored}
	bad := make(map[int]error)
	var work []rowGroup
	for i, seg := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		rows, err := segment.RowGroups(seg.Path)
		if err != nil {
			bad[i] = err
			continue
		}
		first := int64(0)
		for gi, n := range rows {
			work = append(work, rowGroup{seg: i, gi: gi, firstRow: first, rows: n})
			first += n
		}
	}
	reported := make([]bool, len(segs))
	report := func(i int) {
		if opts.OnSegment != nil && !reported[i] {
			reported[i] = true
			opts.OnSegment(segs[i])
		}
	}
	for i := range bad {
		report(i)
	}
	for {
		parts, tallies, err := parallelPass(ctx, segs, work, bad, r.Options(), opts.Procs, report)
		if err != nil {
			return st, err
		}
		var failed []int
		for i, t := range tallies {
			if t.failed != nil {
				failed = append(failed, i)
			}
		}
		for _, i := range failed {
			bad[i] = tallies[i].failed
		}
		if opts.Strict && len(bad) > 0 {
			first := len(segs)
			for i := range bad {
				first = min(first, i)
			}
			return st, bad[first]
		}
		if len(failed) > 0 {
			continue // redo without the bad segments
		}
		for _, p := range parts {
			// The parts are not used again: the first one is taken
			// over by an empty r rather than copied into it.
			if err := r.MergeOwned(p); err != nil {
				return st, fmt.Errorf("merge row groups: %w", err)
			}
		}
		break
	}
	for i, seg := range segs {
		if err, isBad := bad[i]; isBad {
			st.Failed = append(st.Failed, SegmentFailure{File: filepath.Base(seg.Path), Err: err, Reason: err.Error()})
			continue
		}
		st.Segments++
		st.Bytes += seg.Size
	}
	for _, w := range work {
		if _, isBad := bad[w.seg]; !isBad {
			st.Rows += w.rows
		}
	}
	return st, nil
}

// parallelPass reduces the row groups of work not in bad segments with
// procs workers. It returns the workers' reducers and, per segment, whether
// a row group failed (the first failure by row group). report is called,
// under a lock, when all of a segment's row groups are done.
func parallelPass(ctx context.Context, segs []segment.Segment, work []rowGroup, bad map[int]error,
	ropts outcome.Options, procs int, report func(int)) ([]*outcome.Reducer, []segTally, error) {
	tallies := make([]segTally, len(segs))
	for _, w := range work {
		tallies[w.seg].groups++
	}
	parts := make([]*outcome.Reducer, procs)
	for i := range parts {
		p, err := outcome.NewReducer(ropts)
		if err != nil {
			return nil, nil, err
		}
		parts[i] = p
	}
	// Worker w owns the contiguous run work[w*len/procs : (w+1)*len/procs]
	// and takes its row groups in order; when its own run is done it takes
	// from the others' (work stealing). Contiguous runs keep a worker's row
	// groups close in time, so in a directory whose runs are short next to
	// its span each worker meets mostly its own runs: less interned twice,
	// less to merge.
	var (
		next  = make([]atomic.Int64, procs)
		end   = make([]int64, procs)
		mu    sync.Mutex // tallies, report
		wg    sync.WaitGroup
		errs  = make([]error, procs)
		abort atomic.Bool
	)
	for w := range procs {
		next[w].Store(int64(w * len(work) / procs))
		end[w] = int64((w + 1) * len(work) / procs)
	}
	take := func(w int) int {
		for i := range procs {
			v := (w + i) % procs
			if k := next[v].Add(1) - 1; k < end[v] {
				return int(k)
			}
		}
		return -1
	}
	for wi := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := parts[wi]
			sc := segment.NewScanner(p.Fields(), p.RunSymbols(), p.Symbols())
			defer sc.Close()
			for !abort.Load() {
				k := take(wi)
				if k < 0 {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[wi] = err
					abort.Store(true)
					return
				}
				w := work[k]
				if _, isBad := bad[w.seg]; isBad {
					continue
				}
				// No transaction: a row group that fails leaves the pass's
				// reducers to be thrown away (the pass is redone without its
				// segment), so there is nothing to roll back, and not saving
				// every run a row group touches keeps the workers' memory
				// traffic down.
				p.SetPos(outcome.Pos(uint32(w.seg), uint64(w.firstRow)))
				err := sc.ScanRowGroup(segs[w.seg].Path, w.gi, func(b *calls.Batch) error {
					p.AddBatch(b)
					return nil
				})
				mu.Lock()
				t := &tallies[w.seg]
				if err != nil && (t.failed == nil || w.gi < t.failedGroup) {
					t.failed, t.failedGroup = err, w.gi
				}
				t.done++
				if t.done == t.groups {
					report(w.seg)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return parts, tallies, nil
}
