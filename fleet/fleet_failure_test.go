package fleet

// The failure table of docs/worker.md, proved on the path production runs:
// the partitioned fleet (router of the bare subject, partition handlers,
// partition state in the store, aggregates in the KV bucket).

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracemsg"
)

// mergedTable is the merged report of the published aggregates as the
// table reportOf prints.
func mergedTable(t *testing.T, js jetstream.JetStream, s streams.Subjects) string {
	t.Helper()
	agg, err := ReadAggregate(jstest.Ctx(t, 30*time.Second), js, s)
	require.NoError(t, err)
	r, err := agg.Reducer(outcome.Options{})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, r.Report().WriteTable(&buf))
	return buf.String()
}

// publishToPartitions publishes calls straight to their partition subjects,
// as producers that partition themselves do: call_id "<callPrefix>-<i>"
// (none when callPrefix is empty), message id "<msgPrefix>-<i>", i from
// offset.
func (e *env) publishToPartitions(js jetstream.JetStream, cl []calls.Call, callPrefix, msgPrefix string, offset int) {
	e.T.Helper()
	ctx := jstest.Ctx(e.T, 20*time.Second)
	n := e.Subjects.PartitionCount()
	for i, c := range cl {
		callID := ""
		if callPrefix != "" {
			callID = fmt.Sprintf("%s-%d", callPrefix, offset+i)
		}
		b := calltest.RecordJSONWithID(c, callID)
		rec := calltest.Record(e.T, b)
		id := fmt.Sprintf("%s-%d", msgPrefix, offset+i)
		p, err := tracemsg.RecordPartition(&rec, id, n)
		require.NoError(e.T, err)
		_, err = js.Publish(ctx, streams.TraceSubject(e.Subjects.Traces, p), b, jetstream.WithMsgID(id))
		require.NoError(e.T, err)
	}
}

// ackPending is how many delivered records the partition consumers wait on
// acks for.
func ackPending(ctx context.Context, js jetstream.JetStream, s streams.Subjects) (int, error) {
	n := 0
	for p := range s.PartitionCount() {
		c, err := js.Consumer(ctx, s.TracesStream, PartitionConsumer(p))
		if err != nil {
			return 0, err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return 0, err
		}
		n += info.NumAckPending
	}
	return n, nil
}

// TestFleetRecordsMatchDirectReduction: records published to the bare
// subject, with every reduction rule in play, are routed to their
// partitions; the merged report equals the direct reduction.
func TestFleetRecordsMatchDirectReduction(t *testing.T) {
	e := newEnv(t)
	cl := jstest.SampleCalls()
	want := jstest.ReportOf(t, cl)
	require.Contains(t, want, "case_resolved")
	require.Contains(t, want, "(untagged)")
	require.Equal(t, want, fleetTableOf(t, e, cl, "a", 16))
}

// fleetTableOf publishes cl to the bare traces subject under message ids
// "<idPrefix>-<i>", lets one fleet worker (batches of batch) take them all
// and returns the merged report's table.
func fleetTableOf(t *testing.T, e *env, cl []calls.Call, idPrefix string, batch int) string {
	t.Helper()
	w := startFleet(t, e.JS, e.Subjects, "w", Options{Batch: batch})
	e.publishCalls(cl, idPrefix)
	waitFleetCalls(t, w, int64(len(cl)))
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	return mergedTable(t, e.JS, e.Subjects)
}

// TestFleetEqualStepCallsBothCount: a blocked call and its allowed retry
// share a step; both count, and the later one decides the outcome.
func TestFleetEqualStepCallsBothCount(t *testing.T) {
	e := newEnv(t)
	var cl []calls.Call
	for _, c := range jstest.SampleCalls() {
		if strings.HasPrefix(c.RunID, "retry-") {
			cl = append(cl, c)
		}
	}
	require.Len(t, cl, 9)
	want := jstest.ReportOf(t, cl)
	require.Contains(t, want, "case_resolved     3      9        3   0.001050")
	require.Equal(t, want, fleetTableOf(t, e, cl, "eq", 4))
}

// TestFleetCrashAfterCommitBeforeAckCountsOnce: a worker commits records
// to its store and dies (its connection drops) before acking them; a
// worker restarted on the same store takes the partitions over, is
// delivered the unacked records again and counts each once. The whole set
// published again under new message ids (a duplicate replay JetStream's
// own dedupe cannot catch) counts nothing twice: call_id is the identity.
func TestFleetCrashAfterCommitBeforeAckCountsOnce(t *testing.T) {
	e := newEnv(t)
	cl := jstest.SampleCalls()
	want := jstest.ReportOf(t, cl)
	nc, err := nats.Connect(e.NC.ConnectedUrl())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ajs, err := jetstream.New(nc)
	require.NoError(t, err)
	// Worker a cannot move a partition pointer: it applies the records
	// and acks nothing.
	a := startFleet(t, ajs, e.Subjects, "a",
		Options{PinnedTTL: time.Second, AckWait: 2 * time.Second, Batch: 8,
			wrapKV: func(kv jetstream.KeyValue) jetstream.KeyValue { return noPointerKV{kv} }})
	e.publishToPartitions(e.JS, cl[:100], "call", "a", 0)
	ctx := jstest.Ctx(t, 60*time.Second)
	jstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		unacked, err := ackPending(ctx, e.JS, e.Subjects)
		if err != nil {
			return err
		}
		if n := heldCalls(a); n != 100 || unacked == 0 {
			return fmt.Errorf("%d calls applied, %d records unacked", n, unacked)
		}
		return nil
	})
	nc.Close() // a dies: nothing flushed, acked or unpinned
	a.stop(t)

	a2 := startFleet(t, e.JS, e.Subjects, "a", Options{PinnedTTL: time.Second, AckWait: 2 * time.Second, Batch: 8})
	e.publishToPartitions(e.JS, cl[100:], "call", "b", 100)
	e.publishToPartitions(e.JS, cl, "call", "dup", 0)
	waitFleetDrained(t, e.JS, e.Subjects, 45*time.Second)
	a2.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, len(cl), agg.Calls(), "every call once")
	require.Equal(t, want, mergedTable(t, e.JS, e.Subjects), "exactly the direct reduction: nothing lost or doubled")
}

// TestFleetPoisonRecordsAreDeadLetteredAndTheNextIsProcessed: a malformed
// and an invalid record on a partition are copied to the dead-letter
// subject by the partition handler with their reasons and settled by the
// next ack (rule 4: never terminated); the good record after them counts.
// A malformed record on the bare subject is dead-lettered by the router
// (which acks each message, so it terminates it).
func TestFleetPoisonRecordsAreDeadLetteredAndTheNextIsProcessed(t *testing.T) {
	e := newEnv(t)
	dead := deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})
	sub, err := e.NC.SubscribeSync(e.Subjects.DeadLetter)
	require.NoError(t, err)
	defer sub.Unsubscribe()
	w := startFleet(t, e.JS, e.Subjects, "w", Options{DeadLetter: dead})
	ctx := jstest.Ctx(t, 60*time.Second)
	subject := streams.TraceSubject(e.Subjects.Traces, tracemsg.PartitionOf("r1", e.Subjects.PartitionCount()))
	// The worker holds the partition's state when the poison records come
	// (the live path, not a take-over's catch-up).
	_, err = e.JS.Publish(ctx, subject, []byte(`{"run_id": "r1", "step": 0, "decision": "allow", "cost_microusd": 1}`))
	require.NoError(t, err)
	waitFleetCalls(t, w, 1)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	for _, raw := range []string{
		`{"run_id": "r1", "step": "not a number"`,
		`{"run_id": "r1", "step": 1, "cost_usd": 1e300}`, // over the per-call maximum
		`{"run_id": "r1", "step": 2, "decision": "allow", "cost_microusd": 5}`,
	} {
		_, err := e.JS.Publish(ctx, subject, []byte(raw))
		require.NoError(t, err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(producer.HeaderDeadReason), "malformed trace record")
	require.Equal(t, subject, m.Header.Get(producer.HeaderDeadSubject))
	m, err = sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(producer.HeaderDeadReason), "field cost_usd: 1e+300 is over the per-call maximum")
	require.Equal(t, subject, m.Header.Get(producer.HeaderDeadSubject))

	_, err = e.JS.Publish(ctx, e.Subjects.Traces, []byte(`{"run_id":"r2","step":1,"decision":"allow"`))
	require.NoError(t, err)
	_, err = e.JS.Publish(ctx, e.Subjects.Traces, []byte(`{"run_id":"r2","step":1,"decision":"allow","cost_microusd":9}`))
	require.NoError(t, err)
	m, err = sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(producer.HeaderDeadReason), "malformed trace record")
	require.Equal(t, e.Subjects.Traces, m.Header.Get(producer.HeaderDeadSubject))

	waitFleetCalls(t, w, 3)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	// (a copy made again, as in a catch-up, is dropped by the dead-letter
	// stream's message id)
	dls, err := deadletter.List(ctx, e.JS, e.Subjects, "")
	require.NoError(t, err)
	require.Len(t, dls, 3, "no further dead letters")
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 2, runsOf(t, agg)["r1"])
	require.EqualValues(t, 1, runsOf(t, agg)["r2"])
}

// TestFleetFoldPanicDeadLettersOnlyThatRecord: a panic while a record is
// folded (after its call was applied to the state) dead-letters that
// record, undoes its call, and the rest of its batch counts.
func TestFleetFoldPanicDeadLettersOnlyThatRecord(t *testing.T) {
	e := newEnv(t)
	n := e.Subjects.PartitionCount()
	p := tracemsg.PartitionOf("boom", n)
	var good []calls.Call
	for _, c := range jstest.SampleCalls() {
		if c.HasRunID && tracemsg.PartitionOf(c.RunID, n) == p {
			good = append(good, c)
		}
	}
	require.NotEmpty(t, good)
	ctx := jstest.Ctx(t, 60*time.Second)
	// Published first, so the panicking record shares a batch with good ones.
	half := len(good) / 2
	e.publishToPartitions(e.JS, good[:half], "", "a", 0)
	ack, err := e.JS.Publish(ctx, streams.TraceSubject(e.Subjects.Traces, p), []byte(`{"run_id":"boom","step":0,"decision":"allow","cost_microusd":999}`))
	require.NoError(t, err)
	e.publishToPartitions(e.JS, good[half:], "", "b", half)
	dl := &failingDeadLetters{copied: map[uint64]int{}, reason: map[uint64]string{}}
	w := startFleet(t, e.JS, e.Subjects, "w", Options{Batch: 64, DeadLetter: dl, afterFold: func(c calls.Call) {
		if c.RunID == "boom" {
			panic("fold bug on run boom")
		}
	}})
	waitFleetCalls(t, w, int64(len(good)))
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	dl.mu.Lock()
	require.Len(t, dl.copied, 1, "only the panicking record is dead-lettered")
	require.Positive(t, dl.copied[ack.Sequence])
	require.Contains(t, dl.reason[ack.Sequence], "handler panic")
	dl.mu.Unlock()
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.Zero(t, runsOf(t, agg)["boom"], "the panicking record's call is undone")
	require.Equal(t, jstest.ReportOf(t, good), mergedTable(t, e.JS, e.Subjects), "the good records of the batch count")
}

// TestFleetDeadLettersListAndRedriveOnce: records the partition handler
// refused are listed with their (redacted) reasons; once the deployment
// is fixed (here: a larger record limit), re-driving the same dead letter
// twice (a crash between publish and delete) counts the call once and
// deletes it.
func TestFleetDeadLettersListAndRedriveOnce(t *testing.T) {
	e := newEnv(t)
	dead := deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})
	w := startFleet(t, e.JS, e.Subjects, "w", Options{DeadLetter: dead, MaxRecordBytes: 80})
	ctx := jstest.Ctx(t, 60*time.Second)
	subject := streams.TraceSubject(e.Subjects.Traces, tracemsg.PartitionOf("r1", e.Subjects.PartitionCount()))
	rec := `{"run_id":"r1","step":1,"decision":"allow","cost_microusd":7,"attributes":{"note":"longer than the limit"}}`
	_, err := e.JS.Publish(ctx, subject, []byte(rec), jetstream.WithMsgID("orig-1"))
	require.NoError(t, err)
	_, err = e.JS.Publish(ctx, streams.TraceSubject(e.Subjects.Traces, 0), []byte(`{"segment":"x.parquet"}`))
	require.NoError(t, err)
	var dls []deadletter.Message
	jstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		dls, err = deadletter.List(ctx, e.JS, e.Subjects, "")
		if err == nil && len(dls) != 2 {
			err = fmt.Errorf("%d dead letters", len(dls))
		}
		return err
	})
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	seg, err := deadletter.List(ctx, e.JS, e.Subjects, "malformed trace record")
	require.NoError(t, err)
	require.Len(t, seg, 1, "a segment reference is no trace message")
	require.Contains(t, seg[0].Reason, `unknown field "segment"`)
	big, err := deadletter.List(ctx, e.JS, e.Subjects, "oversized trace record")
	require.NoError(t, err)
	require.Len(t, big, 1)
	require.Equal(t, subject, big[0].Subject)
	none, err := deadletter.List(ctx, e.JS, e.Subjects, "no such text")
	require.NoError(t, err)
	require.Empty(t, none)

	// Fixed: re-drive to a worker with the default limit.
	w2 := startFleet(t, e.JS, e.Subjects, "w2", Options{DeadLetter: dead})
	n, err := deadletter.Redrive(ctx, e.JS, e.Subjects, append(big, big...))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	waitFleetCalls(t, w2, 1)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w2.stop(t)
	left, err := deadletter.List(ctx, e.JS, e.Subjects, "")
	require.NoError(t, err)
	require.Len(t, left, 1, "the re-driven dead letter is deleted")
	require.Contains(t, left[0].Reason, "malformed trace record")
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 1, runsOf(t, agg)["r1"], "re-driven twice, counted once")
	require.EqualValues(t, 1, agg.Calls())
}

// TestFleetRecordsWithoutIDsDedupeOnCanonicalBytes: records without a
// call_id or a message id, published to the bare subject (so each routed
// copy carries the routing's own message id), are deduplicated on their
// canonical bytes: the same record in another key order is one call.
func TestFleetRecordsWithoutIDsDedupeOnCanonicalBytes(t *testing.T) {
	e := newEnv(t)
	w := startFleet(t, e.JS, e.Subjects, "w", Options{Batch: 4})
	ctx := jstest.Ctx(t, 30*time.Second)
	for _, raw := range []string{
		`{"run_id":"r","step":1,"decision":"allow","cost_microusd":5}`,
		`{ "cost_microusd": 5, "decision": "allow", "step": 1, "run_id": "r" }`,
		`{"run_id":"r","step":1,"decision":"allow","cost_microusd":6}`,
	} {
		_, err := e.JS.Publish(ctx, e.Subjects.Traces, []byte(raw))
		require.NoError(t, err)
	}
	waitFleetCalls(t, w, 2)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 2, runsOf(t, agg)["r"])
	require.EqualValues(t, 2, agg.Calls())
}

// TestFleetCallIDsAreScopedByRun: two runs numbering their calls from 1
// are four calls; the same call again (same run and call_id, a new
// message) is still four.
func TestFleetCallIDsAreScopedByRun(t *testing.T) {
	e := newEnv(t)
	w := startFleet(t, e.JS, e.Subjects, "w", Options{Batch: 8})
	ctx := jstest.Ctx(t, 30*time.Second)
	// Runs a and b share a partition (dedupe keys are per partition).
	n := e.Subjects.PartitionCount()
	b := ""
	for i := 0; b == ""; i++ {
		if id := fmt.Sprintf("b%d", i); tracemsg.PartitionOf(id, n) == tracemsg.PartitionOf("a", n) {
			b = id
		}
	}
	for _, raw := range []string{
		`{"call_id":"1","run_id":"a","step":1,"decision":"allow","cost_microusd":1}`,
		`{"call_id":"2","run_id":"a","step":2,"decision":"allow","cost_microusd":2}`,
		`{"call_id":"1","run_id":"` + b + `","step":1,"decision":"allow","cost_microusd":3}`,
		`{"call_id":"2","run_id":"` + b + `","step":2,"decision":"allow","cost_microusd":4}`,
		`{"call_id":"2","run_id":"` + b + `","step":2,"decision":"allow","cost_microusd":4}`,
	} {
		_, err := e.JS.Publish(ctx, e.Subjects.Traces, []byte(raw))
		require.NoError(t, err)
	}
	waitFleetCalls(t, w, 4)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 2, runsOf(t, agg)["a"])
	require.EqualValues(t, 2, runsOf(t, agg)[b])
}
