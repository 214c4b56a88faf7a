package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// modernc sqlite and the nats-server keep process-wide helpers.
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

type env struct {
	t        *testing.T
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects Subjects
	traces   jetstream.Consumer
	eval     jetstream.Consumer
	dir      string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	ns, err := StartEmbedded(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(func() {
		nc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	e := &env{t: t, nc: nc, js: js, subjects: DefaultSubjects(), dir: dir}
	ctx := testCtx(t, 10*time.Second)
	e.traces, e.eval, err = EnsureStreams(ctx, js, e.subjects, 0)
	require.NoError(t, err)
	return e
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// checkFor polls f until it returns nil or the deadline passes.
func checkFor(t *testing.T, total, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", total, err)
		}
		time.Sleep(every)
	}
}

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// runPuller runs a puller until the returned stop function is called.
func runPuller(t *testing.T, cons jetstream.Consumer, h pull.BatchHandler, opts pull.Options) (stop func()) {
	t.Helper()
	p, err := pull.New(cons, h, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return stop
}

// sampleCalls builds calls with every reduction rule in play: runs split
// over many steps out of order, blocked and wardryx rows, untagged runs,
// runs whose last tag is not their last call, and records without a run.
func sampleCalls() []calls.Call {
	var cl []calls.Call
	for run := 0; run < 40; run++ {
		steps := []uint32{2, 0, 3, 1}
		for _, s := range steps {
			c := calls.Call{TSMillis: int64(1000*run + int(s)), RunID: fmt.Sprintf("run-%02d", run), HasRunID: true, HasStep: true,
				Step: s, Model: "m", Decision: "allow", CostMicroUSD: int64(100*run + int(s)), AgentID: "agent://acme.example/bot"}
			switch {
			case run%5 == 0 && s == 1:
				c.Decision = "budget_exceeded"
			case run%7 == 0 && s == 2:
				c.Decision = "wardryx_deny"
			}
			switch {
			case run%4 == 0:
				// untagged
			case s == 1:
				c.Outcome = "escalated"
			case s == 2 && run%3 != 0:
				c.Outcome = "case_resolved"
			}
			cl = append(cl, c)
		}
	}
	// Equal steps are legitimate: a blocked call and its allowed retry
	// share a step, and the retry (read later, written later) carries the
	// outcome.
	for run := 0; run < 3; run++ {
		id := fmt.Sprintf("retry-%d", run)
		ts := int64(100_000 + 10*run)
		cl = append(cl,
			calls.Call{TSMillis: ts, RunID: id, HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: 50, Model: "m"},
			calls.Call{TSMillis: ts + 1, RunID: id, HasRunID: true, Step: 2, HasStep: true, Decision: "budget_exceeded", CostMicroUSD: 999, Model: "m", Outcome: "abandoned"},
			calls.Call{TSMillis: ts + 2, RunID: id, HasRunID: true, Step: 2, HasStep: true, Decision: "allow", CostMicroUSD: 300, Model: "m", Outcome: "case_resolved"})
	}
	for i := 0; i < 5; i++ {
		cl = append(cl, calls.Call{Decision: "allow", Outcome: "abandoned", CostMicroUSD: 77, Model: "m"})
	}
	return cl
}

func reportOf(t *testing.T, cl []calls.Call) string {
	t.Helper()
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	for _, c := range cl {
		r.Add(c)
	}
	var buf bytes.Buffer
	require.NoError(t, r.Report().WriteTable(&buf))
	return buf.String()
}

func storeReport(t *testing.T, st *store.Store) string {
	t.Helper()
	var cl []calls.Call
	require.NoError(t, st.EachCall(context.Background(), func(c calls.Call) error { cl = append(cl, c); return nil }))
	return reportOf(t, cl)
}

func (e *env) publishCalls(cl []calls.Call, idPrefix string) {
	e.t.Helper()
	ctx := testCtx(e.t, 10*time.Second)
	for i, c := range cl {
		b, err := json.Marshal(RecordOf(c))
		require.NoError(e.t, err)
		_, err = e.js.Publish(ctx, e.subjects.Traces, b, jetstream.WithMsgID(fmt.Sprintf("%s-%d", idPrefix, i)))
		require.NoError(e.t, err)
	}
}

// publishWithCallIDs publishes calls carrying call_id "<callPrefix>-<i>"
// under message ids "<msgPrefix>-<i>".
func (e *env) publishWithCallIDs(cl []calls.Call, callPrefix, msgPrefix string, offset int) {
	e.t.Helper()
	ctx := testCtx(e.t, 10*time.Second)
	for i, c := range cl {
		rec := RecordOf(c)
		rec.CallID = fmt.Sprintf("%s-%d", callPrefix, offset+i)
		b, err := json.Marshal(rec)
		require.NoError(e.t, err)
		_, err = e.js.Publish(ctx, e.subjects.Traces, b, jetstream.WithMsgID(fmt.Sprintf("%s-%d", msgPrefix, offset+i)))
		require.NoError(e.t, err)
	}
}

func storedCount(st *store.Store) func() (int64, error) {
	return func() (int64, error) { return st.CallCount(context.Background()) }
}

func waitStored(t *testing.T, st *store.Store, want int64) {
	t.Helper()
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		n, err := storedCount(st)()
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("stored %d calls, want %d", n, want)
		}
		return nil
	})
}

func TestTraceRecordsThroughNATSMatchDirectReduction(t *testing.T) {
	e := newEnv(t)
	st := openStore(t, filepath.Join(e.dir, "v.db"))
	cl := sampleCalls()
	want := reportOf(t, cl)

	runPuller(t, e.traces, NewTraceHandler(st, TraceOptions{}), pull.Options{Name: "traces", Batch: 16})
	e.publishCalls(cl, "a")
	waitStored(t, st, int64(len(cl)))
	require.Equal(t, want, storeReport(t, st))
	require.Contains(t, want, "case_resolved")
	require.Contains(t, want, "(untagged)")
}

// crashAfterCommit commits the batch through the real handler, then fails
// it as if the worker died before acking: every message is redelivered.
type crashAfterCommit struct {
	inner   pull.BatchHandler
	crashes atomic.Int32
}

func (c *crashAfterCommit) HandleBatch(ctx context.Context, msgs []pull.Msg) []error {
	errs := c.inner.HandleBatch(ctx, msgs)
	if c.crashes.Add(1) <= 3 {
		for i := range errs {
			errs[i] = pull.Transient("simulated crash before ack", nil)
		}
	}
	return errs
}

func TestRedeliveryAfterCrashAndDuplicateReplayDoNotDoubleCount(t *testing.T) {
	e := newEnv(t)
	dbPath := filepath.Join(e.dir, "v.db")
	st := openStore(t, dbPath)
	cl := sampleCalls()
	want := reportOf(t, cl)

	// First worker: commits, "crashes" before acking three batches, then
	// is stopped mid-stream.
	crashing := &crashAfterCommit{inner: NewTraceHandler(st, TraceOptions{})}
	stop := runPuller(t, e.traces, crashing, pull.Options{Name: "traces", Batch: 8, NakDelay: time.Millisecond})
	e.publishWithCallIDs(cl[:100], "call", "a", 0)
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		n, _ := st.CallCount(context.Background())
		if n < 50 || crashing.crashes.Load() <= 3 {
			return fmt.Errorf("only %d stored, %d batches", n, crashing.crashes.Load())
		}
		return nil
	})
	stop()

	// Restarted worker on the same durable consumer; the rest arrives, and
	// the whole set is published again under new message ids (a duplicate
	// replay that JetStream's own dedupe cannot catch: the call ids can).
	runPuller(t, e.traces, NewTraceHandler(st, TraceOptions{}), pull.Options{Name: "traces", Batch: 8})
	e.publishWithCallIDs(cl[100:], "call", "b", 100)
	e.publishWithCallIDs(cl, "call", "dup", 0)
	waitStored(t, st, int64(len(cl)))
	waitDrained(t, e.traces)
	require.Equal(t, want, storeReport(t, st), "exactly the direct reduction: nothing lost or doubled")
}

func TestEqualStepCallsBothCount(t *testing.T) {
	e := newEnv(t)
	st := openStore(t, filepath.Join(e.dir, "v.db"))
	var cl []calls.Call
	for _, c := range sampleCalls() {
		if strings.HasPrefix(c.RunID, "retry-") {
			cl = append(cl, c)
		}
	}
	require.Len(t, cl, 9)
	want := reportOf(t, cl)
	require.Contains(t, want, "case_resolved     3      9        3   0.001050")
	runPuller(t, e.traces, NewTraceHandler(st, TraceOptions{}), pull.Options{Name: "traces", Batch: 4})
	e.publishCalls(cl, "eq")
	waitStored(t, st, int64(len(cl)))
	waitDrained(t, e.traces)
	require.Equal(t, want, storeReport(t, st))
}

func TestRecordsWithoutIDsDedupeOnCanonicalBytes(t *testing.T) {
	e := newEnv(t)
	st := openStore(t, filepath.Join(e.dir, "v.db"))
	runPuller(t, e.traces, NewTraceHandler(st, TraceOptions{}), pull.Options{Name: "traces", Batch: 4})
	ctx := testCtx(t, 10*time.Second)
	// The same record twice (other key order and spacing), no message id:
	// one call. A different record: a second call.
	for _, raw := range []string{
		`{"run_id":"r","step":1,"decision":"allow","cost_microusd":5}`,
		`{ "cost_microusd": 5, "decision": "allow", "step": 1, "run_id": "r" }`,
		`{"run_id":"r","step":1,"decision":"allow","cost_microusd":6}`,
	} {
		_, err := e.js.Publish(ctx, e.subjects.Traces, []byte(raw))
		require.NoError(t, err)
	}
	waitStored(t, st, 2)
	waitDrained(t, e.traces)
	n, err := st.CallCount(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}

// waitDrained waits until the consumer has nothing pending or unacked.
// Callers first wait for what they know must be stored (a nak'ed message
// waiting out its delay may count as neither), so this only rules out
// extra work still in flight.
func waitDrained(t *testing.T, cons jetstream.Consumer) {
	t.Helper()
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		info, err := cons.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumPending+uint64(info.NumAckPending) > 0 {
			return fmt.Errorf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

func TestPoisonMessageIsDeadLetteredAndTheNextIsProcessed(t *testing.T) {
	e := newEnv(t)
	st := openStore(t, filepath.Join(e.dir, "v.db"))
	dead := PullDeadLetters(&producer.DeadLetterPublisher{JS: e.js, Subject: e.subjects.DeadLetter})
	runPuller(t, e.traces, NewTraceHandler(st, TraceOptions{}), pull.Options{Name: "traces", DeadLetter: dead})

	sub, err := e.nc.SubscribeSync(e.subjects.DeadLetter)
	require.NoError(t, err)
	defer sub.Unsubscribe()

	ctx := testCtx(t, 10*time.Second)
	_, err = e.js.Publish(ctx, e.subjects.Traces, []byte(`{"run_id": "r1", "step": "not a number"`))
	require.NoError(t, err)
	_, err = e.js.Publish(ctx, e.subjects.Traces, []byte(`{"run_id": "r1", "step": 1}`)) // no decision
	require.NoError(t, err)
	good := calls.Call{RunID: "r1", HasRunID: true, Step: 2, HasStep: true, Decision: "allow", CostMicroUSD: 5}
	b, _ := json.Marshal(RecordOf(good))
	_, err = e.js.Publish(ctx, e.subjects.Traces, b)
	require.NoError(t, err)

	m, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(producer.HeaderDeadReason), "malformed trace record")
	require.Equal(t, e.subjects.Traces, m.Header.Get(producer.HeaderDeadSubject))
	m, err = sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(producer.HeaderDeadReason), "field decision: missing")
	waitStored(t, st, 1)
}

func TestRootsRefuseEscapes(t *testing.T) {
	root := t.TempDir()
	r := Roots{root}
	_, err := r.Resolve("../../etc/passwd")
	require.Error(t, err)
	_, err = r.Resolve("/etc/passwd")
	require.ErrorIs(t, err, ErrOutsideRoots)
}
