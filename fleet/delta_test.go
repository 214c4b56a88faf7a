package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/internal/jstest"
	"github.com/verdryx/verdryx/outcome"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
)

// stateView is what a partition state holds, comparable (gen aside).
type stateView struct {
	LastSeq, Late uint64
	Watermark     int64
	Runs          map[runKey]runAgg
	Dropped       map[int32]uint64
	Folded        map[int32]dayRef
	Pruned        []dayRange
	Segs          map[[32]byte]string
	SegDays       map[[32]byte][2]int32
	DayKeys       map[int32][]byte
	Keys          int
}

func viewOf(s *partState) stateView {
	v := stateView{LastSeq: s.lastSeq, Late: s.late, Watermark: s.watermark,
		Runs: map[runKey]runAgg{}, Dropped: map[int32]uint64{}, Folded: map[int32]dayRef{},
		Pruned: slices.Clone(s.pruned), Segs: map[[32]byte]string{}, SegDays: map[[32]byte][2]int32{},
		DayKeys: map[int32][]byte{}, Keys: len(s.keys)}
	for day, runs := range s.runs {
		for name, a := range runs {
			c := *a
			c.gen = 0
			v.Runs[runKey{day, name}] = c
		}
	}
	for d, n := range s.dropped {
		v.Dropped[d] = n
	}
	for d, r := range s.folded {
		v.Folded[d] = *r
	}
	for d, r := range s.segs {
		v.Segs[d] = fmt.Sprint(r)
	}
	for d, r := range s.segDays {
		v.SegDays[d] = r
	}
	for d, kb := range s.dayKeys {
		if len(kb) > 0 {
			v.DayKeys[d] = kb
		}
	}
	return v
}

// TestDeltaChainRebuildsTheState: calls applied over six days, mostly in
// time order with late ones, messages rolled back, segment rows recorded,
// days folded (and corrected by late calls) and pruned as a clock moves;
// after each step a snapshot is written, a base now and then and a delta
// otherwise, and the base with the deltas after it decodes to exactly the
// state (runs, dropped calls, folded and pruned days, row sets, keys).
func TestDeltaChainRebuildsTheState(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 41))
		cs := randomDayCalls(rng, 2400, 6)
		slices.SortFunc(cs, func(a, b calls.Call) int { return int(a.TSMillis>>20) - int(b.TSMillis>>20) })
		for i := range cs { // a tenth arrive late: swapped with a call far later
			if j := i + 200 + rng.IntN(400); rng.IntN(10) == 0 && j < len(cs) {
				cs[i], cs[j] = cs[j], cs[i]
			}
		}
		s := newPartState(0, 1)
		loads := memLoad{}
		var base []byte
		var chain [][]byte
		deltas, bases := 0, 0
		now := day0
		for from, step := 0, 0; from < len(cs); step++ {
			n := min(len(cs)-from, 1+rng.IntN(120))
			for i := from; i < from+n; i++ {
				c := cs[i]
				key := fmt.Sprintf("call-%d", i)
				s.begin()
				s.lastSeq++
				require.NoError(t, s.apply(tracemsg.HashKey(key), &c, recordOrder(c.TSMillis, key)))
				if rng.IntN(25) == 0 { // a message that fails: undone
					s.rollback()
					s.lastSeq--
					i--
					continue
				}
				if rng.IntN(40) == 0 {
					var digest [32]byte
					digest[0] = byte(rng.IntN(4))
					lo := uint64(rng.IntN(1000))
					s.addRows(digest, lo, lo+uint64(rng.IntN(50)))
				}
			}
			from += n
			s.settle(true)
			now = now.Add(time.Duration(rng.IntN(10)) * time.Hour)
			tables, skipped := s.foldDays(now, time.Hour, loads.load)
			require.Empty(t, skipped)
			loads.keep(tables)
			_, skipped = s.pruneDays(now, 2*24*time.Hour, loads.keys)
			require.Empty(t, skipped)
			if base == nil || rng.IntN(6) == 0 {
				snap, _, _ := s.encodeBoth(nil)
				base, chain = bytes.Clone(snap), nil
				bases++
			} else {
				chain = append(chain, bytes.Clone(s.encodeDelta(nil)))
				deltas++
			}
			s.wrote(s.gen)
			got, err := decodePartState(base)
			require.NoError(t, err)
			require.NoError(t, got.applyDeltas(chain), "seed %d step %d", seed, step)
			// The keys of the folded days come from their tables.
			for d := range got.folded {
				tb, err := loads.load(d, got.folded[d])
				require.NoError(t, err)
				got.addFoldedKeys(tb)
			}
			require.Equal(t, viewOf(s), viewOf(got), "seed %d step %d: base and %d deltas", seed, step, len(chain))
		}
		require.NotZero(t, deltas)
		require.NotZero(t, bases)
		require.NotEmpty(t, s.pruned, "seed %d: the clock reached the retention", seed)
	}
}

// TestADeltaCostsWhatChanged: after a base of 5,000 runs, a delta for one
// changed run and one key is a small fraction of it, and a delta with
// nothing changed holds no run.
func TestADeltaCostsWhatChanged(t *testing.T) {
	s := newPartState(0, 1)
	rng := rand.New(rand.NewPCG(3, 3))
	cs := randomDayCalls(rng, 5000, 1)
	for i := range cs {
		cs[i].RunID, cs[i].HasRunID = fmt.Sprintf("run-%05d", i), true
	}
	applyAll(t, s, cs, 0)
	snap, _, _ := s.encodeBoth(nil)
	s.wrote(s.gen)
	d := s.encodeDelta(nil)
	got, _, err := decodeDelta(d)
	require.NoError(t, err)
	require.Zero(t, got.runCount(), "nothing changed")
	require.Empty(t, got.dayKeys)

	c := cs[0]
	c.RunID = "run-00007"
	s.begin()
	require.NoError(t, s.apply(tracemsg.HashKey("one more"), &c, recordOrder(c.TSMillis, "one more")))
	s.settle(true)
	d = s.encodeDelta(nil)
	got, _, err = decodeDelta(d)
	require.NoError(t, err)
	require.Equal(t, 1, got.runCount())
	require.Len(t, got.dayKeys[dayOf(c.TSMillis)], tracemsg.KeySize)
	require.Less(t, len(d)*100, len(snap), "delta %d bytes, base %d", len(d), len(snap))
}

// deltasNamed returns, per partition, how many deltas its pointer names,
// and whether every delta blob in the bucket is named by a pointer.
func deltasNamed(t *testing.T, e *env) (perPart map[int]int, stray []string) {
	t.Helper()
	ctx := jstest.Ctx(t, 30*time.Second)
	kv, err := e.JS.KeyValue(ctx, Bucket)
	require.NoError(t, err)
	perPart = map[int]int{}
	named := map[string]bool{}
	for p := range e.Subjects.PartitionCount() {
		entry, err := kv.Get(ctx, partitionKey(p))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		require.NoError(t, err)
		var ptr partPointer
		require.NoError(t, json.Unmarshal(entry.Value(), &ptr))
		perPart[p] = len(ptr.Deltas)
		for _, d := range ptr.Deltas {
			for i := range d.Chunks {
				named[d.Prefix+"."+strconv.Itoa(i)] = true
			}
		}
	}
	keys, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	for k := range keys.Keys() {
		if strings.HasPrefix(k, "delta.") && !named[k] {
			stray = append(stray, k)
		}
	}
	return perPart, stray
}

// runCalls returns n random calls of one day in runs runs (round robin)
// and a distinct call id for each.
func runCalls(rng *rand.Rand, n, runs int) ([]calls.Call, []string) {
	cs := randomDayCalls(rng, n, 1)
	ids := make([]string, len(cs))
	for i := range cs {
		cs[i].RunID, cs[i].HasRunID = fmt.Sprintf("run-%03d", i%runs), true
		ids[i] = fmt.Sprintf("c%d", i)
	}
	return cs, ids
}

// TestDeltaSnapshotsTakeOverExactly: a worker that applies a few calls at
// a time after a large first batch writes deltas after its base; the
// merged report read through them, a worker taking every partition over
// from the bucket (base and deltas) on a fresh store, and the first
// worker restarted on its own store (base and deltas in it) all give the
// direct reduction's report, and no delta blob is left that no pointer
// names once a base replaces them.
func TestDeltaSnapshotsTakeOverExactly(t *testing.T) {
	e := newEnv(t)
	cs, ids := runCalls(rand.New(rand.NewPCG(12, 5)), 900, 300)
	check := func(agg *Aggregate, n int) {
		t.Helper()
		r, err := agg.Reducer(outcome.Options{})
		require.NoError(t, err)
		require.JSONEq(t, string(direct(t, cs[:n], outcome.Options{})), string(reportJSON(t, r)))
	}
	a := startFleet(t, e.JS, e.Subjects, "a", Options{SnapshotEvery: 50 * time.Millisecond})
	// trickle publishes calls [from, to) a few at a time, each checked
	// exact, and returns the most deltas a pointer named meanwhile.
	trickle := func(from, to, step int, prefix string) int {
		saw := 0
		for n := from; n < to; n += step {
			publishIDs(t, e, cs[n:n+step], ids[n:n+step], fmt.Sprintf("%s%d", prefix, n))
			check(waitAggregate(t, e, callsAre(n+step)), n+step)
			per, _ := deltasNamed(t, e)
			for _, k := range per {
				saw = max(saw, k)
			}
		}
		return saw
	}
	publishIDs(t, e, cs[:600], ids[:600], "big")
	waitAggregate(t, e, callsAre(600))
	// A few calls at a time: each snapshot a delta of a run or two.
	require.NotZero(t, trickle(600, 700, 5, "small"), "pointers named deltas")
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	a.stop(t)

	// The first worker again: its own base and deltas, from the bucket.
	a = startFleet(t, e.JS, e.Subjects, "a", Options{SnapshotEvery: 50 * time.Millisecond})
	publishIDs(t, e, cs[700:760], ids[700:760], "again-a")
	publishIDs(t, e, cs[:3], ids[:3], "dup-a") // applied before: not counted again
	check(waitAggregate(t, e, callsAre(760)), 760)
	require.NotZero(t, trickle(760, 800, 4, "again-a"), "pointers named deltas after the restart")
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	a.stop(t)

	// Another worker on a fresh store: the bucket's bases and deltas. The
	// records are gone from the stream (as past the retention): what the
	// deltas hold cannot come from a catch-up.
	stream, err := e.JS.Stream(jstest.Ctx(t, 10*time.Second), e.Subjects.TracesStream)
	require.NoError(t, err)
	require.NoError(t, stream.Purge(jstest.Ctx(t, 10*time.Second)))
	startFleet(t, e.JS, e.Subjects, "b", Options{SnapshotEvery: 50 * time.Millisecond})
	publishIDs(t, e, cs[800:], ids[800:], "b")
	publishIDs(t, e, cs[600:603], ids[600:603], "dup-b")
	check(waitAggregate(t, e, callsAre(len(cs))), len(cs))
	jstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if _, stray := deltasNamed(t, e); len(stray) > 0 {
			return fmt.Errorf("delta blobs no pointer names: %v", stray)
		}
		return nil
	})
}

// TestTakeoverRemovesBlobsNoPointerNames: a worker loading a partition
// removes the snapshot, aggregate and delta blobs the pointer does not
// name that its own instance wrote (an earlier process's), and those of
// other writers once they are older than the leftover age; it keeps a
// younger one of another writer (a live writer's puts land before its
// pointer) and every blob the pointer names (the report stays exact).
func TestTakeoverRemovesBlobsNoPointerNames(t *testing.T) {
	e := newEnv(t)
	cs, ids := runCalls(rand.New(rand.NewPCG(3, 9)), 600, 200)
	exact := func(n int) {
		t.Helper()
		r, err := waitAggregate(t, e, callsAre(n)).Reducer(outcome.Options{})
		require.NoError(t, err)
		require.JSONEq(t, string(direct(t, cs[:n], outcome.Options{})), string(reportJSON(t, r)))
	}
	ctx := jstest.Ctx(t, 60*time.Second)
	a := startFleet(t, e.JS, e.Subjects, "a", Options{SnapshotEvery: 50 * time.Millisecond})
	kv, err := e.JS.KeyValue(ctx, Bucket)
	require.NoError(t, err)
	parts := e.Subjects.PartitionCount()
	// left puts a one-chunk leftover blob of writer into every partition.
	left := func(kind, writer, slot string) []string {
		var keys []string
		for p := range parts {
			k := fmt.Sprintf("%s.%d.%s.%s.0", kind, p, writer, slot)
			_, err := kv.Put(ctx, k, []byte("leftover"))
			require.NoError(t, err)
			keys = append(keys, k)
		}
		return keys
	}
	// present returns the keys that still hold a leftover's bytes (the
	// worker reuses its own slots' names for what it writes).
	present := func(keys []string) (have []string) {
		for _, k := range keys {
			entry, err := kv.Get(ctx, k)
			if err == nil && string(entry.Value()) == "leftover" {
				have = append(have, k)
			} else if err != nil {
				require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
			}
		}
		return have
	}
	// Each step publishes to every partition, so each one is loaded.
	publish := func(from, to int, prefix string) {
		publishIDs(t, e, cs[from:to], ids[from:to], prefix)
		exact(to)
	}

	publish(0, 200, "a")
	a.stop(t)

	// b (a fresh store: it loads from the bucket) with the default age:
	// its own instance's leftovers go, another writer's fresh ones stay.
	// (Slots b does not write in this test, so that its own puts cannot
	// stand for the removal.)
	own := slices.Concat(left("snap", "b", "9"), left("agg", "b", "9"), left("delta", "b", "30"))
	other := slices.Concat(left("snap", "gone-host.x", "1"), left("delta", "gone-host.x", "3"))
	b := startFleet(t, e.JS, e.Subjects, "b", Options{SnapshotEvery: 50 * time.Millisecond})
	publish(200, 400, "b")
	jstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if have := present(own); len(have) > 0 {
			return fmt.Errorf("own leftovers still held: %v", have)
		}
		return nil
	})
	require.ElementsMatch(t, other, present(other), "another writer's young blobs are kept")
	b.stop(t)

	// c, for which anything of another writer is old: those go too, and
	// the report stays exact.
	c := startFleet(t, e.JS, e.Subjects, "c", Options{SnapshotEvery: 50 * time.Millisecond, leftoverAge: time.Nanosecond})
	publish(400, 600, "c")
	jstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if have := present(other); len(have) > 0 {
			return fmt.Errorf("old leftovers of another writer still held: %v", have)
		}
		return nil
	})
	exact(600)
	c.stop(t)

	// A sweep by yet another writer, for which c's blobs are all old,
	// leaves exactly what each pointer names.
	traces, _, err := streams.EnsureStreams(ctx, e.JS, e.Subjects, 0)
	require.NoError(t, err)
	d, err := New(ctx, e.JS, traces,
		Options{Subjects: e.Subjects, Instance: "d", Logger: jstest.Logger(t), leftoverAge: time.Nanosecond})
	require.NoError(t, err)
	keys, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	var all []string
	for k := range keys.Keys() {
		all = append(all, k)
	}
	for p := range parts {
		entry, err := kv.Get(ctx, partitionKey(p))
		require.NoError(t, err)
		var ptr partPointer
		require.NoError(t, json.Unmarshal(entry.Value(), &ptr))
		named := append([]blobRef{ptr.Snapshot, ptr.Aggregate}, ptr.Deltas...)
		h := d.parts[p]
		h.blobs = named
		h.sweep(ctx, newPartState(p, parts))
		var want []string
		for _, b := range named {
			for i := range b.Chunks {
				want = append(want, b.Prefix+"."+strconv.Itoa(i))
			}
		}
		var have []string
		for _, k := range all {
			for _, kind := range []string{"snap", "agg", "delta"} {
				if strings.HasPrefix(k, fmt.Sprintf("%s.%d.", kind, p)) {
					if _, err := kv.Get(ctx, k); err == nil {
						have = append(have, k)
					}
				}
			}
		}
		slices.Sort(want)
		slices.Sort(have)
		require.Equal(t, slices.Compact(want), have, "partition %d", p)
	}
}
