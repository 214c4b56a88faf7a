package evalreq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/lease"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// evalWorker is one eval consumer with its own store and chain.
type evalWorker struct {
	st    *store.Store
	chain *producer.NATSChain
	h     *Handler
}

func newEvalWorker(t *testing.T, e *env, instance string, sink func(producer.Sink) producer.Sink) *evalWorker {
	t.Helper()
	st := jstest.OpenStore(t, filepath.Join(e.Dir, instance+".db"))
	chain, err := producer.NewNATSChain(jstest.Ctx(t, 10*time.Second), e.JS, e.Subjects.EventsStream, e.Subjects.Events+"."+instance, producer.ChainOptions{})
	require.NoError(t, err)
	var s producer.Sink = chain
	if sink != nil {
		s = sink(chain)
	}
	h := NewHandler(st, evalrun.Deps{Store: st, Events: s, Version: "test"}, e.NC, Options{Roots: testdataRoot(t), Logger: jstest.Logger(t)})
	return &evalWorker{st: st, chain: chain, h: h}
}

// crashBeforeAck runs the handler, then reports the first n deliveries as
// failed, as a worker killed after its work and before its ack.
type crashBeforeAck struct {
	inner   pull.BatchHandler
	n       int32
	crashes atomic.Int32
}

func (c *crashBeforeAck) HandleBatch(ctx context.Context, msgs []pull.Msg) []error {
	errs := c.inner.HandleBatch(ctx, msgs)
	if c.crashes.Add(1) <= c.n {
		for i := range errs {
			errs[i] = pull.Transient("simulated kill before ack", nil)
		}
	}
	return errs
}

// flakySink fails the appends numbered in fail (0-based), as a NATS outage
// in the middle of emitting a run's events.
type flakySink struct {
	inner producer.Sink
	fail  map[int]bool
	n     int
}

func (f *flakySink) Append(ctx context.Context, ev envelope.Event) (bool, error) {
	i := f.n
	f.n++
	if f.fail[i] {
		return false, errors.New("publish: nats: timeout")
	}
	return f.inner.Append(ctx, ev)
}

// requireOneRunAndOneEventSet checks the store holds exactly one run and
// the worker's chain subject exactly one verified set of events.
func requireOneRunAndOneEventSet(t *testing.T, e *env, w *evalWorker, events int) {
	t.Helper()
	runs, err := w.st.Runs(context.Background())
	require.NoError(t, err)
	require.Len(t, runs, 1, "one run per request id")
	stream, err := e.JS.Stream(context.Background(), e.Subjects.EventsStream)
	require.NoError(t, err)
	rep, err := envelope.Verify(readSubject(t, e, stream, w.chain.Subject()))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, events, rep.Events, "one event set")
	require.Equal(t, 1, rep.Heads)
}

func evalReq(id string) Request {
	return Request{RequestID: id, EvalSetPath: "grimoire/evalset.json", Model: "stub", AgentID: "agent://acme.example/grimoire-bot"}
}

func TestEvalCrashBetweenCommitAndAckRunsOnce(t *testing.T) {
	e := newEnv(t)
	w := newEvalWorker(t, e, "w", nil)
	crash := &crashBeforeAck{inner: w.h, n: 2}
	jstest.RunPuller(t, e.Eval, crash, pull.Options{Name: "eval", Batch: 1, NakDelay: time.Millisecond})
	rep := e.request(evalReq("req-crash"))
	require.True(t, rep.OK, rep.Error)
	jstest.WaitDrained(t, e.Eval)
	require.GreaterOrEqual(t, crash.crashes.Load(), int32(3), "the request was delivered again after each kill")
	requireOneRunAndOneEventSet(t, e, w, 8)
}

func TestEvalEmissionFailureResumesWhereItStopped(t *testing.T) {
	e := newEnv(t)
	var flaky *flakySink
	w := newEvalWorker(t, e, "w", func(s producer.Sink) producer.Sink {
		flaky = &flakySink{inner: s, fail: map[int]bool{3: true, 5: true}}
		return flaky
	})
	jstest.RunPuller(t, e.Eval, w.h, pull.Options{Name: "eval", Batch: 1, NakDelay: time.Millisecond})
	rep := e.request(evalReq("req-flaky"))
	require.True(t, rep.OK, rep.Error)
	jstest.WaitDrained(t, e.Eval)
	require.Equal(t, 10, flaky.n, "8 events and 2 failed tries: nothing emitted twice")
	requireOneRunAndOneEventSet(t, e, w, 8)
}

func TestEvalCrashAfterClaimKeepsTheRunID(t *testing.T) {
	e := newEnv(t)
	w := newEvalWorker(t, e, "w", nil)
	// An earlier worker recorded the request and died while grading.
	_, err := w.st.ClaimRequest(context.Background(), "req-claimed", "run-claimed-earlier", time.Now())
	require.NoError(t, err)
	jstest.RunPuller(t, e.Eval, w.h, pull.Options{Name: "eval", Batch: 1})
	rep := e.request(evalReq("req-claimed"))
	require.True(t, rep.OK, rep.Error)
	requireOneRunAndOneEventSet(t, e, w, 8)
	runs, err := w.st.Runs(context.Background())
	require.NoError(t, err)
	require.Equal(t, "run-claimed-earlier", runs[0].ID)
}

func TestEvalRefusalStoresNothing(t *testing.T) {
	e := newEnv(t)
	w := newEvalWorker(t, e, "w", nil)
	jstest.RunPuller(t, e.Eval, w.h, pull.Options{Name: "eval", Batch: 1,
		DeadLetter: deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})})
	req := evalReq("req-bad-baseline")
	req.BaselineID = "no-such-baseline"
	rep := e.request(req)
	require.False(t, rep.OK)
	require.Contains(t, rep.Error, "no-such-baseline")
	runs, err := w.st.Runs(context.Background())
	require.NoError(t, err)
	require.Empty(t, runs)
	_, seen, err := w.st.EvalRequestState(context.Background(), "req-bad-baseline")
	require.NoError(t, err)
	require.False(t, seen, "a refused request is not recorded")
	require.Zero(t, w.chain.Len())
}

// lossyJS stores every publish but reports the ones numbered in lose as
// failed, as when the PubAck is lost on the way back.
type lossyJS struct {
	jetstream.JetStream
	lose map[int]bool
	n    int
}

func (l *lossyJS) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := l.JetStream.Publish(ctx, subject, data, opts...)
	i := l.n
	l.n++
	if err == nil && l.lose[i] {
		return nil, errors.New("nats: timeout")
	}
	return ack, err
}

func TestLostPubAckKeepsTheChainVerifying(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 10*time.Second)
	subject := e.Subjects.Events + ".lossy"
	js := &lossyJS{JetStream: e.JS, lose: map[int]bool{1: true, 4: true}}
	chain, err := producer.NewNATSChain(ctx, js, e.Subjects.EventsStream, subject, producer.ChainOptions{})
	require.NoError(t, err)
	ev := func(i int) envelope.Event {
		return envelope.New(envelope.TypeQualityScore, "agent://acme.example/bot", "r", map[string]any{"case_id": fmt.Sprint(i)}, time.Unix(1, 0))
	}
	const n = 6
	failures := 0
	for i := 0; i < n; i++ {
		// The appends whose ack is lost report an error; the caller moves
		// on. They were stored, so the next event must link to them.
		if _, err := chain.Append(ctx, ev(i)); err != nil {
			failures++
		}
	}
	require.Equal(t, 2, failures)
	// An event emitted again (a retry of one whose ack was lost, or a
	// redelivered request) is dropped as a duplicate, and the chain goes on.
	published := chain.Len()
	for _, i := range []int{1, 2} {
		ok, err := chain.Append(ctx, ev(i))
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Equal(t, published, chain.Len(), "an event emitted again was published again")
	_, err = chain.Append(ctx, ev(n))
	require.NoError(t, err)
	stream, err := e.JS.Stream(ctx, e.Subjects.EventsStream)
	require.NoError(t, err)
	rep, err := envelope.Verify(readSubject(t, e, stream, subject))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, n+1, rep.Events)
	require.Equal(t, 1, rep.Heads)
}

func TestSecondWorkerWithTheSameInstanceIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 10*time.Second)
	a, err := lease.Acquire(ctx, e.JS, "host-1234", "hostA:/data/a", lease.Options{})
	require.NoError(t, err)
	t.Cleanup(a.Release)
	_, err = lease.Acquire(ctx, e.JS, "host-1234", "hostB:/data/b", lease.Options{})
	require.ErrorIs(t, err, lease.ErrInstanceInUse)
	require.Contains(t, err.Error(), "Options.Instance")
	// The same holder restarting after a crash takes its lease over.
	a2, err := lease.Acquire(ctx, e.JS, "host-1234", "hostA:/data/a", lease.Options{})
	require.NoError(t, err)
	// A released id is free for anyone.
	a2.Release()
	b, err := lease.Acquire(ctx, e.JS, "host-1234", "hostB:/data/b", lease.Options{})
	require.NoError(t, err)
	b.Release()
}

// startClaimingWorker runs one eval consumer like a serve instance: its
// own store and chain subject, its instance lease, and the shared claims.
func startClaimingWorker(t *testing.T, e *env, instance string) *evalWorker {
	t.Helper()
	ctx := jstest.Ctx(t, 10*time.Second)
	lease, err := lease.Acquire(ctx, e.JS, instance, "host:"+instance, lease.Options{})
	require.NoError(t, err)
	t.Cleanup(lease.Release)
	w := newEvalWorker(t, e, instance, nil)
	w.h.opts.Claims, err = NewClaims(ctx, e.JS, instance, 0, nil)
	require.NoError(t, err)
	jstest.RunPuller(t, e.Eval, w.h, pull.Options{Name: "eval", Batch: 1, NakDelay: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	return w
}

func TestSameRequestIDOnTwoWorkersRunsOnce(t *testing.T) {
	e := newEnv(t)
	a := startClaimingWorker(t, e, "a")
	b := startClaimingWorker(t, e, "b")
	// The same request id published several times, without a message id
	// (JetStream keeps every copy): the workers share them.
	var runIDs []string
	for i := 0; i < 4; i++ {
		rep := e.request(evalReq("dup-1"))
		require.True(t, rep.OK, rep.Error)
		var res evalrun.Result
		require.NoError(t, json.Unmarshal(rep.Result, &res))
		runIDs = append(runIDs, res.Run.ID)
	}
	jstest.WaitDrained(t, e.Eval)
	for _, id := range runIDs {
		require.Equal(t, runIDs[0], id, "every reply names the one run")
	}
	total := 0
	events := int64(0)
	for _, w := range []*evalWorker{a, b} {
		runs, err := w.st.Runs(context.Background())
		require.NoError(t, err)
		total += len(runs)
		events += w.chain.Len()
	}
	require.Equal(t, 1, total, "one run across both stores")
	require.EqualValues(t, 8, events, "one event set across both chains")
}

func TestClaimOfADeadWorkerIsTakenOver(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 10*time.Second)
	// Instance "gone" claimed the request and died (no lease).
	gone, err := NewClaims(ctx, e.JS, "gone", 0, nil)
	require.NoError(t, err)
	_, err = gone.Claim(ctx, "req-orphan", "run-orphan")
	require.NoError(t, err)
	w := startClaimingWorker(t, e, "alive")
	rep := e.request(evalReq("req-orphan"))
	require.True(t, rep.OK, rep.Error)
	runs, err := w.st.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "run-orphan", runs[0].ID, "the orphaned claim's run id is kept")
}

// TestTwoChainWritersCannotForkTheChain: two writers of one chain subject
// that bypass the lease append in turns and at once; every event is
// stored, and the subject still verifies as one chain with one head.
func TestTwoChainWritersCannotForkTheChain(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 30*time.Second)
	subject := e.Subjects.Events + ".shared"
	a, err := producer.NewNATSChain(ctx, e.JS, e.Subjects.EventsStream, subject, producer.ChainOptions{})
	require.NoError(t, err)
	b, err := producer.NewNATSChain(ctx, e.JS, e.Subjects.EventsStream, subject, producer.ChainOptions{})
	require.NoError(t, err)
	ev := func(w string, i int) envelope.Event {
		return envelope.New(envelope.TypeQualityScore, "agent://acme.example/bot", "r", map[string]any{"writer": w, "i": i}, time.Unix(1, 0))
	}
	const n = 20
	// In turns: each writer's view is stale at every append.
	for i := range n / 2 {
		_, err := a.Append(ctx, ev("a", i))
		require.NoError(t, err)
		_, err = b.Append(ctx, ev("b", i))
		require.NoError(t, err)
	}
	// At once.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, w := range []*producer.NATSChain{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 2 {
				if _, err := w.Append(ctx, ev(w.Subject()+fmt.Sprintf("%p", w), 100+i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	stream, err := e.JS.Stream(ctx, e.Subjects.EventsStream)
	require.NoError(t, err)
	rep, err := envelope.Verify(readSubject(t, e, stream, subject))
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep)
	require.Equal(t, 2*n, rep.Events)
	require.Equal(t, 1, rep.Heads)
}

// TestAnAnswerFromTheClaimKeepsTheWarning: a request another worker
// graded (every case unmeasured) and marked done is answered from the
// claim with the warning that worker's own reply carried.
func TestAnAnswerFromTheClaimKeepsTheWarning(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 10*time.Second)
	other, err := NewClaims(ctx, e.JS, "other", 0, nil)
	require.NoError(t, err)
	_, err = other.Claim(ctx, "req-warned", "run-warned")
	require.NoError(t, err)
	var res evalrun.Result
	res.Run.ID = "run-warned"
	res.Run.Scores = []grading.Score{{CaseID: "a", Unmeasured: "model m: down", Reason: grading.ReasonModelError}}
	want := warning(res)
	require.NotEmpty(t, want)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	require.NoError(t, other.Done(ctx, "req-warned", "run-warned", raw))

	startClaimingWorker(t, e, "w")
	rep := e.request(evalReq("req-warned"))
	require.True(t, rep.OK, rep.Error)
	require.True(t, rep.Replayed)
	require.Equal(t, want, rep.Warning)
}

// TestAnAnswerFromAClaimTooLargeToCarryNamesTheRun: a request another
// worker finished with a result over what a claim carries is answered by
// its run id, with a warning saying why, not dropped.
func TestAnAnswerFromAClaimTooLargeToCarryNamesTheRun(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 10*time.Second)
	other, err := NewClaims(ctx, e.JS, "other", 0, nil)
	require.NoError(t, err)
	_, err = other.Claim(ctx, "req-large", "run-large")
	require.NoError(t, err)
	raw := []byte(`{"run":{"id":"run-large","output":"` + strings.Repeat("x", maxClaimResult) + `"}}`)
	require.NoError(t, other.Done(ctx, "req-large", "run-large", raw))

	startClaimingWorker(t, e, "w")
	rep := e.request(evalReq("req-large"))
	require.True(t, rep.OK, rep.Error)
	require.True(t, rep.Replayed)
	require.JSONEq(t, `{"run_id":"run-large"}`, string(rep.Result))
	require.Contains(t, rep.Warning, "read run run-large from a store")
}
