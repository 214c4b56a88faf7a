package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracemsg"
)

// phaseDirs splits the segments of dir, in name order, into n directories
// of consecutive segments (replaying them in order replays dir).
func phaseDirs(t *testing.T, dir string, n int) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".parquet" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	require.GreaterOrEqual(t, len(names), n, "segments to split")
	out := make([]string, n)
	for i := range out {
		out[i] = t.TempDir()
	}
	for i, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out[i*n/len(names)], name), b, 0o644))
	}
	return out
}

// pinnedTo returns the pin id of each partition consumer ("" when none).
func pinnedTo(t *testing.T, js jetstream.JetStream, s streams.Subjects) []string {
	t.Helper()
	ctx := jstest.Ctx(t, 10*time.Second)
	out := make([]string, s.PartitionCount())
	for p := range out {
		c, err := js.Consumer(ctx, s.TracesStream, PartitionConsumer(p))
		require.NoError(t, err)
		info, err := c.Info(ctx)
		require.NoError(t, err)
		for _, g := range info.PriorityGroups {
			if g.Group == partitionGroup {
				out[p] = g.PinnedClientID
			}
		}
	}
	return out
}

// TestPinMovesToAWorkerThatDiesAndBack: a partition owner keeps its state
// while the partition's pin moves to a second worker, which is delivered
// records, applies them and dies before its snapshot (so it acks nothing
// and writes no pointer); the pin comes back. The first worker's next
// delivery skips the sequences the second one got: with AckAll, applying it
// onto the kept state and acking would ack the records the dead worker held
// without any state holding them. The owner reloads instead, and the merged
// report equals the direct reduction.
func TestPinMovesToAWorkerThatDiesAndBack(t *testing.T) {
	e := newEnv(t)
	dir, want := fleetDir(t, 12000, 21)
	phases := phaseDirs(t, dir, 3)
	ctx := jstest.Ctx(t, 120*time.Second)
	// A long AckWait: the dead worker's records are not redelivered within
	// the test, only a reload can bring them back.
	opts := Options{PinnedTTL: time.Second, AckWait: 5 * time.Minute, Batch: 64}
	a := startFleet(t, e.JS, e.Subjects, "a", opts)
	_, err := segpub.Publish(ctx, e.JS, e.Subjects.Traces, phases[0], segpub.Options{BatchRows: 64})
	require.NoError(t, err)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	before := pinnedTo(t, e.JS, e.Subjects)
	stream, err := e.JS.Stream(ctx, e.Subjects.TracesStream)
	require.NoError(t, err)
	phase1Last := map[int]uint64{}
	for p := range e.Subjects.PartitionCount() {
		phase1Last[p], err = lastSeqOf(ctx, stream, streams.TraceSubject(e.Subjects.Traces, p))
		require.NoError(t, err)
	}

	// Worker b cannot move a partition pointer, so it never completes a
	// snapshot and acks nothing; it dies without a word.
	nc, err := nats.Connect(e.NC.ConnectedUrl())
	require.NoError(t, err)
	bjs, err := jetstream.New(nc)
	require.NoError(t, err)
	bopts := opts
	bopts.wrapKV = func(kv jetstream.KeyValue) jetstream.KeyValue { return noPointerKV{kv} }
	b := startFleet(t, bjs, e.Subjects, "b", bopts)
	// Unpinning makes the server drop the pull requests carrying the old
	// pin id; b's waiting request (no pin id) takes the new pin, once it
	// waits beside a's on every partition.
	jstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		for p := range e.Subjects.PartitionCount() {
			c, err := stream.Consumer(ctx, PartitionConsumer(p))
			if err != nil {
				return err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumWaiting < 2 {
				return fmt.Errorf("partition %d: %d pull requests waiting, want a's and b's", p, info.NumWaiting)
			}
		}
		return nil
	})
	for p := range e.Subjects.PartitionCount() {
		require.NoError(t, stream.UnpinConsumer(ctx, PartitionConsumer(p), partitionGroup))
	}
	_, err = segpub.Publish(ctx, e.JS, e.Subjects.Traces, phases[1], segpub.Options{BatchRows: 64})
	require.NoError(t, err)
	// Every record of phase 2 delivered (to b, or to a where a kept the pin).
	jstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for p := range e.Subjects.PartitionCount() {
			c, err := e.JS.Consumer(ctx, e.Subjects.TracesStream, PartitionConsumer(p))
			if err != nil {
				return err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumPending > 0 {
				return fmt.Errorf("partition %d: %d not delivered", p, info.NumPending)
			}
		}
		return nil
	})
	moved := 0
	for p, pin := range pinnedTo(t, e.JS, e.Subjects) {
		if pin != before[p] {
			moved++
		}
	}
	require.Positive(t, moved, "the unpin moved some partitions")
	// Delivered is not applied: wait until b holds phase 2's records of
	// some partition it took (it cannot publish them: no pointer write).
	jstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, h := range b.f.parts {
			h.mu.Lock()
			applied := h.state != nil && h.state.LastSeq > phase1Last[h.p]
			h.mu.Unlock()
			if applied {
				return nil
			}
		}
		return errors.New("worker b applied none of phase 2")
	})
	t.Logf("%d partitions moved to b, which holds %d calls", moved, heldCalls(b))
	nc.Close() // b dies: nothing flushed, acked or unpinned
	b.stop(t)

	// After the PinnedTTL the pins come back to a.
	_, err = segpub.Publish(ctx, e.JS, e.Subjects.Traces, phases[2], segpub.Options{BatchRows: 64})
	require.NoError(t, err)
	waitFleetDrained(t, e.JS, e.Subjects, 60*time.Second)
	a.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 12000, agg.Calls(), "every call once")
	require.JSONEq(t, string(want), string(mergedJSON(t, e.JS, e.Subjects)))
}

// noPointerKV fails every pointer write, as for a worker cut off from the
// bucket's leader.
type noPointerKV struct{ jetstream.KeyValue }

func (noPointerKV) Create(context.Context, string, []byte, ...jetstream.KVCreateOpt) (uint64, error) {
	return 0, errors.New("simulated: no pointer write")
}

func (noPointerKV) Update(context.Context, string, []byte, uint64) (uint64, error) {
	return 0, errors.New("simulated: no pointer write")
}

// failingDeadLetters fails the first fail copies, then records each.
type failingDeadLetters struct {
	mu     sync.Mutex
	fail   int
	failed int
	copied map[uint64]int // stream seq -> copies
	reason map[uint64]string
}

func (d *failingDeadLetters) DeadLetter(_ context.Context, m pull.Msg, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed < d.fail {
		d.failed++
		return errors.New("simulated: dead-letter stream unavailable")
	}
	md, err := m.Metadata()
	if err != nil {
		return err
	}
	d.copied[md.Sequence.Stream]++
	if d.reason != nil {
		d.reason[md.Sequence.Stream] = reason
	}
	return nil
}

// TestPoisonRecordIsNotAckedBeforeItsDeadLetterCopy: a malformed record on
// a partition whose dead-letter copy fails several times, followed by good
// records of the same partition. The ack of a later record acks every
// earlier one (AckAll), so the poison record must not be passed over while
// its copy is missing: it ends up copied, and the good records counted once.
func TestPoisonRecordIsNotAckedBeforeItsDeadLetterCopy(t *testing.T) {
	e := newEnv(t)
	dl := &failingDeadLetters{fail: 3, copied: map[uint64]int{}}
	w := startFleet(t, e.JS, e.Subjects, "w", Options{DeadLetter: dl, Batch: 8})
	ctx := jstest.Ctx(t, 60*time.Second)
	subject := streams.TraceSubject(e.Subjects.Traces, tracemsg.PartitionOf("run-p", e.Subjects.PartitionCount()))
	// The worker holds the partition's state when the poison record comes.
	_, err := e.JS.Publish(ctx, subject, []byte(`{"run_id":"run-p","call_id":"first","step":0,"decision":"allow","cost_microusd":3}`))
	require.NoError(t, err)
	waitFleetDrained(t, e.JS, e.Subjects, 20*time.Second)
	ack, err := e.JS.Publish(ctx, subject, []byte(`{"run_id":"run-p","step":`))
	require.NoError(t, err)
	poison := ack.Sequence
	for i := range 40 {
		_, err := e.JS.Publish(ctx, subject, fmt.Appendf(nil, `{"run_id":"run-p","call_id":"c%d","step":%d,"decision":"allow","cost_microusd":3}`, i, i))
		require.NoError(t, err)
	}
	waitFleetDrained(t, e.JS, e.Subjects, 45*time.Second)
	w.stop(t)
	dl.mu.Lock()
	defer dl.mu.Unlock()
	require.Positive(t, dl.copied[poison], "the poison record was copied before it was acked")
	require.Equal(t, 3, dl.failed, "the copies failed first")
	require.Len(t, dl.copied, 1, "only the poison record is dead-lettered")
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 41, runsOf(t, agg)["run-p"])
}

// TestPartitionConsumersMigrateToAckAll: partition consumers created with
// explicit acks (an earlier version) are recreated with AckAll to start
// after their ack floor; ensuring them again keeps that start; a worker on
// the migrated consumers ends with the direct reduction.
func TestPartitionConsumersMigrateToAckAll(t *testing.T) {
	e := newEnv(t)
	dir, want := fleetDir(t, 8000, 23)
	phases := phaseDirs(t, dir, 2)
	ctx := jstest.Ctx(t, 90*time.Second)
	w := startFleet(t, e.JS, e.Subjects, "w", Options{})
	_, err := segpub.Publish(ctx, e.JS, e.Subjects.Traces, phases[0], segpub.Options{})
	require.NoError(t, err)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	// What an earlier version left: explicit-ack consumers whose ack floor
	// is the newest record of each partition (all in the snapshots).
	floors := map[int]uint64{}
	stream, err := e.JS.Stream(ctx, e.Subjects.TracesStream)
	require.NoError(t, err)
	for p := range e.Subjects.PartitionCount() {
		c, err := e.JS.Consumer(ctx, e.Subjects.TracesStream, PartitionConsumer(p))
		require.NoError(t, err)
		cfg := c.CachedInfo().Config
		last, err := lastSeqOf(ctx, stream, streams.TraceSubject(e.Subjects.Traces, p))
		require.NoError(t, err)
		require.Positive(t, last)
		require.NoError(t, e.JS.DeleteConsumer(ctx, e.Subjects.TracesStream, cfg.Durable))
		cfg.AckPolicy = jetstream.AckExplicitPolicy
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, last+1
		_, err = e.JS.CreateConsumer(ctx, e.Subjects.TracesStream, cfg)
		require.NoError(t, err)
		floors[p] = last
	}
	_, err = segpub.Publish(ctx, e.JS, e.Subjects.Traces, phases[1], segpub.Options{})
	require.NoError(t, err)

	for range 2 { // migrated, then ensured again unchanged
		cons, err := EnsurePartitions(ctx, e.JS, e.Subjects, PartitionOptions{})
		require.NoError(t, err)
		for p, c := range cons {
			info, err := c.Info(ctx)
			require.NoError(t, err)
			require.Equal(t, jetstream.AckAllPolicy, info.Config.AckPolicy, "partition %d", p)
			require.Equal(t, jetstream.DeliverByStartSequencePolicy, info.Config.DeliverPolicy, "partition %d", p)
			require.Equal(t, floors[p]+1, info.Config.OptStartSeq, "partition %d starts after its ack floor", p)
		}
	}
	w2 := startFleet(t, e.JS, e.Subjects, "w", Options{})
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w2.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 8000, agg.Calls(), "every call once")
	require.JSONEq(t, string(want), string(mergedJSON(t, e.JS, e.Subjects)))
}

// TestBadRecordsAreDeadLetteredNotCounted: a negative cost and a record
// over the size limit are dead-lettered by the partition owner, naming the
// field or the limit; the good records around them count, the total is
// theirs.
func TestBadRecordsAreDeadLetteredNotCounted(t *testing.T) {
	e := newEnv(t)
	dl := &failingDeadLetters{copied: map[uint64]int{}}
	w := startFleet(t, e.JS, e.Subjects, "w", Options{DeadLetter: dl, MaxRecordBytes: 4096})
	ctx := jstest.Ctx(t, 60*time.Second)
	subject := streams.TraceSubject(e.Subjects.Traces, tracemsg.PartitionOf("run-b", e.Subjects.PartitionCount()))
	bad := map[uint64]bool{}
	for i, rec := range []string{
		`{"run_id":"run-b","call_id":"a","step":0,"decision":"allow","cost_microusd":30}`,
		`{"run_id":"run-b","call_id":"neg","step":1,"decision":"allow","cost_microusd":-100}`,
		`{"run_id":"run-b","call_id":"big","step":2,"decision":"allow","cost_microusd":5,"attributes":{"blob":"` + strings.Repeat("x", 5000) + `"}}`,
		`{"run_id":"run-b","call_id":"usd","step":3,"decision":"allow","cost_usd":-0.5}`,
		`{"run_id":"run-b","call_id":"b","step":4,"decision":"allow","cost_microusd":12}`,
	} {
		ack, err := e.JS.Publish(ctx, subject, []byte(rec))
		require.NoError(t, err)
		if i > 0 && i < 4 {
			bad[ack.Sequence] = true
		}
	}
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	dl.mu.Lock()
	require.Len(t, dl.copied, 3)
	for seq := range bad {
		// (a copy made again is dropped by the dead-letter stream's id)
		require.Positive(t, dl.copied[seq], "stream seq %d dead-lettered", seq)
	}
	dl.mu.Unlock()
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 2, runsOf(t, agg)["run-b"], "only the good calls count")
	r, err := agg.Reducer(outcome.Options{})
	require.NoError(t, err)
	rep, err := r.CheckedReport()
	require.NoError(t, err)
	require.Len(t, rep.Groups, 1)
	require.EqualValues(t, 42, rep.Groups[0].Overall.TotalCostMicroUSD)
}
