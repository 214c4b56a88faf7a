package partstate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/tracemsg"
)

// applyAll applies cs to s as records (key i), one message each.
func applyAll(t *testing.T, s *State, cs []calls.Call, from int) {
	t.Helper()
	for i := range cs {
		c := cs[i]
		key := fmt.Sprintf("call-%d", from+i)
		s.Begin()
		require.NoError(t, s.Apply(tracemsg.HashKey(key), &c, RecordOrder(c.TSMillis, key)))
	}
	s.Settle(true)
}

// memLoad is a day-table loader over tables kept by the test.
type memLoad map[int32][]byte

func (m memLoad) load(d int32, ref *DayRef) (*DayTable, error) {
	b, ok := m[d]
	if !ok {
		return nil, fmt.Errorf("no table for day %d", d)
	}
	return DecodeDayTable(b)
}

func (m memLoad) keys(d int32, ref *DayRef) ([]byte, error) {
	b, ok := m[d]
	if !ok {
		return nil, fmt.Errorf("no table for day %d", d)
	}
	_, _, _, keys, err := DayTableKeys(b)
	return keys, err
}

func (m memLoad) keep(tables []*DayTable) {
	for _, t := range tables {
		m[t.Day] = t.Encode(nil)
	}
}

// fold folds s's days as of now (an hour's grace) and keeps the tables.
func (m memLoad) fold(t *testing.T, s *State, now time.Time) []*DayTable {
	t.Helper()
	tables, skipped := s.FoldDays(now, time.Hour, m.load)
	require.Empty(t, skipped)
	m.keep(tables)
	return tables
}

func (m memLoad) aggregate(t *testing.T, s *State) *Aggregate {
	t.Helper()
	tables := map[int32][]byte{}
	for d, ref := range s.Folded {
		tb, err := m.load(d, ref)
		require.NoError(t, err)
		require.Equal(t, ref.Rev, tb.rev)
		tables[d] = m[d]
	}
	return &Aggregate{Parts: map[int]*State{s.Part: s}, Tables: map[int]map[int32][]byte{s.Part: tables}}
}

// TestFoldedDaysAndLateCallsReportExactly: calls over five days applied,
// the closed days folded into tables, late calls of folded days applied
// (correcting their tables) and the state encoded and decoded between
// steps; the report over every window of whole days equals the direct
// reduction of the same calls with the same window.
func TestFoldedDaysAndLateCallsReportExactly(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 99))
		cs := calltest.RandomDayCalls(rng, 900, 5)
		// The first 700 calls, then late ones.
		s := NewState(0, 1)
		applyAll(t, s, cs[:700], 0)
		loads := memLoad{}
		now := calltest.Day0.Add(30 * 24 * time.Hour)
		tables := loads.fold(t, s, now)
		require.NotEmpty(t, tables, "seed %d: days before the newest call less the grace fold", seed)
		for _, tb := range tables {
			require.EqualValues(t, 1, tb.rev)
			require.NotContains(t, s.Runs, tb.Day, "a folded day leaves memory")
		}
		// Through a snapshot: what a takeover reads.
		snap, _, _ := s.EncodeBoth(nil)
		s, err := DecodeState(snap)
		require.NoError(t, err)
		for _, tb := range tables {
			s.addFoldedKeys(tb)
		}
		applyAll(t, s, cs[700:], 700)
		// A call applied again under its key is not counted twice.
		require.True(t, s.Has(tracemsg.HashKey("call-3")), "the keys of folded days are kept")

		tables = loads.fold(t, s, now)
		corrected := 0
		for _, tb := range tables {
			if tb.rev > 1 {
				corrected++
			}
		}
		require.Positive(t, corrected, "late calls corrected folded days")
		agg := loads.aggregate(t, s)
		require.EqualValues(t, len(cs), agg.Calls())
		windows := [][2]int{{0, 0}, {0, 1}, {1, 3}, {2, 5}, {4, 5}, {0, 5}, {3, 9}}
		for _, w := range windows {
			opts := outcome.Options{}
			if w != [2]int{0, 0} {
				opts.From, opts.To = calltest.Day0.AddDate(0, 0, w[0]), calltest.Day0.AddDate(0, 0, w[1])
			}
			r, err := agg.Reducer(opts)
			require.NoError(t, err)
			require.JSONEq(t, string(calltest.Direct(t, cs, opts)), string(calltest.ReportJSON(t, r)), "seed %d window %v", seed, w)
		}
	}
}

func TestAWindowOffTheHourIsRefused(t *testing.T) {
	agg := &Aggregate{Parts: map[int]*State{0: NewState(0, 1)}}
	_, err := agg.Reducer(outcome.Options{From: calltest.Day0.Add(90 * time.Minute)})
	require.ErrorIs(t, err, ErrWindowNotWholeHours)
	require.ErrorContains(t, err, "on the hour")
	_, err = agg.Reducer(outcome.Options{To: calltest.Day0.Add(time.Millisecond)})
	require.ErrorContains(t, err, "window's end")
	for _, opts := range []outcome.Options{{From: calltest.Day0, To: calltest.Day0.AddDate(0, 0, 2)}, {From: calltest.Day0.Add(time.Hour)}, {To: calltest.Day0.Add(-5 * time.Hour)}} {
		_, err = agg.Reducer(opts)
		require.NoError(t, err)
	}
}

// TestWindowsAtTheEndsOfTime: windows ending in or past the last day
// DayOf keeps apart (calls later than it are clamped into it), or
// starting before 1678 or ending after 2262 (where a time's UnixNano
// overflows), report as the direct reduction; a rolled-back message
// leaves no empty day behind to fold.
func TestWindowsAtTheEndsOfTime(t *testing.T) {
	lastDay := int64(math.MaxInt32) * DayMillis
	cs := []calls.Call{
		{TSMillis: calltest.Day0.UnixMilli(), RunID: "a", HasRunID: true, Decision: "allow", CostMicroUSD: 5, Outcome: "case_resolved"},
		{TSMillis: lastDay + 3*hourMillis, RunID: "b", HasRunID: true, Decision: "allow", CostMicroUSD: 7, Outcome: "escalated"},
	}
	s := NewState(0, 1)
	s.HoursOn, s.HoursFrom = true, math.MinInt64
	applyAll(t, s, cs, 0)
	agg := &Aggregate{Parts: map[int]*State{0: s}, Tables: map[int]map[int32][]byte{}}
	for _, opts := range []outcome.Options{
		{To: time.UnixMilli(lastDay + 5*hourMillis).UTC()},
		{To: time.UnixMilli(lastDay + 2*hourMillis).UTC()},
		{To: time.UnixMilli(lastDay + DayMillis).UTC()},
		{From: calltest.Day0},
		{From: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)},
		{From: calltest.Day0, To: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		r, err := agg.Reducer(opts)
		require.NoError(t, err, "%v-%v", opts.From, opts.To)
		require.JSONEq(t, string(calltest.Direct(t, cs, opts)), string(calltest.ReportJSON(t, r)), "%v-%v", opts.From, opts.To)
	}

	before := s.openDays()
	s.Begin()
	_, err := s.fold([]byte("rnew"), &calls.Call{TSMillis: calltest.Day0.AddDate(0, 0, 3).UnixMilli(), Decision: "allow"}, Order{})
	require.NoError(t, err)
	s.Rollback()
	require.Equal(t, before, s.openDays(), "the rolled-back day is not open")
}

// TestHourWindowsReportExactly: calls over five days, those stamped after
// the clock's hours-kept horizon kept by the hour, the older ones by the
// day; the closed days folded into tables, late calls applied (at a later
// clock: some of them too old for hours now) and the state taken through
// a snapshot. A window starting and ending on any hour reports as the
// direct reduction of the same calls, unless it cuts a day holding a call
// kept by the day: that one is refused, naming the day. Untagged
// independent calls (dropped, counted by the hour) are among them.
func TestHourWindowsReportExactly(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cs := calltest.RandomDayCalls(rng, 1200, 5)
		// Mid-day horizons: a day holds calls of both kinds.
		first := calltest.Day0.Add(29*time.Hour).UnixMilli() + rng.Int64N(hourMillis)
		second := calltest.Day0.Add(52 * time.Hour).UnixMilli()
		whole := map[int32]bool{} // days with a call kept by the day
		s := NewState(0, 1)
		s.HoursOn, s.HoursFrom = true, first
		for _, c := range cs[:900] {
			if c.TSMillis < first {
				whole[DayOf(c.TSMillis)] = true
			}
		}
		applyAll(t, s, cs[:900], 0)
		loads := memLoad{}
		now := calltest.Day0.Add(30 * 24 * time.Hour)
		tables := loads.fold(t, s, now)
		require.NotEmpty(t, tables)
		snap, _, _ := s.EncodeBoth(nil)
		s, err := DecodeState(snap)
		require.NoError(t, err)
		for _, tb := range tables {
			s.addFoldedKeys(tb)
		}
		s.HoursOn, s.HoursFrom = true, second
		for _, c := range cs[900:] {
			if c.TSMillis < second {
				whole[DayOf(c.TSMillis)] = true
			}
		}
		applyAll(t, s, cs[900:], 900)
		loads.fold(t, s, now)
		agg := loads.aggregate(t, s)
		hourly, daily := 0, 0
		require.NoError(t, agg.each(func(_ int, _ int32, name string, a *runAgg, _ uint64) {
			if _, h := splitName(name); h >= 0 {
				hourly++
			} else if a != nil {
				daily++
			}
		}, nil))
		require.Positive(t, hourly, "seed %d: states kept by the hour", seed)
		require.Positive(t, daily, "seed %d: states kept by the day", seed)
		require.EqualValues(t, len(cs), agg.Calls())
		runs, err := agg.Runs()
		require.NoError(t, err)
		for name := range runs {
			require.True(t, strings.HasPrefix(name, "run-"), "run %q: names without the hour", name)
		}

		refused, exact := 0, 0
		for range 120 {
			from := calltest.Day0.Add(time.Duration(rng.IntN(6*24)-12) * time.Hour)
			to := from.Add(time.Duration(1+rng.IntN(72)) * time.Hour)
			opts := outcome.Options{From: from, To: to}
			switch rng.IntN(4) {
			case 0:
				opts.From = time.Time{}
			case 1:
				opts.To = time.Time{}
			}
			cut := false
			for _, b := range []time.Time{opts.From, opts.To} {
				if !b.IsZero() && b.UnixMilli()%DayMillis != 0 && whole[DayOf(b.UnixMilli())] {
					cut = true
				}
			}
			r, err := agg.Reducer(opts)
			if cut {
				require.ErrorIs(t, err, ErrWindowCutsWholeDay, "seed %d window %v-%v", seed, opts.From, opts.To)
				refused++
				continue
			}
			require.NoError(t, err, "seed %d window %v-%v", seed, opts.From, opts.To)
			require.JSONEq(t, string(calltest.Direct(t, cs, opts)), string(calltest.ReportJSON(t, r)), "seed %d window %v-%v", seed, opts.From, opts.To)
			exact++
		}
		require.Positive(t, refused, "seed %d: some windows cut a day kept whole", seed)
		require.Greater(t, exact, 60, "seed %d: most windows are exact", seed)
	}
}

// TestPrunedDaysCountLateCalls: a folded day past the retention is pruned:
// its keys leave the dedupe set, the row sets whose days are all gone go
// too, and a call of it is counted late, never applied.
func TestPrunedDaysCountLateCalls(t *testing.T) {
	s := NewState(0, 1)
	at := func(day int, minute int64) int64 {
		return calltest.Day0.UnixMilli() + int64(day)*DayMillis + minute*60_000
	}
	cs := []calls.Call{
		{TSMillis: at(0, 5), RunID: "a", HasRunID: true, Decision: "allow", CostMicroUSD: 10, Outcome: "case_resolved"},
		{TSMillis: at(1, 5), RunID: "b", HasRunID: true, Decision: "allow", CostMicroUSD: 20},
		{TSMillis: at(3, 5), RunID: "c", HasRunID: true, Decision: "allow", CostMicroUSD: 30},
	}
	applyAll(t, s, cs, 0)
	// A segment whose rows are all of day 0, and one of days 0 and 3.
	seg0, seg03 := [32]byte{1}, [32]byte{2}
	s.Begin()
	_, err := s.fold([]byte("rseg-run"), &calls.Call{TSMillis: at(0, 9), Decision: "allow"}, Order{})
	require.NoError(t, err)
	s.AddRows(seg0, 0, 9)
	s.Begin()
	_, err = s.fold([]byte("rseg-run"), &calls.Call{TSMillis: at(0, 9), Decision: "allow"}, Order{})
	require.NoError(t, err)
	_, err = s.fold([]byte("rseg-run"), &calls.Call{TSMillis: at(3, 9), Decision: "allow"}, Order{})
	require.NoError(t, err)
	s.AddRows(seg03, 0, 4)
	s.Settle(true)

	loads := memLoad{}
	t0 := calltest.Day0.AddDate(0, 0, 10)
	tables, _ := s.FoldDays(t0, time.Hour, loads.load)
	loads.keep(tables)
	require.Len(t, s.Folded, 2, "days 0 and 1 folded, day 3 open")

	days, skipped := s.PruneDays(t0.Add(time.Hour), 2*time.Hour, loads.keys)
	require.Empty(t, skipped)
	require.Empty(t, days, "not yet past the retention")
	// A late call of day 1 corrects its table 90 minutes on: the
	// correction does not extend the day's retention, which counts from
	// the table's first write.
	applyAll(t, s, []calls.Call{{TSMillis: at(1, 7), RunID: "b", HasRunID: true, Decision: "allow", CostMicroUSD: 5}}, 100)
	tables, _ = s.FoldDays(t0.Add(90*time.Minute), time.Hour, loads.load)
	loads.keep(tables)
	require.EqualValues(t, 2, s.Folded[DayOf(at(1, 0))].Rev, "day 1 corrected")
	days, skipped = s.PruneDays(t0.Add(3*time.Hour), 2*time.Hour, loads.keys)
	require.Empty(t, skipped)
	require.ElementsMatch(t, []int32{DayOf(at(0, 0)), DayOf(at(1, 0))}, days)
	require.Equal(t, []dayRange{{DayOf(at(0, 0)), DayOf(at(1, 0))}}, s.Pruned, "neighbouring days merge into one range")
	require.False(t, s.Has(tracemsg.HashKey("call-0")), "a pruned day's keys are gone")
	require.True(t, s.Has(tracemsg.HashKey("call-2")), "an open day's keys stay")
	require.NotContains(t, s.Segs, seg0, "a segment whose days are all pruned is forgotten")
	require.Contains(t, s.Segs, seg03, "a segment with a day still held is kept")

	// A call of a pruned day (a re-replay, a straggler): late, not applied.
	before := (&Aggregate{Parts: map[int]*State{0: s}}).Calls()
	late := calls.Call{TSMillis: at(0, 30), RunID: "a", HasRunID: true, Decision: "allow", CostMicroUSD: 99}
	s.Begin()
	require.NoError(t, s.Apply(tracemsg.HashKey("call-0"), &late, RecordOrder(late.TSMillis, "call-0")))
	s.Settle(true)
	agg := &Aggregate{Parts: map[int]*State{0: s}}
	require.Equal(t, before, agg.Calls())
	require.EqualValues(t, 1, agg.Late())
	require.False(t, s.Has(tracemsg.HashKey("call-0")), "a late call's key is not recorded")

	// The pruned ranges, late count and segment days survive a snapshot.
	snap, _, _ := s.EncodeBoth(nil)
	got, err := DecodeState(snap)
	require.NoError(t, err)
	require.Equal(t, s.Pruned, got.Pruned)
	require.Equal(t, s.late, got.late)
	require.Equal(t, s.segDays, got.segDays)
	require.Equal(t, s.watermark, got.watermark)

	// A rolled-back message leaves the late count and watermark as they were.
	got.Begin()
	_, err = got.fold([]byte("rx"), &calls.Call{TSMillis: at(1, 1), Decision: "allow"}, Order{})
	require.NoError(t, err)
	_, err = got.fold([]byte("rx"), &calls.Call{TSMillis: at(9, 1), Decision: "allow"}, Order{})
	require.NoError(t, err)
	got.Rollback()
	require.Equal(t, s.late, got.late)
	require.Equal(t, s.watermark, got.watermark)
}

// publishIDs publishes cs as records with call ids ids[i] under message
// ids prefix-i (a call published again under another message id is the

// TestNoDayIsNoCallsDay: state that gives calls noDay (the day of a key
// that names no call) is refused as corrupt, in a snapshot and in a
// delta, instead of being reported.
func TestNoDayIsNoCallsDay(t *testing.T) {
	s := NewState(0, 1)
	a := &runAgg{}
	a.Calls, a.Cost = 1, 5
	s.addRun(noDay, string(RunPrefix)+"r", a)
	snap, _, _ := s.EncodeBoth(nil)
	_, err := DecodeState(snap)
	require.ErrorContains(t, err, "out of range for calls")
	base := NewState(0, 1)
	require.ErrorContains(t, base.ApplyDeltas([][]byte{s.EncodeDelta(nil)}), "out of range for calls")
}
