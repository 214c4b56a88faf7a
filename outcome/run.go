package outcome

import (
	"errors"
	"fmt"
	"math"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/wire"
)

// position is a call's place in its input's order, compared word by
// word: the tie-break of "last outcome by step" between calls of a run at
// the same step. The Reducer's is seq; package partstate's its Order. (A
// type set, not a Compare method: a generic method's call goes through a
// dictionary, which took the Reducer's per-row fold 16% more
// instructions.)
type position interface{ ~[1]uint64 | ~[4]uint64 }

// seq is a position in one sequential order (see Reducer.SetPos).
type seq [1]uint64

// count is the type of a run's call counts: uint32 in the Reducer (its
// run states fill one cache line), uint64 in partition state.
type count interface{ ~uint32 | ~uint64 }

// later reports whether a value at (step, pos) replaces one kept at
// (keptStep, keptPos): the greater step wins, then the greater position;
// an equal key (the same call offered again) replaces too, so a
// sequential fold keeps "later read wins on ties". It is the one
// tie-break of a run's outcome and agent.
func later[P position](step uint32, pos P, keptStep uint32, keptPos P) bool {
	if step != keptStep {
		return step > keptStep
	}
	for i := range len(pos) {
		if pos[i] != keptPos[i] {
			return pos[i] > keptPos[i]
		}
	}
	return true
}

// Kept is a run's outcome or agent: the non-empty Value of the call with
// the latest (Step, Pos) key, or the zero value when no call had one.
type Kept[V comparable, P position] struct {
	Value V
	Step  uint32
	Pos   P
}

// offer keeps v (at step, pos) when it is not the zero value and comes
// later than what is kept.
func (k *Kept[V, P]) offer(v V, step uint32, pos P) {
	var zero V
	if v != zero && (k.Value == zero || later(step, pos, k.Step, k.Pos)) {
		k.Value, k.Step, k.Pos = v, step, pos
	}
}

// Run is the fold state of one run (or one independent call): its calls,
// blocked calls (counted, never costed), refused calls (blocked or held
// or denied by wardryx), the cost of its non-blocked calls in micro-USD,
// its newest ts_millis, and its outcome and agent (Kept). It is a
// function of the set of calls folded, never of the order they came in,
// given each call its position. Both the Reducer (symbol ids, positions
// in one sequential order) and package partstate's partition state
// (strings, partstate.Order) fold runs with it.
type Run[N count, V comparable, P position] struct {
	Cost                    int64
	LastTS                  int64
	Calls, Blocked, Refused N
	Outcome, Agent          Kept[V, P]
}

// errTooManyCalls marks a merge whose call counts would overflow.
var errTooManyCalls = errors.New("call count overflows")

// Add folds one call in: its decision class, cost, step and position,
// outcome and agent (zero: none) and ts_millis. It returns false, changing
// nothing, when the run's cost would overflow int64.
func (a *Run[N, V, P]) Add(cls calls.Class, cost int64, step uint32, pos P, outcome, agent V, ts int64) bool {
	if cls != calls.ClassBlocked {
		s, ok := wire.AddInt64(a.Cost, cost)
		if !ok {
			return false
		}
		a.Cost = s
	}
	a.Calls++
	if cls != calls.ClassAllowed {
		a.Refused++
		if cls == calls.ClassBlocked {
			a.Blocked++
		}
	}
	// Kept.offer, written out: the Reducer's per-row fold took 17% more
	// instructions through the two (inlined) calls.
	var zero V
	if k := &a.Outcome; outcome != zero && (k.Value == zero || later(step, pos, k.Step, k.Pos)) {
		k.Value, k.Step, k.Pos = outcome, step, pos
	}
	if k := &a.Agent; agent != zero && (k.Value == zero || later(step, pos, k.Step, k.Pos)) {
		k.Value, k.Step, k.Pos = agent, step, pos
	}
	if ts > a.LastTS || a.Calls == 1 {
		a.LastTS = ts
	}
	return true
}

// Merge folds b (the state of other calls of the same run) into a,
// exactly as adding b's calls after a's would: counts and cost add, the
// newest ts is the larger, and the outcome and agent kept are those of
// the latest (step, position) of either. It fails, changing nothing, when
// the cost (ErrOverflow) or a count would overflow.
func (a *Run[N, V, P]) Merge(b *Run[N, V, P]) error {
	if b.Calls == 0 {
		return nil
	}
	// The count first: a caller that saturates the cost on ErrOverflow
	// (Reducer.mergeRun) must not have changed a run it cannot merge.
	if a.Calls+b.Calls < a.Calls {
		return fmt.Errorf("%d + %d calls: %w", a.Calls, b.Calls, errTooManyCalls)
	}
	cost, ok := wire.AddInt64(a.Cost, b.Cost)
	if !ok {
		return fmt.Errorf("cost_microusd %d + %d: %w", a.Cost, b.Cost, ErrOverflow)
	}
	if a.Calls == 0 || b.LastTS > a.LastTS {
		a.LastTS = b.LastTS
	}
	a.Cost = cost
	a.Calls += b.Calls
	a.Blocked += b.Blocked
	a.Refused += b.Refused
	a.Outcome.offer(b.Outcome.Value, b.Outcome.Step, b.Outcome.Pos)
	a.Agent.offer(b.Agent.Value, b.Agent.Step, b.Agent.Pos)
	return nil
}

// AddRun adds a run whose calls were folded elsewhere (package
// partstate's partition state) as its state a: the run id, or with hasID
// false an independent call (one without an outcome counts as dropped,
// as Add drops it). Its calls count in Stats.Calls and are taken as
// inside the window: the caller applied it. a's outcome and agent keep
// their steps, but their positions are of another order: at an equal
// step, a call of the run added to r afterwards wins, so a run added so
// is whole. It fails, adding nothing, on a grouped reducer (a run's
// state does not split its calls by group) and when a's calls do not fit
// a Reducer's counts.
func AddRun[P position](r *Reducer, id string, hasID bool, a *Run[uint64, string, P]) error {
	switch {
	case r.grouped:
		return fmt.Errorf("run %q: a run's state keeps no split of its calls by %s: the report cannot be grouped", id, r.opts.By)
	case a.Calls > math.MaxUint32:
		return fmt.Errorf("run %q: %d calls: %w", id, a.Calls, errTooManyCalls)
	}
	in := runState{Cost: a.Cost, LastTS: a.LastTS, Calls: uint32(a.Calls), Blocked: uint32(a.Blocked), Refused: uint32(a.Refused),
		Outcome: Kept[int32, seq]{Value: r.syms.InternString(a.Outcome.Value), Step: a.Outcome.Step},
		Agent:   Kept[int32, seq]{Value: r.syms.InternString(a.Agent.Value), Step: a.Agent.Step}}
	n := int64(in.Calls)
	switch {
	case hasID:
		run := r.runSyms.InternString(id)
		r.sync()
		if err := r.mergeRun(&r.runs[run], &in, run); err != nil {
			return err
		}
	case in.Outcome.Value == 0:
		r.stats.DroppedUntagged += n
	default:
		r.anon = append(r.anon, in)
		r.anonGrp = append(r.anonGrp, 0)
	}
	r.stats.Calls += n
	return nil
}

// AddStats adds the counts of calls folded elsewhere that are in no run
// (calls outside the window, untagged independent calls dropped) to r's
// Stats, field by field.
func (r *Reducer) AddStats(s Stats) {
	r.stats.Calls += s.Calls
	r.stats.OutsideWindow += s.OutsideWindow
	r.stats.DroppedUntagged += s.DroppedUntagged
	r.stats.Records += s.Records
}

// mergeRun folds in (the state of other calls of run id, symbols of r)
// into rs. A cost sum that overflows saturates and becomes r's Err, as in
// Add; in is changed.
func (r *Reducer) mergeRun(rs, in *runState, id int32) error {
	err := rs.Merge(in)
	if errors.Is(err, ErrOverflow) {
		r.addCost(&rs.Cost, in.Cost, id)
		in.Cost = 0
		err = rs.Merge(in)
	}
	if err != nil {
		return fmt.Errorf("merge: run %q: %w", r.runSyms.Name(id), err)
	}
	return nil
}
