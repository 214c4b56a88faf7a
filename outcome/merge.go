package outcome

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/verdryx/verdryx/internal/prefetch"
)

// ErrIncompatible marks a Merge of reducers whose
// options (By, From, To) differ: their states do not add up.
var ErrIncompatible = errors.New("reducers have different options")

// Merge folds o's state into r, as if every call and record added to o had
// been added to r: runs are united by run id, counts and costs summed, the
// latest call time kept, and of each run's outcome (and agent id) the one
// with the greater (step, position) key is kept (see SetPos). When every
// call was offered at its position in one sequential order, merging any
// split of the calls, in any order and grouping, gives the Report and SLO
// of the sequential reduction, field for field.
//
// Both reducers must have equal Options (else ErrIncompatible). o is not
// changed and may be merged again elsewhere; merging
// the same calls twice counts them twice. A cost sum that overflows
// saturates and becomes r's Err, as in Add. r's position (SetPos) is left
// as it is. Merge reads o while writing r: neither may be used
// concurrently, and r must not be o.
func (r *Reducer) Merge(o *Reducer) error { return r.merge(o, nil) }

// MergeInterned is Merge with o's runs already interned into r's run table
// by the caller: runIDs[i] is the id in r.RunSymbols() of o's run i (the
// string o.RunSymbols().Name(i)), for i up to o.RunSymbols().Len(), as
// package segment's Scanner.InternRunIDs gives them for the scanner that
// filled r. It spares Merge's lookups of o's runs one at a time through r's
// table (which a table filled by a scanner has not indexed). A runIDs of
// the wrong length, or naming an id r's table never issued, is an error
// and r is not changed.
func (r *Reducer) MergeInterned(o *Reducer, runIDs []int32) error {
	if len(runIDs) != o.runSyms.Len() {
		return fmt.Errorf("merge: %d run ids for %d runs", len(runIDs), o.runSyms.Len())
	}
	n := int32(r.runSyms.Len())
	for _, id := range runIDs {
		if id < 0 || id >= n {
			return fmt.Errorf("merge: run id %d not in the table (%d runs)", id, n)
		}
	}
	return r.merge(o, runIDs)
}

func (r *Reducer) merge(o *Reducer, runIDs []int32) error {
	switch {
	case r == o:
		return errors.New("merge: a reducer cannot be merged into itself")
	case !sameOptions(r.opts, o.opts):
		return fmt.Errorf("merge: %w", ErrIncompatible)
	}
	r.sync()
	symMap := make([]int32, o.syms.Len())
	for i := range symMap {
		symMap[i] = r.syms.InternString(o.syms.Name(int32(i)))
	}
	r.sync()
	// Merging into a reducer that knows fewer runs (the first merge of a
	// parallel pass is into an empty one) adds up to that many: room for
	// them is made once rather than by doubling as they come.
	if n := o.runSyms.Len(); runIDs == nil && r.runSyms.Len() < n {
		r.runSyms.Reserve(n - r.runSyms.Len())
	}
	runMap := make([]int32, len(o.runs))
	base := unsafe.Pointer(unsafe.SliceData(r.runs))
	for i := range o.runs {
		// With the ids known up front, the states they name (at random
		// in r) are asked for ahead, as AddBatch does.
		if runIDs != nil && i%prefetchAhead == 0 && i+prefetchAhead < len(runIDs) {
			prefetch.Indexed(base, runIDs[i+prefetchAhead:min(len(runIDs), i+2*prefetchAhead)], stateShift)
		}
		src := &o.runs[i]
		if src.Calls == 0 {
			runMap[i] = -1
			continue
		}
		var id int32
		if runIDs != nil {
			id = runIDs[i]
		} else {
			id = r.runSyms.InternString(o.runSyms.Name(int32(i)))
			r.sync()
		}
		runMap[i] = id
		rs := &r.runs[id]
		in := *src
		in.Outcome.Value, in.Agent.Value = symMap[src.Outcome.Value], symMap[src.Agent.Value]
		if err := r.mergeRun(rs, &in, id); err != nil {
			return err
		}
	}
	for i := range o.anon {
		a := o.anon[i]
		a.Outcome.Value, a.Agent.Value = symMap[a.Outcome.Value], symMap[a.Agent.Value]
		r.anon = append(r.anon, a)
		r.anonGrp = append(r.anonGrp, symMap[o.anonGrp[i]])
	}
	for i := range o.flat {
		f := o.flat[i]
		f.Outcome.Value = symMap[f.Outcome.Value]
		r.flat = append(r.flat, f)
	}
	for k, acc := range o.groups {
		run := runMap[k>>32]
		if run < 0 {
			continue // cannot happen: a group entry implies a call
		}
		key := uint64(run)<<32 | uint64(uint32(symMap[int32(uint32(k))]))
		g := r.groups[key]
		if g == nil {
			g = &groupAcc{}
			r.groups[key] = g
		}
		g.calls += acc.calls
		g.blocked += acc.blocked
		r.addCost(&g.cost, acc.cost, run)
	}
	r.stats.Calls += o.stats.Calls
	r.stats.OutsideWindow += o.stats.OutsideWindow
	r.stats.DroppedUntagged += o.stats.DroppedUntagged
	r.stats.Records += o.stats.Records
	if r.err == nil && o.err != nil {
		r.err = o.err
	}
	return nil
}

// MergeOwned is Merge for an o its caller gives up: o must not be used
// afterwards. When r is empty (nothing added, merged or restored since
// NewReducer), r takes o's state as it is
// instead of copying it run by run, keeping its own position; the Report,
// SLO and Stats are those Merge would give. Otherwise
// it is Merge.
func (r *Reducer) MergeOwned(o *Reducer) error {
	if r == o || !sameOptions(r.opts, o.opts) || !r.empty() {
		return r.Merge(o)
	}
	pos := r.pos
	*r = *o
	r.pos = pos
	*o = Reducer{} // any further use of o fails loudly rather than sharing r's state
	return nil
}

// Empty reports whether nothing was ever added to, merged into or
// restored into r: whether MergeOwned would take its argument over.
func (r *Reducer) Empty() bool { return r.empty() }

// empty reports whether nothing was ever added to, merged into or
// restored into r.
func (r *Reducer) empty() bool {
	return r.err == nil && r.stats == Stats{} && len(r.runs) == 0 && len(r.anon) == 0 &&
		len(r.flat) == 0 && len(r.groups) == 0 && r.runSyms.Len() == 1 && r.syms.Len() == 1
}

// sameOptions reports whether two reducers reduce alike.
func sameOptions(a, b Options) bool {
	return a.By == b.By && a.From.Equal(b.From) && a.To.Equal(b.To) && a.CostOnly == b.CostOnly
}
