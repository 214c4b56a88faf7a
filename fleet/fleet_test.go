package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracegen"
	"github.com/verdryx/verdryx/tracemsg"
)

// TestPartitionMatchesServerMapping: a record published to a run-keyed
// subject under the documented mapping lands on the partition tracemsg.PartitionOf
// computes, so producers may rely on the server's partition().
func TestPartitionMatchesServerMapping(t *testing.T) {
	dir := t.TempDir()
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	require.NoError(t, ns.GlobalAccount().AddMapping("verdryx.traces.run.*", "verdryx.traces.{{partition(8,1)}}"))
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := jstest.Ctx(t, 20*time.Second)
	s := streams.DefaultSubjects()
	_, _, err = streams.EnsureStreams(ctx, js, s, 0)
	require.NoError(t, err)
	ids := []string{"r1", "run-42", "agent-run_7", "ÆØÅ-unicode", "0", strings.Repeat("x", 200)}
	for i := range 200 {
		ids = append(ids, fmt.Sprintf("run-%d", i))
	}
	seen := map[int]bool{}
	for _, id := range ids {
		ack, err := js.Publish(ctx, "verdryx.traces.run."+id, []byte(`{"run_id":`+strconv.Quote(id)+`,"decision":"allow"}`))
		require.NoError(t, err)
		m, err := js.Stream(ctx, s.TracesStream)
		require.NoError(t, err)
		raw, err := m.GetMsg(ctx, ack.Sequence)
		require.NoError(t, err)
		want := tracemsg.PartitionOf(id, 8)
		require.Equal(t, streams.TraceSubject(s.Traces, want), raw.Subject, "run id %q", id)
		seen[want] = true
	}
	require.Len(t, seen, 8, "the ids spread over every partition")
}

// fleetDir generates a trace directory and returns its direct
// cost-per-correct report as JSON.
func fleetDir(t *testing.T, rows int64, seed uint64) (dir string, want []byte) {
	t.Helper()
	return fleetDirN(t, rows, seed, 4)
}

// fleetDirStart is where the calls of a fleetDir start: one day of them.
func fleetDirStart() time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) }

// fleetDirN is fleetDir with segs segments.
func fleetDirN(t *testing.T, rows int64, seed uint64, segs int64) (dir string, want []byte) {
	t.Helper()
	dir = t.TempDir()
	_, err := tracegen.GenerateFleet(dir, tracegen.FleetOptions{Rows: rows, MeanCallsPerRun: 20, Concurrent: 50,
		SegmentRows: rows / segs, RowGroupRows: rows / segs / 2, Agents: 5, Seed: seed, Start: fleetDirStart(), Span: 24 * time.Hour})
	require.NoError(t, err)
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	_, err = segfold.ReduceDir(context.Background(), dir, r, segfold.DirOptions{})
	require.NoError(t, err)
	return dir, calltest.ReportJSON(t, r)
}

// fleetWorker runs a Fleet over its own store until stop.
type fleetWorker struct {
	f      *Fleet
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startFleet(t *testing.T, js jetstream.JetStream, s streams.Subjects, name string, opts Options) *fleetWorker {
	t.Helper()
	t.Helper()
	ctx := jstest.Ctx(t, 30*time.Second)
	traces, _, err := streams.EnsureStreams(ctx, js, s, 0)
	require.NoError(t, err)
	opts.Subjects, opts.Instance = s, name
	if opts.SnapshotEvery == 0 {
		opts.SnapshotEvery = 200 * time.Millisecond
	}
	opts.Logger = jstest.Logger(t).With("worker", name)
	f, err := New(ctx, js, traces, opts)
	require.NoError(t, err)
	fctx, cancel := context.WithCancel(context.Background())
	w := &fleetWorker{f: f, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- f.Run(fctx) }()
	t.Cleanup(func() { w.stop(t) })
	return w
}

func (w *fleetWorker) stop(t *testing.T) {
	w.once.Do(func() {
		w.cancel()
		select {
		case err := <-w.done:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			buf := make([]byte, 1<<22)
			n := runtime.Stack(buf, true)
			_ = os.WriteFile(filepath.Join(os.TempDir(), "fleet-stop-stacks.txt"), buf[:n], 0o644)
			t.Error("fleet did not stop in 60s")
		}
	})
}

// waitDrained polls until every trace consumer has nothing pending or
// unacked.
func waitFleetDrained(t *testing.T, js jetstream.JetStream, s streams.Subjects, total time.Duration) {
	t.Helper()
	ctx := jstest.Ctx(t, total+10*time.Second)
	jstest.CheckFor(t, total, 100*time.Millisecond, func() error {
		stream, err := js.Stream(ctx, s.TracesStream)
		if err != nil {
			return err
		}
		names := map[string]string{streams.TracesConsumer: s.Traces}
		for p := range s.PartitionCount() {
			names[PartitionConsumer(p)] = streams.TraceSubject(s.Traces, p)
		}
		for n, subject := range names {
			c, err := js.Consumer(ctx, s.TracesStream, n)
			if err != nil {
				return err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumPending > 0 || info.NumAckPending > 0 {
				return fmt.Errorf("%s: %d pending, %d unacked", n, info.NumPending, info.NumAckPending)
			}
			// The pending count follows a publish asynchronously in the
			// server: the ack floor must also have reached the subject's
			// newest record.
			last, err := lastSeqOf(ctx, stream, subject)
			if err != nil {
				return err
			}
			if info.AckFloor.Stream < last {
				return fmt.Errorf("%s: acked through stream seq %d of %d", n, info.AckFloor.Stream, last)
			}
		}
		return nil
	})
}

func mergedJSON(t *testing.T, js jetstream.JetStream, s streams.Subjects) []byte {
	t.Helper()
	agg, err := ReadAggregate(jstest.Ctx(t, 30*time.Second), js, s)
	require.NoError(t, err)
	r, err := agg.Reducer(outcome.Options{})
	require.NoError(t, err)
	return calltest.ReportJSON(t, r)
}

// TestFleetOneWorkerMatchesDirectReduction: a directory replayed twice to
// the partitions plus records on the bare (legacy) subject, consumed by one
// worker, gives exactly the direct reduction, merged from the published
// aggregates.
func TestFleetOneWorkerMatchesDirectReduction(t *testing.T) {
	e := newEnv(t)
	dir, want := fleetDir(t, 6000, 3)
	ctx := jstest.Ctx(t, 60*time.Second)
	st, err := segpub.Publish(ctx, e.JS, e.Subjects.Traces, dir, segpub.Options{})
	require.NoError(t, err)
	require.Equal(t, 6000, st.New)
	// The merged report refuses while partitions were never published.
	_, err = ReadAggregate(ctx, e.JS, e.Subjects)
	var missing *MissingPartitionsError
	require.ErrorAs(t, err, &missing)
	require.Len(t, missing.Partitions, 8)

	w := startFleet(t, e.JS, e.Subjects, "solo", Options{})
	// Replayed again: every row is a duplicate.
	st, err = segpub.Publish(ctx, e.JS, e.Subjects.Traces, dir, segpub.Options{})
	require.NoError(t, err)
	require.Equal(t, 6000, st.Duplicates)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	require.JSONEq(t, string(want), string(mergedJSON(t, e.JS, e.Subjects)))

	// Legacy producers: records on the bare subject are routed; the same
	// record without an id twice counts once, equal steps both count.
	for _, raw := range []string{
		`{"run_id":"legacy-1","step":1,"decision":"allow","cost_microusd":5}`,
		`{"run_id":"legacy-1","step":1,"decision":"allow","cost_microusd":5}`,
		`{"run_id":"legacy-1","step":1,"decision":"allow","cost_microusd":7,"outcome":"case_resolved"}`,
	} {
		_, err := e.JS.Publish(ctx, e.Subjects.Traces, []byte(raw))
		require.NoError(t, err)
	}
	// A consumer's pending count follows a publish asynchronously in the
	// server, so right after these publishes "drained" can be read before
	// the router has seen them: wait for the routed records to be
	// published in their partition's aggregate first.
	jstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
		if err != nil {
			return err
		}
		if got := runsOf(t, agg)["legacy-1"]; got != 2 {
			return fmt.Errorf("legacy-1 has %d calls in the aggregate, want 2", got)
		}
		return nil
	})
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.Equal(t, uint64(2), runsOf(t, agg)["legacy-1"])
	require.Equal(t, int64(6002), agg.Calls())
}

// waitFleetCalls polls the published aggregates until they hold n calls.
func waitFleetCalls(t *testing.T, w *fleetWorker, n int64) {
	t.Helper()
	jstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		agg, err := ReadAggregate(context.Background(), w.f.js, w.f.opts.Subjects)
		if err != nil {
			return err
		}
		if got := agg.Calls(); got != n {
			return fmt.Errorf("stored %d calls, want %d", got, n)
		}
		return nil
	})
}

// TestSnapshotDueFollowsTheSnapshotsCost: a cheap snapshot is repeated at
// a twentieth of SnapshotEvery, a costly one waits snapshotShare times its
// duration, never longer than SnapshotEvery.
func TestSnapshotDueFollowsTheSnapshotsCost(t *testing.T) {
	h := &partHandler{f: &Fleet{opts: Options{SnapshotEvery: time.Second}}}
	require.Equal(t, 50*time.Millisecond, h.snapshotDue(), "before the first snapshot")
	h.lastSnapTook = 2 * time.Millisecond
	require.Equal(t, 50*time.Millisecond, h.snapshotDue())
	h.lastSnapTook = 30 * time.Millisecond
	require.Equal(t, 300*time.Millisecond, h.snapshotDue())
	h.lastSnapTook = 400 * time.Millisecond
	require.Equal(t, time.Second, h.snapshotDue())
	// While a backlog drains, snapshots wait backlogShare times longer,
	// up to backlogSnapshots times SnapshotEvery.
	h.backlog = true
	h.lastSnapTook = 30 * time.Millisecond
	require.Equal(t, 1200*time.Millisecond, h.snapshotDue())
	h.lastSnapTook = 400 * time.Millisecond
	require.Equal(t, 5*time.Second, h.snapshotDue())
}

// lostReplyKV applies the pointer updates of partition 0 but reports the
// ones listed in lose as failed, as when the reply is lost with a node.
type lostReplyKV struct {
	jetstream.KeyValue
	mu      sync.Mutex
	updates int
	lose    map[int]bool
	lost    atomic.Int32
}

func (kv *lostReplyKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := kv.KeyValue.Update(ctx, key, value, last)
	if err != nil || key != partitionKey(0) {
		return rev, err
	}
	kv.mu.Lock()
	kv.updates++
	lose := kv.lose[kv.updates]
	kv.mu.Unlock()
	if lose {
		kv.lost.Add(1)
		return 0, errors.New("simulated: reply lost after the update was applied")
	}
	return rev, nil
}

// TestSnapshotPointerUpdateWithALostReply: a pointer update applied with
// its reply lost does not lead the owner to overwrite the blobs the pointer
// now names; the partition stays loadable and the merged report exact.
func TestSnapshotPointerUpdateWithALostReply(t *testing.T) {
	e := newEnv(t)
	dir, want := fleetDirN(t, 16000, 11, 12)
	kv := &lostReplyKV{lose: map[int]bool{2: true, 4: true}}
	w := startFleet(t, e.JS, e.Subjects, "w", Options{SnapshotEvery: 20 * time.Millisecond, Batch: 64,
		wrapKV: func(inner jetstream.KeyValue) jetstream.KeyValue { kv.KeyValue = inner; return kv }})
	ctx := jstest.Ctx(t, 60*time.Second)
	// A replay per phase, each drained: partition 0's pointer moves at
	// least once per phase.
	for _, phase := range phaseDirs(t, dir, 6) {
		_, err := segpub.Publish(ctx, e.JS, e.Subjects.Traces, phase, segpub.Options{BatchRows: 64})
		require.NoError(t, err)
		waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	}
	w.stop(t)
	require.EqualValues(t, 2, kv.lost.Load(), "the lost replies happened")
	require.JSONEq(t, string(want), string(mergedJSON(t, e.JS, e.Subjects)))
	// A new owner loads every partition's snapshot.
	for p := range e.Subjects.PartitionCount() {
		entry, err := kv.KeyValue.Get(ctx, partitionKey(p))
		require.NoError(t, err)
		var ptr partPointer
		require.NoError(t, json.Unmarshal(entry.Value(), &ptr))
		_, err = getBlob(ctx, kv.KeyValue, ptr.Snapshot)
		require.NoError(t, err, "partition %d snapshot", p)
	}
}

// TestADrainedBurstIsReportedFreed: with no day to fold, Options.Freed is
// called after a backlog drains (a replay published before the worker
// started), and not after a record that came alone.
func TestADrainedBurstIsReportedFreed(t *testing.T) {
	e := newEnv(t)
	dir, want := fleetDir(t, 6000, 5)
	ctx := jstest.Ctx(t, 60*time.Second)
	_, err := segpub.Publish(ctx, e.JS, e.Subjects.Traces, dir, segpub.Options{})
	require.NoError(t, err)
	var freed atomic.Int64
	startFleet(t, e.JS, e.Subjects, "burst", Options{FoldAfter: 100_000 * time.Hour, Batch: 1, Freed: func() { freed.Add(1) }})
	// Freed is called before the snapshot's ack: drained means called.
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	require.JSONEq(t, string(want), string(mergedJSON(t, e.JS, e.Subjects)))
	require.Positive(t, freed.Load(), "a drained backlog is reported")

	freed.Store(0)
	_, err = e.JS.Publish(ctx, e.Subjects.Traces,
		[]byte(`{"call_id":"alone-1","run_id":"alone","step":1,"decision":"allow","cost_microusd":5,"ts_millis":1793491200000}`))
	require.NoError(t, err)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	require.Zero(t, freed.Load(), "a record alone is no burst")
}

// heldCalls returns the calls of the partition states w holds in memory
// (applied, snapshotted or not).
func heldCalls(w *fleetWorker) int64 {
	var n int64
	for _, h := range w.f.parts {
		h.mu.Lock()
		if h.state != nil {
			n += (&partstate.Aggregate{Parts: map[int]*partstate.State{h.p: h.state}}).Calls()
		}
		h.mu.Unlock()
	}
	return n
}
