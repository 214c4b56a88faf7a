package fleet

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracegen"
	"github.com/verdryx/verdryx/tracemsg"
)

// same call: its call_id says so).
func publishIDs(t *testing.T, e *env, cs []calls.Call, ids []string, prefix string) {
	t.Helper()
	ctx := jstest.Ctx(t, 10*time.Second)
	for i, c := range cs {
		b := calltest.RecordJSONWithID(c, ids[i])
		_, err := e.JS.Publish(ctx, e.Subjects.Traces, b, jetstream.WithMsgID(fmt.Sprintf("%s-%d", prefix, i)))
		require.NoError(t, err)
	}
}

// callIDs returns the call ids c0, c1, ... of n calls.
func callIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
	}
	return ids
}

// callsAre is a waitAggregate condition: the aggregate holds n calls.
func callsAre(n int) func(*partstate.Aggregate) error {
	return func(a *partstate.Aggregate) error {
		if got := a.Calls(); got != int64(n) {
			return fmt.Errorf("%d calls, want %d", got, n)
		}
		return nil
	}
}

// waitAggregate polls the published aggregate until cond holds.
func waitAggregate(t *testing.T, e *env, cond func(*partstate.Aggregate) error) *partstate.Aggregate {
	t.Helper()
	var agg *partstate.Aggregate
	jstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		a, err := ReadAggregate(jstest.Ctx(t, 10*time.Second), e.JS, e.Subjects)
		if err != nil {
			return err
		}
		if err := cond(a); err != nil {
			return err
		}
		agg = a
		return nil
	})
	return agg
}

// TestWorkersFoldDaysAndCorrectThemWithLateCalls: a worker folds the days
// its partitions' newest calls have passed; late calls of a folded day
// (new calls of old runs, a new run, a call sent again under another
// message id) correct its table exactly; a worker taking the partitions
// over on a fresh store reads the folded days from the bucket and still
// recognizes the call sent again. The fleet's report, all-time and by
// window, equals the direct reduction of the distinct calls: by whole
// days where the calls are older than the hours kept, and by any hours
// where the workers' clock keeps them by the hour.
func TestWorkersFoldDaysAndCorrectThemWithLateCalls(t *testing.T) {
	t.Run("by day", func(t *testing.T) { testWorkersFoldDays(t, false) })
	t.Run("by the hour", func(t *testing.T) { testWorkersFoldDays(t, true) })
}

func testWorkersFoldDays(t *testing.T, hourly bool) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(8, 8))
	var clock func() time.Time // nil: now, months after the calls
	if hourly {
		clock = func() time.Time { return calltest.Day0.AddDate(0, 0, 5) }
	}
	cs := calltest.RandomDayCalls(rng, 600, 4)
	ids := callIDs(len(cs))
	// Days 0-3 in ts order, but for 60 calls of days 0 and 1 held back.
	slices.SortFunc(cs, func(a, b calls.Call) int { return cmp.Compare(a.TSMillis, b.TSMillis) })
	var first, late []int
	for i, c := range cs {
		if partstate.DayOf(c.TSMillis) <= partstate.DayOf(calltest.Day0.UnixMilli())+1 && len(late) < 60 && rng.IntN(4) == 0 {
			late = append(late, i)
			continue
		}
		first = append(first, i)
	}
	pick := func(idx []int) ([]calls.Call, []string) {
		var c []calls.Call
		var id []string
		for _, i := range idx {
			c, id = append(c, cs[i]), append(id, ids[i])
		}
		return c, id
	}
	var folds atomic.Int64
	// The calls are up to five days older than the clock: kept by the
	// hour for a week.
	w := startFleet(t, e.JS, e.Subjects, "a", Options{FoldAfter: time.Millisecond, Freed: func() { folds.Add(1) }, Now: clock, HoursKept: 7 * 24 * time.Hour})
	c1, i1 := pick(first)
	publishIDs(t, e, c1, i1, "first")
	folded := func(a *partstate.Aggregate) error {
		n := 0
		for _, tb := range a.Tables {
			n += len(tb)
		}
		if n == 0 {
			return fmt.Errorf("no day folded yet")
		}
		if got := a.Calls(); got != int64(len(first)) {
			return fmt.Errorf("%d calls, want %d", got, len(first))
		}
		return nil
	}
	waitAggregate(t, e, folded)
	// Called after the pointer moved, which the aggregate just read may
	// have seen first.
	jstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if folds.Load() == 0 {
			return errors.New("days folded, Options.Freed not called")
		}
		return nil
	})

	c2, i2 := pick(late)
	publishIDs(t, e, c2, i2, "late")
	// One call sent again under another message id.
	publishIDs(t, e, c1[:1], i1[:1], "again")
	agg := waitAggregate(t, e, func(a *partstate.Aggregate) error {
		if got := a.Calls(); got != int64(len(cs)) {
			return fmt.Errorf("%d calls, want %d", got, len(cs))
		}
		for _, s := range a.Parts {
			for d := range s.Runs {
				if int64(d+1)*partstate.DayMillis <= calltest.Day0.UnixMilli()+2*partstate.DayMillis {
					return fmt.Errorf("partition %d: day %s still in memory", s.Part, partstate.DayString(d))
				}
			}
		}
		return nil
	})
	corrected := false
	for _, s := range agg.Parts {
		for _, ref := range s.Folded {
			corrected = corrected || ref.Rev > 1
		}
	}
	require.True(t, corrected, "a late call corrected a folded day")
	// The tables the corrections superseded left the bucket without a
	// delete marker each (they would stay for good).
	jstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if _, markers := bucketSubjects(t, e); markers > 0 {
			return fmt.Errorf("%d delete markers in the bucket", markers)
		}
		return nil
	})
	check := func(agg *partstate.Aggregate) {
		var windows []outcome.Options
		for _, w := range [][2]int{{0, 0}, {0, 1}, {1, 2}, {0, 2}, {2, 4}} {
			opts := outcome.Options{}
			if w != [2]int{0, 0} {
				opts.From, opts.To = calltest.Day0.AddDate(0, 0, w[0]), calltest.Day0.AddDate(0, 0, w[1])
			}
			windows = append(windows, opts)
		}
		cut := outcome.Options{From: calltest.Day0.Add(5 * time.Hour), To: calltest.Day0.Add(53 * time.Hour)}
		if hourly {
			windows = append(windows, cut, outcome.Options{From: calltest.Day0.Add(30 * time.Hour)}, outcome.Options{To: calltest.Day0.Add(71 * time.Hour)})
			for range 10 {
				from := calltest.Day0.Add(time.Duration(rng.IntN(96)) * time.Hour)
				windows = append(windows, outcome.Options{From: from, To: from.Add(time.Duration(1+rng.IntN(30)) * time.Hour)})
			}
		} else {
			_, err := agg.Reducer(cut)
			require.ErrorIs(t, err, partstate.ErrWindowCutsWholeDay)
		}
		for _, opts := range windows {
			r, err := agg.Reducer(opts)
			require.NoError(t, err)
			require.JSONEq(t, string(calltest.Direct(t, cs, opts)), string(calltest.ReportJSON(t, r)), "window %v-%v", opts.From, opts.To)
		}
	}
	check(agg)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)

	// A new worker on a fresh store takes every partition over.
	startFleet(t, e.JS, e.Subjects, "b", Options{FoldAfter: time.Millisecond, Now: clock, HoursKept: 7 * 24 * time.Hour})
	publishIDs(t, e, c1[:2], i1[:2], "again-b")
	c3 := calls.Call{TSMillis: calltest.Day0.UnixMilli() + 3*partstate.DayMillis + 5, RunID: "fresh", HasRunID: true, Decision: "allow", CostMicroUSD: 1, Step: 1, HasStep: true}
	publishIDs(t, e, []calls.Call{c3}, []string{"fresh-1"}, "fresh")
	cs = append(cs, c3)
	check(waitAggregate(t, e, func(a *partstate.Aggregate) error {
		if got := a.Calls(); got != int64(len(cs)) {
			return fmt.Errorf("%d calls, want %d", got, len(cs))
		}
		return nil
	}))
}

// TestAnAggregateWrittenApartIsDeletedOnceTheSnapshotServes: records with
// call ids keep dedupe keys in the snapshot, so its aggregate is written
// apart; once their day folds and only row batches are open, the snapshot
// serves as the aggregate, and the aggregate written before leaves the
// bucket (no later snapshot would overwrite its slot).
func TestAnAggregateWrittenApartIsDeletedOnceTheSnapshotServes(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(31, 7))
	cs := calltest.RandomDayCalls(rng, 300, 1)
	ids := callIDs(len(cs))
	startFleet(t, e.JS, e.Subjects, "a", Options{FoldAfter: time.Millisecond})
	publishIDs(t, e, cs, ids, "rec")
	waitAggregate(t, e, func(a *partstate.Aggregate) error {
		if got := a.Calls(); got != int64(len(cs)) {
			return fmt.Errorf("%d calls, want %d", got, len(cs))
		}
		return nil
	})
	ctx := jstest.Ctx(t, 60*time.Second)
	kv, err := e.JS.KeyValue(ctx, Bucket)
	require.NoError(t, err)
	aggKeys := func() []string {
		keys, err := kv.ListKeys(ctx)
		require.NoError(t, err)
		var out []string
		for k := range keys.Keys() {
			if strings.HasPrefix(k, "agg.") {
				out = append(out, k)
			}
		}
		return out
	}
	require.NotEmpty(t, aggKeys(), "records with keys: aggregates written apart")

	// Row batches three days on: day 0 folds, its keys leave the snapshot.
	dir := t.TempDir()
	opts := tracegen.DefaultFleetOptions()
	opts.Rows, opts.SegmentRows, opts.RowGroupRows, opts.Concurrent, opts.MeanCallsPerRun = 4000, 2000, 1000, 50, 10
	opts.Start, opts.Span = calltest.Day0.AddDate(0, 0, 3), 12*time.Hour
	_, err = tracegen.GenerateFleet(dir, opts)
	require.NoError(t, err)
	_, err = segpub.Publish(ctx, e.JS, e.Subjects.Traces, dir, segpub.Options{})
	require.NoError(t, err)
	jstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for p := range tracemsg.DefaultPartitions {
			entry, err := kv.Get(ctx, partitionKey(p))
			if err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			var ptr partPointer
			require.NoError(t, json.Unmarshal(entry.Value(), &ptr))
			if ptr.Aggregate != ptr.Snapshot {
				return fmt.Errorf("partition %d: aggregate still apart", p)
			}
		}
		if left := aggKeys(); len(left) > 0 {
			return fmt.Errorf("aggregates no pointer names: %v", left)
		}
		return nil
	})
}

// TestAnIdlePartitionPrunesItsDays: a worker whose partitions receive
// nothing more still prunes their folded days once the retention has
// passed since the tables were written (the flush tick snapshots them):
// their day tables leave the bucket, and a call of such a day is late.
func TestAnIdlePartitionPrunesItsDays(t *testing.T) {
	e := newEnv(t)
	var clock atomic.Int64
	clock.Store(calltest.Day0.AddDate(0, 0, 2).UnixNano())
	subjects := e.Subjects
	subjects.Retention = time.Hour
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	w := startFleet(t, e.JS, subjects, "a", Options{FoldAfter: time.Millisecond, Now: now})
	rng := rand.New(rand.NewPCG(5, 5))
	cs := calltest.RandomDayCalls(rng, 200, 2) // days 0 and 1: day 0 folds
	ids := callIDs(len(cs))
	publishIDs(t, e, cs, ids, "idle")
	d0 := partstate.DayOf(calltest.Day0.UnixMilli())
	var folded []int
	waitAggregate(t, e, func(a *partstate.Aggregate) error {
		if got := a.Calls(); got != int64(len(cs)) {
			return fmt.Errorf("%d calls, want %d", got, len(cs))
		}
		folded = folded[:0]
		for p, s := range a.Parts {
			if len(s.Runs[d0]) > 0 {
				return fmt.Errorf("partition %d: day 0 not folded yet", p)
			}
			if _, ok := s.Folded[d0]; ok {
				folded = append(folded, p)
			}
		}
		if len(folded) == 0 {
			return errors.New("no partition folded day 0")
		}
		return nil
	})
	// What an older build left of day 0 (a purged table's marker), or an
	// owner before a takeover (a table): the prune takes it too.
	ctx := jstest.Ctx(t, 30*time.Second)
	kv, err := e.JS.KeyValue(ctx, Bucket)
	require.NoError(t, err)
	plant := func() {
		for _, p := range folded {
			_, err := kv.Put(ctx, dayBlobPrefix(p, d0)+".older.1.0", []byte("x"))
			require.NoError(t, err)
			require.NoError(t, kv.Purge(ctx, dayBlobPrefix(p, d0)+".older.1.0"))
			_, err = kv.Put(ctx, dayBlobPrefix(p, d0)+".lost.1.0", []byte("x"))
			require.NoError(t, err)
		}
	}
	plant()
	// Two hours on, and not one record more.
	clock.Add(int64(2 * time.Hour))
	waitAggregate(t, e, func(a *partstate.Aggregate) error {
		for p, s := range a.Parts {
			if _, ok := s.Folded[d0]; ok {
				return fmt.Errorf("partition %d: day 0 still held", p)
			}
			if len(s.Runs[d0]) > 0 {
				return fmt.Errorf("partition %d: day 0 in memory", p)
			}
		}
		if a.Late() != 0 {
			return fmt.Errorf("%d late calls before any was sent", a.Late())
		}
		return nil
	})
	// Nothing of day 0 is left in the bucket, and no delete marker of
	// anything (purged after the pointer moved: wait for it).
	dayGone := func() error {
		subjects, markers := bucketSubjects(t, e)
		for _, subj := range subjects {
			if p := strings.Split(subj, "."); len(p) > 4 && p[2] == "day" && p[4] == strconv.Itoa(int(d0)) {
				return fmt.Errorf("%s left of a pruned day", subj)
			}
		}
		if markers > 0 {
			return fmt.Errorf("%d delete markers in the bucket", markers)
		}
		return nil
	}
	jstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, dayGone)
	// A call of day 0 now is late.
	late := cs[:1]
	late[0].TSMillis = calltest.Day0.UnixMilli() + 10
	publishIDs(t, e, late, []string{"late-1"}, "late")
	waitAggregate(t, e, func(a *partstate.Aggregate) error {
		if a.Late() != 1 {
			return fmt.Errorf("%d late calls, want 1", a.Late())
		}
		return nil
	})

	// The same leftovers planted after day 0 was pruned (what a build
	// before the purge by subject left of days it pruned) go when the
	// next owner loads each partition.
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	plant()
	require.Error(t, dayGone(), "planted")
	startFleet(t, e.JS, subjects, "b", Options{FoldAfter: time.Millisecond, Now: now})
	n := e.Subjects.PartitionCount()
	for _, p := range folded {
		c := calls.Call{TSMillis: calltest.Day0.UnixMilli() + partstate.DayMillis + 20, Decision: "allow", CostMicroUSD: 1, HasRunID: true}
		for i := 0; c.RunID == "" || tracemsg.PartitionOf(c.RunID, n) != p; i++ {
			c.RunID = fmt.Sprintf("sweep-%d-%d", p, i)
		}
		publishIDs(t, e, []calls.Call{c}, []string{c.RunID}, c.RunID)
	}
	jstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, dayGone)
}

// TestAnOpenDayWaitsToBeFoldedBeforeItIsPruned: a folded day that a late
// call opened again is not pruned (nor due) past the retention until the
// call is folded into its table; then it is.
func TestAnOpenDayWaitsToBeFoldedBeforeItIsPruned(t *testing.T) {
	s := partstate.NewState(0, 1)
	at := func(day int, minute int64) int64 {
		return calltest.Day0.UnixMilli() + int64(day)*partstate.DayMillis + minute*60_000
	}
	applyAll(t, s, []calls.Call{
		{TSMillis: at(0, 5), RunID: "a", HasRunID: true, Decision: "allow", CostMicroUSD: 10},
		{TSMillis: at(3, 5), RunID: "b", HasRunID: true, Decision: "allow", CostMicroUSD: 20},
	}, 0)
	loads := memLoad{}
	t0 := calltest.Day0.AddDate(0, 0, 10)
	tables, _ := s.FoldDays(t0, time.Hour, loads.load)
	loads.keep(tables)
	d0 := partstate.DayOf(at(0, 0))
	require.Contains(t, s.Folded, d0)
	applyAll(t, s, []calls.Call{{TSMillis: at(0, 7), RunID: "a", HasRunID: true, Decision: "allow", CostMicroUSD: 5}}, 10)
	later := t0.Add(3 * time.Hour)
	require.False(t, s.PruneDue(later, 2*time.Hour), "day 0 has a call in memory")
	days, skipped := s.PruneDays(later, 2*time.Hour, loads.keys)
	require.Empty(t, skipped)
	require.Empty(t, days, "an open day waits to be folded")
	tables, _ = s.FoldDays(later, time.Hour, loads.load)
	loads.keep(tables)
	require.True(t, s.PruneDue(later, 2*time.Hour))
	days, _ = s.PruneDays(later, 2*time.Hour, loads.keys)
	require.Equal(t, []int32{d0}, days)
}

// bucketSubjects returns the subjects of the partitions bucket's stream,
// and how many of them end in a KV delete or purge marker. The workers
// purge while it reads: a subject listed and then found empty is gone.
func bucketSubjects(t *testing.T, e *env) (subjects []string, markers int) {
	t.Helper()
	ctx := jstest.Ctx(t, 30*time.Second)
	s, err := e.JS.Stream(ctx, "KV_"+Bucket)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	require.NoError(t, err)
	for subj := range info.State.Subjects {
		m, err := s.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// Purged by the worker since the listing: gone.
			continue
		}
		require.NoError(t, err)
		subjects = append(subjects, subj)
		if m.Header.Get("KV-Operation") != "" {
			markers++
		}
	}
	slices.Sort(subjects)
	return subjects, markers
}

// TestAWindowedReadReadsOnlyItsDays: a report of a window reads the day
// tables of the window's days alone, and counts the other days' calls
// outside the window from their references: with every table of day 0
// gone from the bucket, a report of days 1-4 (and of day 2 on) is still
// the direct reduction of those days, while an all-time read fails, and
// an aggregate read for days 1-4 refuses a report of other days.
func TestAWindowedReadReadsOnlyItsDays(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(41, 3))
	cs := calltest.RandomDayCalls(rng, 500, 4)
	ids := callIDs(len(cs))
	// A call of day 4 moves every partition's horizon past day 3, so days
	// 0 to 3 fold.
	last := calls.Call{TSMillis: calltest.Day0.UnixMilli() + 4*partstate.DayMillis + 5, RunID: "late-day", HasRunID: true, Decision: "allow", CostMicroUSD: 1}
	w := startFleet(t, e.JS, e.Subjects, "a", Options{FoldAfter: time.Millisecond})
	publishIDs(t, e, cs, ids, "c")
	for p := range e.Subjects.PartitionCount() {
		c := last
		for i := 0; tracemsg.PartitionOf(c.RunID, e.Subjects.PartitionCount()) != p; i++ {
			c.RunID = fmt.Sprintf("late-day-%d", i)
		}
		cs = append(cs, c)
		publishIDs(t, e, []calls.Call{c}, []string{c.RunID}, "last-"+strconv.Itoa(p))
	}
	d0 := partstate.DayOf(calltest.Day0.UnixMilli())
	waitAggregate(t, e, func(a *partstate.Aggregate) error {
		if err := callsAre(len(cs))(a); err != nil {
			return err
		}
		for p, s := range a.Parts {
			for d := d0; d < d0+4; d++ {
				if len(s.Runs[d]) > 0 {
					return fmt.Errorf("partition %d: day %s not folded", p, partstate.DayString(d))
				}
			}
		}
		return nil
	})
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)

	ctx := jstest.Ctx(t, 30*time.Second)
	win := func(from, to int) outcome.Options {
		return outcome.Options{From: calltest.Day0.AddDate(0, 0, from), To: calltest.Day0.AddDate(0, 0, to)}
	}
	// Before anything is removed: every window read for itself holds the
	// tables of its days only, and reports as the direct reduction.
	for _, w := range [][2]int{{0, 1}, {1, 3}, {2, 5}} {
		opts := win(w[0], w[1])
		agg, err := ReadAggregateFor(ctx, e.JS, e.Subjects, opts)
		require.NoError(t, err)
		for p, tables := range agg.Tables {
			for d := range tables {
				require.True(t, d >= d0+int32(w[0]) && d < d0+int32(w[1]), "window %v: partition %d read day %s", w, p, partstate.DayString(d))
			}
		}
		r, err := agg.Reducer(opts)
		require.NoError(t, err)
		require.JSONEq(t, string(calltest.Direct(t, cs, opts)), string(calltest.ReportJSON(t, r)), "window %v", w)
	}

	// Every table of day 0 leaves the bucket.
	bucket, err := e.JS.Stream(ctx, "KV_"+Bucket)
	require.NoError(t, err)
	before, _ := bucketSubjects(t, e)
	for p := range e.Subjects.PartitionCount() {
		require.NoError(t, bucket.Purge(ctx, jetstream.WithPurgeSubject("$KV."+Bucket+"."+dayBlobPrefix(p, d0)+".>")))
	}
	after, _ := bucketSubjects(t, e)
	require.Less(t, len(after), len(before), "day 0 had tables in the bucket")

	_, err = ReadAggregate(ctx, e.JS, e.Subjects)
	require.Error(t, err, "an all-time read needs day 0's tables")
	for _, opts := range []outcome.Options{win(1, 4), {From: calltest.Day0.AddDate(0, 0, 2)}} {
		agg, err := ReadAggregateFor(ctx, e.JS, e.Subjects, opts)
		require.NoError(t, err)
		r, err := agg.Reducer(opts)
		require.NoError(t, err)
		require.JSONEq(t, string(calltest.Direct(t, cs, opts)), string(calltest.ReportJSON(t, r)), "window %v", opts)
	}
	agg, err := ReadAggregateFor(ctx, e.JS, e.Subjects, win(1, 4))
	require.NoError(t, err)
	for _, opts := range []outcome.Options{{}, win(0, 2), win(1, 5), {To: calltest.Day0.AddDate(0, 0, 3)}} {
		_, err := agg.Reducer(opts)
		require.ErrorContains(t, err, "holding the tables of", "window %v", opts)
	}
	_, err = agg.Runs()
	require.Error(t, err, "all runs from a windowed read")
	_, err = ReadAggregateFor(ctx, e.JS, e.Subjects, outcome.Options{From: calltest.Day0.Add(90 * time.Minute)})
	require.ErrorIs(t, err, partstate.ErrWindowNotWholeHours)
	// These calls are months older than the clock: kept by the day, so a
	// window cutting one of their days is refused.
	opts := outcome.Options{From: calltest.Day0.Add(26 * time.Hour)}
	agg, err = ReadAggregateFor(ctx, e.JS, e.Subjects, opts)
	require.NoError(t, err)
	_, err = agg.Reducer(opts)
	require.ErrorIs(t, err, partstate.ErrWindowCutsWholeDay)
	require.ErrorContains(t, err, partstate.DayString(d0+1))
}
