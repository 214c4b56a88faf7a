package partstate

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/tracemsg"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/outcome"
)

func TestDayOfFloorsToUTCDays(t *testing.T) {
	assert.EqualValues(t, 0, DayOf(0))
	assert.EqualValues(t, 0, DayOf(DayMillis-1))
	assert.EqualValues(t, 1, DayOf(DayMillis))
	assert.EqualValues(t, -1, DayOf(-1))
	assert.EqualValues(t, -1, DayOf(-DayMillis))
	assert.EqualValues(t, -2, DayOf(-DayMillis-1))
	assert.NotEqualValues(t, noDay, DayOf(math.MinInt64), "no ts is on noDay")
	assert.Equal(t, "2025-12-02", DayString(DayOf(1764633600000+5)))
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
		orders := make([]Order, n)
		for i := range cs {
			cs[i] = calls.Call{RunID: "r", HasRunID: true, TSMillis: int64(rng.IntN(5*DayMillis)) - DayMillis,
				Step: uint32(rng.IntN(6)), HasStep: rng.IntN(8) != 0, Outcome: outcomes[rng.IntN(len(outcomes))],
				AgentID: agents[rng.IntN(len(agents))], Decision: decisions[rng.IntN(len(decisions))],
				CostMicroUSD: int64(rng.IntN(1000))}
			orders[i] = Order{uint64(rng.IntN(3)), uint64(rng.IntN(3)), 0, uint64(i)}
		}
		var whole runAgg
		parts := map[int32]*runAgg{}
		for i := range cs {
			require.NoError(t, whole.add(&cs[i], orders[i]))
			d := DayOf(cs[i].TSMillis)
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
	a := runAgg{Run: outcome.Run[uint64, string, Order]{Calls: 1, Cost: 1 << 62, LastTS: 5}}
	b := runAgg{Run: outcome.Run[uint64, string, Order]{Calls: 1, Cost: 1 << 62, LastTS: 9}}
	before := a
	require.ErrorIs(t, a.merge(&b), errOverflow)
	assert.Equal(t, before, a, "a failed merge changes nothing")
}

func TestDayTableRoundTripsAndRefusesDamage(t *testing.T) {
	tb := newDayTable(3, 8, DayOf(1764633600000))
	tb.rev, tb.dropped = 4, 2
	require.NoError(t, tb.add("rrun-1", &runAgg{Run: outcome.Run[uint64, string, Order]{Calls: 3, Refused: 1, Cost: 700, LastTS: 1764633600123, Outcome: outcome.Kept[string, Order]{Value: "case_resolved", Step: 2, Pos: Order{1, 2, 3, 4}}}}))
	require.NoError(t, tb.add("rrun-1", &runAgg{Run: outcome.Run[uint64, string, Order]{Calls: 1, Cost: 5, LastTS: 1764633600001, Agent: outcome.Kept[string, Order]{Value: "agent://x", Step: 1}}}))
	require.NoError(t, tb.add("ikey", &runAgg{Run: outcome.Run[uint64, string, Order]{Calls: 1, Cost: 9, LastTS: 1764633600200, Outcome: outcome.Kept[string, Order]{Value: "escalated"}}}))
	k := tracemsg.HashKey("call-1")
	tb.keys = append(tb.keys, k[:]...)
	b := tb.Encode([]byte("prefix"))
	got, err := DecodeDayTable(b[len("prefix"):])
	require.NoError(t, err)
	assert.Equal(t, tb, got)
	assert.EqualValues(t, 7, got.calls(), "5 run calls and 2 dropped")
	assert.Len(t, got.keys, tracemsg.KeySize)

	for i := len("prefix"); i < len(b); i += 7 {
		bad := append([]byte(nil), b[len("prefix"):]...)
		bad[i-len("prefix")] ^= 0x40
		_, err := DecodeDayTable(bad)
		assert.Error(t, err, "byte %d flipped", i)
	}
	_, err = DecodeDayTable(b[len("prefix") : len(b)-1])
	assert.Error(t, err)
}

// randomDayTable is a table of n runs with varied states: outcomes and
// agents present or not, orders of segment rows (shared prefixes) and of
// records (distinct prefixes), negative costs, timestamps across the day.
func randomDayTable(rng *rand.Rand, n int) *DayTable {
	day := DayOf(1764633600000) + int32(rng.IntN(100)) - 50
	tb := newDayTable(rng.IntN(8), 8, day)
	tb.rev, tb.dropped = uint32(1+rng.IntN(5)), uint64(rng.IntN(3))
	segs := []Order{{1 << 60, 7, 4242}, {1<<60 + 99, 8, 4242}, {0, rng.Uint64(), rng.Uint64()}}
	order := func() Order {
		if rng.IntN(4) == 0 {
			return Order{rng.Uint64(), rng.Uint64(), rng.Uint64(), 0}
		}
		o := segs[rng.IntN(len(segs))]
		o[3] = rng.Uint64N(1 << 40)
		return o
	}
	outcomes := []string{"", "case_resolved", "escalated", "a \x00 tag"}
	for i := range n {
		a := &runAgg{Run: outcome.Run[uint64, string, Order]{Calls: 1 + rng.Uint64N(200), Cost: rng.Int64N(1<<40) - 1<<20,
			LastTS: int64(day)*DayMillis + rng.Int64N(DayMillis)}}
		a.Refused = rng.Uint64N(a.Calls + 1)
		a.Blocked = rng.Uint64N(a.Refused + 1)
		if a.Outcome.Value = outcomes[rng.IntN(len(outcomes))]; a.Outcome.Value != "" {
			a.Outcome.Step, a.Outcome.Pos = rng.Uint32(), order()
		}
		if rng.IntN(3) > 0 {
			a.Agent.Value = fmt.Sprintf("agent://x/%d", rng.IntN(5))
			a.Agent.Step, a.Agent.Pos = rng.Uint32N(50), order()
		}
		tb.runs[fmt.Sprintf("rrun-%d", i)] = a
	}
	for range rng.IntN(4) {
		k := tracemsg.HashKey(fmt.Sprint(rng.Uint64()))
		tb.keys = append(tb.keys, k[:]...)
	}
	return tb
}

// TestDayTablesRoundTrip: random tables read back equal, keys read alone
// agree, and a table of another format (an older build's magic) is
// refused, naming the format found and the one expected.
func TestDayTablesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 40 {
		tb := randomDayTable(rng, rng.IntN(300))
		b := tb.Encode(nil)
		got, err := DecodeDayTable(b)
		require.NoError(t, err, "trial %d", trial)
		require.Equal(t, tb, got, "trial %d", trial)
		part, day, rev, keys, err := DayTableKeys(b)
		require.NoError(t, err)
		assert.Equal(t, []any{tb.part, tb.Day, tb.rev, tb.keys}, []any{part, day, rev, append([]byte(nil), keys...)}, "trial %d", trial)
	}
	old := append([]byte("VXDAY003"), randomDayTable(rng, 3).Encode(nil)[len(dayMagic):]...)
	_, err := DecodeDayTable(old)
	require.EqualError(t, err, `day table: format "VXDAY003", this build reads "VDXDAY01" only`)
}

// FuzzDecodeDayTable: no input panics the decoder or makes it allocate
// beyond its input, what decodes encodes to a table that decodes the
// same, and the streaming reader of reports (eachDayTableRun) fails
// where the decoder fails and yields the same runs where it does not.
func FuzzDecodeDayTable(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 4 {
		tb := randomDayTable(rng, rng.IntN(6))
		f.Add(tb.Encode(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Fix the checksum so the fuzzer reaches the body.
		if len(b) > 4 {
			b = binary.LittleEndian.AppendUint32(bytes.Clone(b[:len(b)-4]), crc32.Checksum(b[:len(b)-4], castagnoli()))
		}
		tb, err := DecodeDayTable(b)
		streamed := map[string]runAgg{}
		day, dropped, serr := eachDayTableRun(b, func(name string, a *runAgg) { streamed[strings.Clone(name)] = *a })
		if err != nil {
			require.Error(t, serr, "the streaming reader accepts a table the decoder refuses: %v", err)
			return
		}
		require.NoError(t, serr)
		require.Equal(t, tb.Day, day)
		require.Equal(t, tb.dropped, dropped)
		require.Len(t, streamed, len(tb.runs))
		for name, a := range tb.runs {
			require.Equal(t, *a, streamed[name], "run %q", name)
		}
		again, err := DecodeDayTable(tb.Encode(nil))
		require.NoError(t, err)
		require.Equal(t, tb, again)
	})
}

// TestSnapshotsAndDeltasRefuseOtherFormats: a snapshot or delta of another
// format (an older build's magic) is refused, naming what it found and
// what this build reads.
func TestSnapshotsAndDeltasRefuseOtherFormats(t *testing.T) {
	s := NewState(1, 4)
	snap, _, _ := s.EncodeBoth(nil)
	_, err := DecodeState(snap)
	require.NoError(t, err)
	_, err = DecodeState(append([]byte("VDXPART5"), snap[len(snapMagic):]...))
	require.EqualError(t, err, `partition snapshot: format "VDXPART5", this build reads "VDXSNAP1" only`)
	delta := s.EncodeDelta(nil)
	_, _, err = decodeDelta(delta)
	require.NoError(t, err)
	_, _, err = decodeDelta(append([]byte("VDXDELT2"), delta[len(deltaMagic):]...))
	require.EqualError(t, err, `partition delta: format "VDXDELT2", this build reads "VDXDLTA1" only`)
	// Another version of each (the last byte of the magic) is refused too.
	_, err = DecodeState(append([]byte("VDXSNAP2"), snap[len(snapMagic):]...))
	require.ErrorContains(t, err, `format "VDXSNAP2"`)
	_, _, err = decodeDelta(append([]byte("VDXDLTA2"), delta[len(deltaMagic):]...))
	require.ErrorContains(t, err, `format "VDXDLTA2"`)
	tb := newDayTable(0, 8, DayOf(1764633600000)).Encode(nil)
	_, err = DecodeDayTable(tb)
	require.NoError(t, err)
	_, err = DecodeDayTable(append([]byte("VDXDAY02"), tb[len(dayMagic):]...))
	require.ErrorContains(t, err, "VDXDAY02")
}
