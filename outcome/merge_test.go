package outcome

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
)

// input is one thing offered to a reducer: a call or a flat record.
type input struct {
	call   calls.Call
	record bool
}

const mergeT0Unix = 1793491200 // 2026-11-01T00:00:00Z

func mergeT0() time.Time { return time.Unix(mergeT0Unix, 0).UTC() }

// genInputs returns n random inputs built to hit every rule: few steps per
// run (equal-step ties of different tags and agents), blocked and wardryx
// decisions, calls outside a [t0+1h, t0+5h) window, independent calls
// (tagged and untagged) and flat records.
func genInputs(rng *rand.Rand, n, runs int) []input {
	tags := []string{"", "", "", "case_resolved", "escalated", "abandoned"}
	agents := []string{"", "agent://fleet.example/a", "agent://fleet.example/b", "not-canonical"}
	decisions := []string{"allow", "allow", "allow", "cache_hit", "loop_detected", "killed", "wardryx_deny", "wardryx_hold"}
	models := []string{"m1", "m2", "m3"}
	out := make([]input, n)
	for i := range out {
		c := calls.Call{
			RunID: fmt.Sprintf("run-%03d", rng.IntN(runs)), HasRunID: true,
			Step: uint32(rng.IntN(4)), HasStep: true,
			Decision:     decisions[rng.IntN(len(decisions))],
			CostMicroUSD: int64(rng.IntN(1000)),
			Outcome:      tags[rng.IntN(len(tags))],
			AgentID:      agents[rng.IntN(len(agents))],
			Model:        models[rng.IntN(len(models))],
			KeyID:        fmt.Sprintf("k%d", rng.IntN(3)),
			TSMillis:     mergeT0().Add(time.Duration(rng.IntN(6*3600)) * time.Second).UnixMilli(),
		}
		switch p := rng.IntN(100); {
		case p < 5:
			c.RunID, c.HasRunID = "", false
		case p < 7:
			out[i] = input{call: calls.Call{Outcome: c.Outcome, CostMicroUSD: c.CostMicroUSD}, record: true}
			continue
		}
		out[i] = input{call: c}
	}
	return out
}

func offer(r *Reducer, in input) {
	if in.record {
		r.AddRecord(in.call.Outcome, in.call.CostMicroUSD)
		return
	}
	r.Add(in.call)
}

// addBatch offers ins (calls with run ids) to r as one Batch of the
// columns r.Fields names (the others nil, as a Scanner leaves them).
func addBatch(r *Reducer, ins []input) {
	b := calls.Batch{Len: len(ins), HasRunID: true}
	g := r.Fields()
	for _, in := range ins {
		c := in.call
		if g.Has(calls.FieldTSMillis) {
			b.TSMillis = append(b.TSMillis, c.TSMillis)
		}
		b.RunID = append(b.RunID, r.RunSymbols().InternString(c.RunID))
		b.Decision = append(b.Decision, r.Symbols().InternString(c.Decision))
		b.CostMicroUSD = append(b.CostMicroUSD, c.CostMicroUSD)
		b.Step = append(b.Step, c.Step)
		if g.Has(calls.FieldAgentID) {
			b.AgentID = append(b.AgentID, r.Symbols().InternString(c.AgentID))
		}
		b.Outcome = append(b.Outcome, r.Symbols().InternString(c.Outcome))
		if g.Has(calls.FieldModel) {
			b.Model = append(b.Model, r.Symbols().InternString(c.Model))
		}
		if g.Has(calls.FieldKeyID) {
			b.KeyID = append(b.KeyID, r.Symbols().InternString(c.KeyID))
		}
	}
	r.AddBatch(&b)
}

type reduced struct {
	Report *Report
	SLO    *SLOReport
	Stats  Stats
	State  []string
}

func reduce(t *testing.T, r *Reducer) reduced {
	t.Helper()
	opts := DefaultSLOOptions()
	opts.MinEvents = 1
	slo, err := r.SLO(opts, func(s string) bool { return len(s) > 6 && s[:6] == "agent:" })
	require.NoError(t, err)
	return reduced{r.Report(), slo, r.Stats(), canonState(r)}
}

// canonState is r's whole state (every run, independent call, flat
// record and run x group) by name, sorted: equal for equal states,
// whatever the order calls were added in or the symbol ids they got.
func canonState(r *Reducer) []string {
	var out []string
	run := func(kind, name string, rs *runState) {
		out = append(out, fmt.Sprintf("%s %q: calls %d blocked %d refused %d cost %d last %d outcome %q at %d/%d agent %q at %d/%d",
			kind, name, rs.Calls, rs.Blocked, rs.Refused, rs.Cost, rs.LastTS,
			r.syms.Name(rs.Outcome.Value), rs.Outcome.Step, rs.Outcome.Pos,
			r.syms.Name(rs.Agent.Value), rs.Agent.Step, rs.Agent.Pos))
	}
	for i := range r.runs {
		if r.runs[i].Calls > 0 {
			run("run", r.runSyms.Name(int32(i)), &r.runs[i])
		}
	}
	for i := range r.anon {
		run("independent", r.syms.Name(r.anonGrp[i]), &r.anon[i])
	}
	for i := range r.flat {
		run("flat", "", &r.flat[i])
	}
	for k, g := range r.groups {
		out = append(out, fmt.Sprintf("group %q of run %q: calls %d blocked %d cost %d",
			r.syms.Name(int32(uint32(k))), r.runSyms.Name(int32(k>>32)), g.calls, g.blocked, g.cost))
	}
	slices.Sort(out)
	return out
}

func mergeOptions() []Options {
	return []Options{
		{},
		{By: calls.ColModel},
		{By: calls.ColAgentID},
		{From: mergeT0().Add(time.Hour), To: mergeT0().Add(5 * time.Hour)},
		{By: calls.ColKeyID, From: mergeT0().Add(2 * time.Hour)},
	}
}

// TestMergeEqualsSequential splits the inputs among K reducers in random
// orders (whole shuffles with a position per call, and contiguous chunks fed
// as batches), merges them in a random order, and wants the sequential
// reduction's report, SLO report, stats and state, field for field.
func TestMergeEqualsSequential(t *testing.T) {
	for seed := range uint64(12) {
		for oi, opts := range mergeOptions() {
			t.Run(fmt.Sprintf("seed=%d/opts=%d", seed, oi), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(oi)))
				ins := genInputs(rng, 200+rng.IntN(600), 5+rng.IntN(60))
				seq := newReducer(t, opts)
				for _, in := range ins {
					offer(seq, in)
				}
				want := reduce(t, seq)
				for _, k := range []int{1, 2, 3, 7} {
					parts := make([]*Reducer, k)
					for i := range parts {
						parts[i] = newReducer(t, opts)
					}
					if rng.IntN(2) == 0 {
						// Every input alone, at its position, anywhere.
						for _, i := range rng.Perm(len(ins)) {
							p := parts[rng.IntN(k)]
							p.SetPos(uint64(i))
							offer(p, ins[i])
						}
					} else {
						// Contiguous chunks ("row groups") in random order.
						var cuts []int
						for i := 0; i < len(ins); i += 1 + rng.IntN(40) {
							cuts = append(cuts, i)
						}
						for _, ci := range rng.Perm(len(cuts)) {
							lo, hi := cuts[ci], len(ins)
							if ci+1 < len(cuts) {
								hi = cuts[ci+1]
							}
							p := parts[rng.IntN(k)]
							p.SetPos(uint64(lo))
							chunk := ins[lo:hi]
							if batchable(chunk) && rng.IntN(2) == 0 {
								addBatch(p, chunk)
							} else {
								for _, in := range chunk {
									offer(p, in)
								}
							}
						}
					}
					merged := newReducer(t, opts)
					for _, i := range rng.Perm(k) {
						require.NoError(t, merged.Merge(parts[i]))
					}
					got := reduce(t, merged)
					require.Equal(t, want.Report, got.Report, "k=%d", k)
					require.Equal(t, want.SLO, got.SLO, "k=%d", k)
					require.Equal(t, want.Stats, got.Stats, "k=%d", k)
					require.Equal(t, want.State, got.State, "k=%d: state", k)
				}
			})
		}
	}
}

func batchable(ins []input) bool {
	for _, in := range ins {
		if in.record || !in.call.HasRunID {
			return false
		}
	}
	return true
}

// TestMergeEqualStepTie pins the tie rule across reducers: two tags at the
// same step, the one at the greater position wins whichever reducer saw it
// and whichever is merged first.
func TestMergeEqualStepTie(t *testing.T) {
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		a, b := newReducer(t, Options{}), newReducer(t, Options{})
		b.SetPos(10)
		b.Add(call("r", 3, "allow", 1, "escalated"))
		a.SetPos(5)
		a.Add(call("r", 3, "allow", 1, "abandoned"))
		a.Add(call("r", 2, "allow", 1, "case_resolved"))
		m := newReducer(t, Options{})
		parts := []*Reducer{a, b}
		require.NoError(t, m.Merge(parts[order[0]]))
		require.NoError(t, m.Merge(parts[order[1]]))
		require.Equal(t, []row{{"escalated", 1, 3, 0, 3}}, rows(t, m))
	}
}

func TestMergeRefusals(t *testing.T) {
	a := newReducer(t, Options{})
	require.Error(t, a.Merge(a))
	require.ErrorIs(t, a.Merge(newReducer(t, Options{By: calls.ColModel})), ErrIncompatible)
	require.ErrorIs(t, a.Merge(newReducer(t, Options{From: mergeT0()})), ErrIncompatible)
	require.NoError(t, a.Merge(newReducer(t, Options{})))
}

func TestMergeKeepsOverflow(t *testing.T) {
	a, b := newReducer(t, Options{}), newReducer(t, Options{})
	a.Add(call("r", 0, "allow", 1<<62, "case_resolved"))
	b.Add(call("r", 1, "allow", 1<<62, ""))
	b.Add(call("r", 2, "allow", 1<<62, ""))
	require.NoError(t, a.Merge(b))
	require.ErrorIs(t, a.Err(), ErrOverflow)
	_, err := a.CheckedReport()
	require.ErrorIs(t, err, ErrOverflow)
}

// TestMergeOwnedEqualsMerge: MergeOwned into an empty reducer takes the
// part's state (and leaves the part unusable), into a non-empty one it
// merges; either way the report, SLO report, stats and state are
// those of Merge, for every option set, and the receiver keeps its
// position.
func TestMergeOwnedEqualsMerge(t *testing.T) {
	for oi, opts := range mergeOptions() {
		rng := rand.New(rand.NewPCG(uint64(oi), 99))
		ins := genInputs(rng, 600, 40)
		part := func(lo, hi int) *Reducer {
			p := newReducer(t, opts)
			for _, in := range ins[lo:hi] {
				offer(p, in)
			}
			return p
		}
		want := newReducer(t, opts)
		want.SetPos(77)
		require.NoError(t, want.Merge(part(0, 300)))
		require.NoError(t, want.Merge(part(300, 600)))

		got := newReducer(t, opts)
		got.SetPos(77)
		first := part(0, 300)
		require.NoError(t, got.MergeOwned(first))
		require.Nil(t, first.runSyms, "the part's state was taken, not copied")
		second := part(300, 600)
		require.NoError(t, got.MergeOwned(second))
		require.NotNil(t, second.runSyms, "into a non-empty reducer MergeOwned merges")
		require.Equal(t, reduce(t, want), reduce(t, got), "opts %d", oi)
		require.Equal(t, uint64(77), got.pos)

		// Incompatible options are refused as by Merge.
		other := newReducer(t, Options{By: "model"})
		if opts.By != "model" || !opts.From.IsZero() || !opts.To.IsZero() {
			require.ErrorIs(t, newReducer(t, opts).MergeOwned(other), ErrIncompatible)
		}
	}
}

// TestMergeInternedEqualsMerge: a part's runs interned into the receiver's
// table by the caller (here in reverse order, with runs the receiver does
// not know yet) and merged with MergeInterned give Merge's report, SLO
// report, stats and state; run ids of the wrong count or out of the
// table's range are refused and change nothing.
func TestMergeInternedEqualsMerge(t *testing.T) {
	for oi, opts := range mergeOptions() {
		rng := rand.New(rand.NewPCG(uint64(oi), 7))
		ins := genInputs(rng, 600, 40)
		part := func(lo, hi int) *Reducer {
			p := newReducer(t, opts)
			for _, in := range ins[lo:hi] {
				offer(p, in)
			}
			return p
		}
		want := part(0, 250)
		require.NoError(t, want.Merge(part(250, 600)))

		got, o := part(0, 250), part(250, 600)
		before := reduce(t, got)
		ids := make([]int32, o.RunSymbols().Len())
		require.ErrorContains(t, got.MergeInterned(o, ids[1:]), "run ids for")
		bad := append([]int32(nil), ids...)
		bad[len(bad)-1] = int32(got.RunSymbols().Len() + 5)
		require.ErrorContains(t, got.MergeInterned(o, bad), "not in the table")
		require.Equal(t, before, reduce(t, got), "a refused merge changes nothing")
		for i := len(ids) - 1; i >= 0; i-- {
			ids[i] = got.RunSymbols().InternString(o.RunSymbols().Name(int32(i)))
		}
		require.NoError(t, got.MergeInterned(o, ids))
		require.Equal(t, reduce(t, want), reduce(t, got), "opts %d", oi)
	}
}

// TestCostOnlyReportEqualsFull feeds the same calls to a full reducer and
// to a CostOnly one (batches without the columns it does not read, some
// parts merged) and wants the same cost report; a CostOnly
// reducer refuses what needs the columns it skipped.
func TestCostOnlyReportEqualsFull(t *testing.T) {
	for seed := range uint64(8) {
		for oi, opts := range mergeOptions() {
			rng := rand.New(rand.NewPCG(seed, uint64(oi)))
			ins := genInputs(rng, 600, 40)
			lean := opts
			lean.CostOnly = true
			full := newReducer(t, opts)
			parts := []*Reducer{newReducer(t, lean), newReducer(t, lean)}
			require.False(t, parts[0].Fields().Has(calls.FieldAgentID) && opts.By != calls.ColAgentID)
			require.Equal(t, opts.From.IsZero() && opts.To.IsZero(), !parts[0].Fields().Has(calls.FieldTSMillis))
			for lo := 0; lo < len(ins); {
				hi := min(len(ins), lo+1+rng.IntN(50))
				var batch []input
				for _, in := range ins[lo:hi] {
					if !in.record && in.call.HasRunID {
						batch = append(batch, in)
					}
				}
				p := parts[rng.IntN(len(parts))]
				for _, r := range []*Reducer{full, p} {
					r.SetPos(uint64(lo))
					for _, in := range ins[lo:hi] {
						if in.record || !in.call.HasRunID {
							offer(r, in)
						}
					}
					addBatch(r, batch)
				}
				lo = hi
			}
			lr := newReducer(t, lean)
			for _, p := range parts {
				require.NoError(t, lr.Merge(p))
			}
			require.Equal(t, full.Report(), lr.Report(), "seed %d options %d", seed, oi)
			require.ErrorIs(t, full.Merge(lr), ErrIncompatible)
			_, err := lr.SLO(DefaultSLOOptions(), nil)
			require.ErrorIs(t, err, errCostOnly)
		}
	}
}
