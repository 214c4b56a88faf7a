package segfold

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/gcpercent"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segment"
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
	if opts.TuneGC {
		defer gcpercent.Tune(tunedGCPercent)()
	}
	st := DirStats{Ignored: ignored}
	bad := make(map[int]error)
	var work []rowGroup
	groups, errs := footers(ctx, segs, opts.Procs)
	for i := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		rows, err := groups[i], errs[i]
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
		parts, scanners, tallies, err := parallelPass(ctx, segs, work, bad, r.Options(), opts.Procs, opts.HugePages, report)
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
		if err := mergeParts(r, parts, scanners); err != nil {
			return st, fmt.Errorf("merge row groups: %w", err)
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

// footers reads the row group sizes of every segment (segment.RowGroups),
// procs footers at a time: a directory's footers are read before any row
// group can be shared out, so reading them one by one would leave the
// other cores idle.
func footers(ctx context.Context, segs []segment.Segment, procs int) ([][]int64, []error) {
	groups, errs := make([][]int64, len(segs)), make([]error, len(segs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(procs, len(segs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(segs) || ctx.Err() != nil {
					return
				}
				groups[i], errs[i] = segment.RowGroups(segs[i].Path)
			}
		}()
	}
	wg.Wait()
	return groups, errs
}

// mergeParts merges the parallel pass's reducers into r. The parts are
// not used again: when r is empty the first one is taken over rather than
// copied, and the others' runs are interned into it through the index its
// scanner built while reading (scanners[0]), a batch at a time, instead of
// one lookup at a time through a second index of the same table.
func mergeParts(r *outcome.Reducer, parts []*outcome.Reducer, scanners []*segment.Scanner) error {
	if !r.Empty() {
		for _, p := range parts {
			if err := r.Merge(p); err != nil {
				return err
			}
		}
		return nil
	}
	table := parts[0].RunSymbols()
	if err := r.MergeOwned(parts[0]); err != nil {
		return err
	}
	if r.RunSymbols() != table { // not taken over: no index of r's table here
		for _, p := range parts[1:] {
			if err := r.Merge(p); err != nil {
				return err
			}
		}
		return nil
	}
	var ids []int32
	for _, p := range parts[1:] {
		runs := p.RunSymbols()
		ids = slices.Grow(ids[:0], runs.Len())[:runs.Len()]
		scanners[0].InternRunIDs(ids, runs)
		if err := r.MergeInterned(p, ids); err != nil {
			return err
		}
	}
	return nil
}

// parallelPass reduces the row groups of work not in bad segments with
// procs workers. It returns the workers' reducers and, per segment, whether
// a row group failed (the first failure by row group), and the scanner
// each reducer was filled through (its intern index serves the merge).
// report is called, under a lock, when all of a segment's row groups are
// done.
func parallelPass(ctx context.Context, segs []segment.Segment, work []rowGroup, bad map[int]error,
	ropts outcome.Options, procs int, hugePages bool, report func(int)) ([]*outcome.Reducer, []*segment.Scanner, []segTally, error) {
	tallies := make([]segTally, len(segs))
	for _, w := range work {
		tallies[w.seg].groups++
	}
	parts := make([]*outcome.Reducer, procs)
	scanners := make([]*segment.Scanner, procs)
	for i := range parts {
		p, err := outcome.NewReducer(ropts)
		if err != nil {
			return nil, nil, nil, err
		}
		parts[i] = p
		scanners[i] = segment.NewCheckingScanner(p.Fields(), p.CheckFields(), p.RunSymbols(), p.Symbols())
		if hugePages {
			p.UseHugePages()
			scanners[i].UseHugePages()
		}
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
			p, sc := parts[wi], scanners[wi]
			defer sc.Close() // the file it keeps open; it stays usable
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
			return nil, nil, nil, err
		}
	}
	return parts, scanners, tallies, nil
}
