package evalreq

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/testkit/jstest"
)

func testdataRoot(t *testing.T) confine.Roots {
	t.Helper()
	abs, err := filepath.Abs("../testdata")
	require.NoError(t, err)
	return confine.Roots{abs}
}

// startEvalWorker runs one eval consumer with its own store and its own
// chain subject, like one verdryx serve instance.
func startEvalWorker(t *testing.T, e *env, instance string) (*producer.NATSChain, func()) {
	t.Helper()
	st := jstest.OpenStore(t, filepath.Join(e.Dir, instance+".db"))
	ctx := jstest.Ctx(t, 10*time.Second)
	chain, err := producer.NewNATSChain(ctx, e.JS, e.Subjects.EventsStream, e.Subjects.Events+"."+instance, producer.ChainOptions{})
	require.NoError(t, err)
	h := NewHandler(st, evalrun.Deps{Store: st, Events: chain, Version: "test"}, e.NC, Options{Roots: testdataRoot(t), Logger: jstest.Logger(t)})
	stop := jstest.RunPuller(t, e.Eval, h, pull.Options{Name: "eval", Batch: 1, Logger: jstest.Logger(t), DeadLetter: deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})})
	return chain, stop
}

func (e *env) request(req Request) Reply {
	e.T.Helper()
	inbox := nats.NewInbox()
	sub, err := e.NC.SubscribeSync(inbox)
	require.NoError(e.T, err)
	defer sub.Unsubscribe()
	req.ReplyTo = inbox
	b, err := json.Marshal(req)
	require.NoError(e.T, err)
	_, err = e.JS.Publish(jstest.Ctx(e.T, 5*time.Second), e.Subjects.EvalRequests, b)
	require.NoError(e.T, err)
	m, err := sub.NextMsg(30 * time.Second)
	require.NoError(e.T, err)
	var rep Reply
	require.NoError(e.T, json.Unmarshal(m.Data, &rep))
	return rep
}

func TestEvalRequestReplyRoundTrip(t *testing.T) {
	e := newEnv(t)
	startEvalWorker(t, e, "one")
	rep := e.request(Request{RequestID: "req-1", EvalSetPath: "grimoire/evalset.json", Model: "stub", AgentID: "agent://acme.example/grimoire-bot"})
	require.True(t, rep.OK, rep.Error)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal(rep.Result, &res))
	require.Equal(t, 7, res.Run.Cases)
	require.Equal(t, 7, res.Run.GradedN)
	require.NotNil(t, res.Run.MeanScore)
	require.InDelta(t, 1.0, *res.Run.MeanScore, 1e-9, "all seven golden cases pass through the offline pipeline")

	// The same request id again is answered from the store, not re-run.
	again := e.request(Request{RequestID: "req-1", EvalSetPath: "grimoire/evalset.json", Model: "stub"})
	require.True(t, again.OK)
	require.True(t, again.Replayed)
	require.JSONEq(t, string(rep.Result), string(again.Result))

	// A path outside the roots is refused and never read.
	bad := e.request(Request{RequestID: "req-2", EvalSetPath: "/etc/passwd"})
	require.False(t, bad.OK)
	require.Contains(t, bad.Error, "outside the allowed roots")
	bad = e.request(Request{RequestID: "req-3", EvalSetPath: "../../etc/passwd"})
	require.False(t, bad.OK)
	bad = e.request(Request{EvalSetPath: "grimoire/evalset.json"})
	require.False(t, bad.OK)
	require.Contains(t, bad.Error, "request_id")
}

func TestTwoWorkersShareEvalRequestsAndEachChainVerifies(t *testing.T) {
	e := newEnv(t)
	chainA, _ := startEvalWorker(t, e, "a")
	chainB, _ := startEvalWorker(t, e, "b")
	const n = 6
	for i := 0; i < n; i++ {
		rep := e.request(Request{RequestID: fmt.Sprintf("req-%d", i), EvalSetPath: "grimoire/evalset.json", AgentID: "agent://acme.example/grimoire-bot"})
		require.True(t, rep.OK, rep.Error)
	}
	require.EqualValues(t, n*8, chainA.Len()+chainB.Len(), "one eval_run and seven quality_score events per request")

	stream, err := e.JS.Stream(context.Background(), e.Subjects.EventsStream)
	require.NoError(t, err)
	for _, c := range []*producer.NATSChain{chainA, chainB} {
		if c.Len() == 0 {
			continue
		}
		doc := readSubject(t, e, stream, c.Subject())
		rep, err := envelope.Verify(doc)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%s: %+v", c.Subject(), rep)
		require.Equal(t, 1, rep.Heads)
		require.EqualValues(t, c.Len(), rep.Events)
	}
}

type ndjson struct{ lines [][]byte }

func (n *ndjson) Read(p []byte) (int, error) {
	if len(n.lines) == 0 {
		return 0, io.EOF
	}
	k := copy(p, n.lines[0])
	n.lines[0] = n.lines[0][k:]
	if len(n.lines[0]) == 0 {
		n.lines = n.lines[1:]
	}
	return k, nil
}

// readSubject returns every message stored on subject as NDJSON.
func readSubject(t *testing.T, e *env, stream jetstream.Stream, subject string) *ndjson {
	t.Helper()
	ctx := jstest.Ctx(t, 10*time.Second)
	c, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	want := info.State.Subjects[subject]
	out := &ndjson{}
	for uint64(len(out.lines)) < want {
		batch, err := c.Fetch(int(want)-len(out.lines), jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			out.lines = append(out.lines, append(append([]byte{}, m.Data()...), '\n'))
		}
		require.NoError(t, batch.Error())
	}
	return out
}

func TestChainResumesFromLastMessageOnRestart(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 10*time.Second)
	subject := e.Subjects.Events + ".x"
	c1, err := producer.NewNATSChain(ctx, e.JS, e.Subjects.EventsStream, subject, producer.ChainOptions{})
	require.NoError(t, err)
	ev := func(i int) envelope.Event {
		return envelope.New(envelope.TypeEvalRun, "agent://acme.example/bot", "r", map[string]any{"cases": i}, time.Now())
	}
	for i := 0; i < 3; i++ {
		_, err := c1.Append(ctx, ev(i))
		require.NoError(t, err)
	}
	c2, err := producer.NewNATSChain(ctx, e.JS, e.Subjects.EventsStream, subject, producer.ChainOptions{})
	require.NoError(t, err)
	_, err = c2.Append(ctx, ev(3))
	require.NoError(t, err)
	stream, err := e.JS.Stream(ctx, e.Subjects.EventsStream)
	require.NoError(t, err)
	rep, err := envelope.Verify(readSubject(t, e, stream, subject))
	require.NoError(t, err)
	require.True(t, rep.OK())
	require.Equal(t, 1, rep.Heads, "the restarted chain continues, no second head")
	require.Equal(t, 3, rep.Chained)
}
