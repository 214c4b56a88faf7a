package fleet

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracemsg"
)

// TestBatchesCountEachRowOnceWhateverTheCut: the same directory replayed
// as batches cut three ways (so JetStream stores every replay: the message
// ids differ) counts every row once and gives exactly the direct
// reduction.
func TestBatchesCountEachRowOnceWhateverTheCut(t *testing.T) {
	dir, want := fleetDirN(t, 6000, 31, 5)
	e := newEnv(t)
	ctx := jstest.Ctx(t, 90*time.Second)
	w := startFleet(t, e.JS, e.Subjects, "w", Options{})
	for _, rows := range []int{0, 100, 37} {
		st, err := segpub.Publish(ctx, e.JS, e.Subjects.Traces, dir, segpub.Options{BatchRows: rows})
		require.NoError(t, err)
		require.Equal(t, 6000, st.Rows)
		if rows != 0 {
			require.Equal(t, 6000, st.New, "a new cut is new to JetStream")
		}
		waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	}
	w.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 6000, agg.Calls())
	require.JSONEq(t, string(want), string(mergedJSON(t, e.JS, e.Subjects)))
}

// encodeTestBatch returns a batch of cs as rows first, first+1, ... of a
// segment named name, for partition part of the env's partitions.
func encodeTestBatch(e *env, name string, part int, first uint64, cs []calls.Call) []byte {
	var b rowbatch.Builder
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	calltest.AppendCalls(&b, cs, first, runs, syms)
	h := rowbatch.Header{Digest: sha256.Sum256([]byte(name)), Segment: name, Parts: e.Subjects.PartitionCount(), Part: part}
	return b.Encode(nil, h, calls.AllFields, 0, b.Len(), runs, syms)
}

// TestABadBatchIsDeadLetteredWhole: a batch with one bad row (a negative
// cost, a run of another partition) is dead-lettered with its reason and
// none of its rows counts; the good rows sent again in a batch of their
// own count once.
func TestABadBatchIsDeadLetteredWhole(t *testing.T) {
	e := newEnv(t)
	dead := deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})
	sub, err := e.NC.SubscribeSync(e.Subjects.DeadLetter)
	require.NoError(t, err)
	defer sub.Unsubscribe()
	w := startFleet(t, e.JS, e.Subjects, "w", Options{DeadLetter: dead})
	ctx := jstest.Ctx(t, 60*time.Second)
	n := e.Subjects.PartitionCount()
	part := tracemsg.PartitionOf("r1", n)
	other := "r2"
	for i := 0; tracemsg.PartitionOf(other, n) == part; i++ {
		other = fmt.Sprintf("r2-%d", i)
	}
	good := []calls.Call{
		{RunID: "r1", HasRunID: true, Decision: "allow", CostMicroUSD: 5, Step: 1, HasStep: true},
		{RunID: "r1", HasRunID: true, Decision: "allow", CostMicroUSD: 7, Step: 2, HasStep: true, Outcome: "case_resolved"},
	}
	negative := append(append([]calls.Call{}, good...), calls.Call{RunID: "r1", HasRunID: true, Decision: "allow", CostMicroUSD: -3})
	misrouted := append(append([]calls.Call{}, good...), calls.Call{RunID: other, HasRunID: true, Decision: "allow", CostMicroUSD: 1})
	subject := streams.TraceSubject(e.Subjects.Traces, part)
	for _, tc := range []struct {
		cs     []calls.Call
		reason string
	}{{negative, "is negative"}, {misrouted, "is in partition"}} {
		_, err := e.JS.Publish(ctx, subject, encodeTestBatch(e, "seg-a", part, 0, tc.cs))
		require.NoError(t, err)
		m, err := sub.NextMsg(10 * time.Second)
		require.NoError(t, err)
		require.Contains(t, m.Header.Get(producer.HeaderDeadReason), tc.reason)
	}
	// A batch for another partition count, on the bare subject: the
	// router refuses it.
	bad := encodeTestBatch(e, "seg-b", 0, 0, good)
	bad[len(rowbatch.Magic)+1+32+1+len("seg-b")]++ // the partition count
	_, err = e.JS.Publish(ctx, e.Subjects.Traces, bad)
	require.NoError(t, err)
	m, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(producer.HeaderDeadReason), "row batch for another partition count")

	// The good rows, as published twice (the second a redelivery in all
	// but name), count once.
	for range 2 {
		_, err := e.JS.Publish(ctx, subject, encodeTestBatch(e, "seg-a", part, 0, good))
		require.NoError(t, err)
	}
	waitFleetCalls(t, w, 2)
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	w.stop(t)
	agg, err := ReadAggregate(ctx, e.JS, e.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 2, agg.Calls())
	require.EqualValues(t, 2, runsOf(t, agg)["r1"])
}
