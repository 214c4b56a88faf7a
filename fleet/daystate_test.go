package fleet

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/store"
)

func TestDayOfFloorsToUTCDays(t *testing.T) {
	assert.EqualValues(t, 0, dayOf(0))
	assert.EqualValues(t, 0, dayOf(dayMillis-1))
	assert.EqualValues(t, 1, dayOf(dayMillis))
	assert.EqualValues(t, -1, dayOf(-1))
	assert.EqualValues(t, -1, dayOf(-dayMillis))
	assert.EqualValues(t, -2, dayOf(-dayMillis-1))
	assert.NotEqualValues(t, undated, dayOf(math.MinInt64), "no ts is undated")
	assert.Equal(t, "2025-12-02", dayString(dayOf(1764633600000+5)))
}

// TestPartialsMergeToTheSequentialState: a run's calls split by day (or
// any other way) into partial states and merged in any order give the
// state of adding every call in one pass.
func TestPartialsMergeToTheSequentialState(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	outcomes := []string{"", "", "case_resolved", "escalated", "abandoned"}
	agents := []string{"", "agent://a", "agent://b"}
	decisions := []string{"allow", "allow", "budget_exceeded", "wardryx_deny", "cache_hit"}
	for trial := range 300 {
		n := 1 + rng.IntN(40)
		cs := make([]calls.Call, n)
		orders := make([]callOrder, n)
		for i := range cs {
			cs[i] = calls.Call{RunID: "r", HasRunID: true, TSMillis: int64(rng.IntN(5*dayMillis)) - dayMillis,
				Step: uint32(rng.IntN(6)), HasStep: rng.IntN(8) != 0, Outcome: outcomes[rng.IntN(len(outcomes))],
				AgentID: agents[rng.IntN(len(agents))], Decision: decisions[rng.IntN(len(decisions))],
				CostMicroUSD: int64(rng.IntN(1000))}
			orders[i] = callOrder{uint64(rng.IntN(3)), uint64(rng.IntN(3)), 0, uint64(i)}
		}
		var whole runAgg
		parts := map[int32]*runAgg{}
		for i := range cs {
			require.NoError(t, whole.add(&cs[i], orders[i]))
			d := dayOf(cs[i].TSMillis)
			if parts[d] == nil {
				parts[d] = &runAgg{}
			}
			require.NoError(t, parts[d].add(&cs[i], orders[i]))
		}
		days := make([]int32, 0, len(parts))
		for d := range parts {
			days = append(days, d)
		}
		rng.Shuffle(len(days), func(i, j int) { days[i], days[j] = days[j], days[i] })
		var merged runAgg
		for _, d := range days {
			require.NoError(t, merged.merge(parts[d]))
		}
		whole.gen, merged.gen = 0, 0
		require.Equal(t, whole, merged, "trial %d", trial)
	}
}

func TestMergeRefusesACostOverflow(t *testing.T) {
	a := runAgg{calls: 1, cost: 1 << 62, lastTS: 5}
	b := runAgg{calls: 1, cost: 1 << 62, lastTS: 9}
	before := a
	require.ErrorIs(t, a.merge(&b), errOverflow)
	assert.Equal(t, before, a, "a failed merge changes nothing")
}

func TestDayTableRoundTripsAndRefusesDamage(t *testing.T) {
	tb := newDayTable(3, 8, dayOf(1764633600000))
	tb.rev, tb.dropped = 4, 2
	require.NoError(t, tb.add("rrun-1", &runAgg{calls: 3, refused: 1, cost: 700, lastTS: 1764633600123, outcome: "case_resolved", outStep: 2, outOrder: callOrder{1, 2, 3, 4}}))
	require.NoError(t, tb.add("rrun-1", &runAgg{calls: 1, cost: 5, lastTS: 1764633600001, agent: "agent://x", agentStep: 1}))
	require.NoError(t, tb.add("ikey", &runAgg{calls: 1, cost: 9, lastTS: 1764633600200, outcome: "escalated"}))
	k := hashKey("call-1")
	tb.keys = append(tb.keys, k[:]...)
	b := tb.encode([]byte("prefix"))
	got, err := decodeDayTable(b[len("prefix"):])
	require.NoError(t, err)
	assert.Equal(t, tb, got)
	assert.EqualValues(t, 7, got.calls(), "5 run calls and 2 dropped")
	assert.Len(t, got.keys, store.KeySize)

	for i := len("prefix"); i < len(b); i += 7 {
		bad := append([]byte(nil), b[len("prefix"):]...)
		bad[i-len("prefix")] ^= 0x40
		_, err := decodeDayTable(bad)
		assert.Error(t, err, "byte %d flipped", i)
	}
	_, err = decodeDayTable(b[len("prefix") : len(b)-1])
	assert.Error(t, err)
}
