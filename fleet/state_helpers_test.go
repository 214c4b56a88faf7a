package fleet

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/tracemsg"
)

// The helpers below are partstate's test helpers, for the tests here that
// drive a partition state beside a fleet.

// day0 is the midnight the days of these tests start at.
var day0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// randomDayCalls draws n calls of runs (and untagged and tagged
// independent calls) spread over days days, some runs spanning several.
// Steps are unique (the call's index, shuffled): "the last outcome by
// step" needs no tie-break by the records' order, which a reducer fed in
// slice order and a partition applying records by ts see differently.
func randomDayCalls(rng *rand.Rand, n, days int) []calls.Call {
	outcomes := []string{"", "", "", "case_resolved", "escalated", "abandoned"}
	agents := []string{"", "agent://t/a", "agent://t/b"}
	decisions := []string{"allow", "allow", "allow", "budget_exceeded", "wardryx_deny", "cache_hit"}
	out := make([]calls.Call, n)
	steps := rng.Perm(n)
	for i := range out {
		c := calls.Call{TSMillis: day0.UnixMilli() + rng.Int64N(int64(days)*partstate.DayMillis), Decision: decisions[rng.IntN(len(decisions))],
			CostMicroUSD: rng.Int64N(5000), Step: uint32(steps[i]), HasStep: true,
			Outcome: outcomes[rng.IntN(len(outcomes))], AgentID: agents[rng.IntN(len(agents))], Model: "m"}
		if rng.IntN(10) != 0 {
			c.RunID, c.HasRunID = fmt.Sprintf("run-%03d", rng.IntN(60)), true
		}
		out[i] = c
	}
	return out
}

// applyAll applies cs to s as records (key i), one message each.
func applyAll(t *testing.T, s *partstate.State, cs []calls.Call, from int) {
	t.Helper()
	for i := range cs {
		c := cs[i]
		key := fmt.Sprintf("call-%d", from+i)
		s.Begin()
		require.NoError(t, s.Apply(tracemsg.HashKey(key), &c, partstate.RecordOrder(c.TSMillis, key)))
	}
	s.Settle(true)
}

// direct reduces cs with opts.
func direct(t *testing.T, cs []calls.Call, opts outcome.Options) []byte {
	t.Helper()
	r, err := outcome.NewReducer(opts)
	require.NoError(t, err)
	for _, c := range cs {
		r.Add(c)
	}
	return reportJSON(t, r)
}

// memLoad is a day-table loader over tables kept by the test.
type memLoad map[int32][]byte

func (m memLoad) load(d int32, ref *partstate.DayRef) (*partstate.DayTable, error) {
	b, ok := m[d]
	if !ok {
		return nil, fmt.Errorf("no table for day %d", d)
	}
	return partstate.DecodeDayTable(b)
}

func (m memLoad) keys(d int32, ref *partstate.DayRef) ([]byte, error) {
	b, ok := m[d]
	if !ok {
		return nil, fmt.Errorf("no table for day %d", d)
	}
	_, _, _, keys, err := partstate.DayTableKeys(b)
	return keys, err
}

func (m memLoad) keep(tables []*partstate.DayTable) {
	for _, t := range tables {
		m[t.Day] = t.Encode(nil)
	}
}
