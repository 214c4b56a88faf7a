package fleet

import (
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

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/streams"
)

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
	cs := calltest.RandomDayCalls(rng, n, 1)
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
	check := func(agg *partstate.Aggregate, n int) {
		t.Helper()
		r, err := agg.Reducer(outcome.Options{})
		require.NoError(t, err)
		require.JSONEq(t, string(calltest.Direct(t, cs[:n], outcome.Options{})), string(calltest.ReportJSON(t, r)))
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
		require.JSONEq(t, string(calltest.Direct(t, cs[:n], outcome.Options{})), string(calltest.ReportJSON(t, r)))
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
		h.sweep(ctx, partstate.NewState(p, parts))
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
