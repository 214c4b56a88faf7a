package fleet

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// inlineSet is an inline eval set with one rag case naming corpus and
// golden as given.
func inlineSet(corpus, golden string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"id": "inline", "corpus": corpus,
		"cases": []map[string]string{{"id": "c1", "grader": "rag", "golden": golden}},
	})
	return b
}

// TestBadMessagesAreDeadLetteredAndTheNextIsProcessed publishes each
// message that crossed the trust boundary to a running worker (the eval
// consumer and the trace fleet): each is dead-lettered with its reason, the
// good message after it is processed, and no byte of a file outside the
// roots reaches a reply, a dead letter or a store. Records on the bare
// subject are dead-lettered by the router; a segment reference (no trace
// message: the worker opens no file a message names) and a sum that would
// overflow, on a partition, by the partition handler.
func TestBadMessagesAreDeadLetteredAndTheNextIsProcessed(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	fifo := filepath.Join(root, "corpus.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	outside := t.TempDir()
	const marker = "OUTSIDE-THE-ROOTS-MARKER"
	require.NoError(t, os.WriteFile(filepath.Join(outside, "golden.json"), []byte(`{"id":"`+marker+`","cases":[]}`), 0o600))
	// A symlink inside a root that leads out of it.
	require.NoError(t, os.Symlink(filepath.Join(outside, "golden.json"), filepath.Join(root, "escape.json")))
	outsideFIFO := filepath.Join(outside, "golden.fifo")
	require.NoError(t, syscall.Mkfifo(outsideFIFO, 0o600))

	roots := append(testdataRoot(t), root)
	st := jstest.OpenStore(t, filepath.Join(e.Dir, "v.db"))
	dead := deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})
	evalH := evalreq.NewHandler(st, evalrun.Deps{Store: st, Version: "test"}, e.NC, evalreq.Options{Roots: roots, Logger: jstest.Logger(t)})
	jstest.RunPuller(t, e.Eval, evalH, pull.Options{Name: "eval", Batch: 1, DeadLetter: dead, Logger: jstest.Logger(t)})
	fleet := startFleet(t, e.JS, e.Subjects, "w", Options{DeadLetter: dead})
	segSubject := streams.TraceSubject(e.Subjects.Traces, 0)

	deadSub, err := e.NC.SubscribeSync(e.Subjects.DeadLetter)
	require.NoError(t, err)
	defer deadSub.Unsubscribe()
	tracesSub, err := e.NC.SubscribeSync(e.Subjects.Traces)
	require.NoError(t, err)
	defer tracesSub.Unsubscribe()
	inbox := nats.NewInbox()
	replies, err := e.NC.SubscribeSync(inbox)
	require.NoError(t, err)
	defer replies.Unsubscribe()

	seen := []string{}
	copies := map[string]bool{} // dead-letter message ids seen
	// nextDead returns the next dead letter not seen before: a partition
	// handler may copy a record again (in a catch-up), which the
	// dead-letter stream drops by its message id but a subscriber sees.
	nextDead := func(timeout time.Duration) (*nats.Msg, error) {
		for {
			m, err := deadSub.NextMsg(timeout)
			if err != nil {
				return nil, err
			}
			if id := m.Header.Get(nats.MsgIdHdr); id == "" || !copies[id] {
				copies[id] = true
				return m, nil
			}
		}
	}
	expectDead := func(what, reason string) {
		t.Helper()
		m, err := nextDead(20 * time.Second)
		require.NoError(t, err, what)
		got := m.Header.Get(producer.HeaderDeadReason)
		require.Contains(t, got, reason, what)
		require.NotContains(t, got, marker, what)
		require.NotContains(t, got, "root:", what)
		seen = append(seen, got)
	}
	publish := func(subject string, data []byte) {
		t.Helper()
		_, err := e.JS.Publish(jstest.Ctx(t, 5*time.Second), subject, data)
		require.NoError(t, err)
	}
	evalReq := func(req map[string]any) []byte {
		if _, ok := req["reply_to"]; !ok {
			req["reply_to"] = inbox
		}
		b, err := json.Marshal(req)
		require.NoError(t, err)
		return b
	}
	golden := "grimoire/golden.json#numeric-source-verdigris-dose"

	bad := []struct {
		name, subject string
		data          []byte
		reason        string
	}{
		{"inline corpus /etc/passwd", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b1", "eval_set": inlineSet("/etc/passwd", golden)}), "outside the allowed roots"},
		{"inline golden outside the roots", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b2", "eval_set": inlineSet("grimoire/corpus.json", filepath.Join(outside, "golden.json")+"#x")}), "outside the allowed roots"},
		{"golden through a symlink out of a root", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b3", "eval_set": inlineSet("grimoire/corpus.json", "escape.json#x")}), "outside the allowed roots"},
		{"golden FIFO outside the roots", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b4", "eval_set": inlineSet("grimoire/corpus.json", outsideFIFO+"#x")}), "outside the allowed roots"},
		{"corpus FIFO inside a root", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b5", "eval_set": inlineSet("corpus.fifo", golden)}), "not a regular file (FIFO)"},
		{"eval set path is a directory", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b6", "eval_set_path": "grimoire"}), "not a regular file (directory)"},
		{"reply_to a stream subject", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b7", "eval_set_path": "grimoire/evalset.json", "reply_to": e.Subjects.Traces}), "reply_to refused"},
		{"reply_to outside the reply prefixes", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b8", "eval_set_path": "grimoire/evalset.json", "reply_to": "orders.new"}), "matches none of the reply subjects"},
		{"agent_id not canonical", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b9", "eval_set_path": "grimoire/evalset.json", "agent_id": "Not An Agent"}), `field agent_id: "Not An Agent"`},
		{"eval request with an unknown field", e.Subjects.EvalRequests,
			evalReq(map[string]any{"request_id": "b10", "eval_set_path": "grimoire/evalset.json", "modle": "stub"}), `unknown field "modle"`},
		{"eval request with trailing data", e.Subjects.EvalRequests,
			append(evalReq(map[string]any{"request_id": "b11", "eval_set_path": "grimoire/evalset.json"}), []byte(` {"x":1}`)...), "trailing data"},
		{"record with a misspelled field", e.Subjects.Traces,
			[]byte(`{"run_id":"r1","step":1,"decision":"allow","cost_micro_usd":5}`), `unknown field "cost_micro_usd"`},
		{"record with trailing garbage", e.Subjects.Traces,
			[]byte(`{"run_id":"r1","step":2,"decision":"allow","cost_microusd":5} garbage`), "trailing data"},
		{"segment reference", segSubject,
			[]byte(`{"segment":"/etc/passwd"}`), `unknown field "segment"`},
	}
	for _, b := range bad {
		publish(b.subject, b.data)
		expectDead(b.name, b.reason)
	}

	// A call costing more than the per-call maximum is refused naming the
	// field, so no sum of accepted calls can come near int64's end.
	big := calls.Call{RunID: "big", HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: math.MaxInt64}
	bb := calltest.RecordJSON(big)
	publish(e.Subjects.Traces, bb)
	expectDead("a call over the per-call maximum", "field cost_microusd: 9223372036854775807 is over the per-call maximum")

	// The good messages after all of that are processed.
	good := calls.Call{RunID: "r2", HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: 0,
		AgentID: "agent://acme.example/grimoire-bot"}
	b := calltest.RecordJSON(good)
	publish(e.Subjects.Traces, b)
	waitFleetCalls(t, fleet, 1)
	publish(e.Subjects.EvalRequests, evalReq(map[string]any{"request_id": "good", "eval_set": inlineSet("grimoire/corpus.json", golden),
		"agent_id": "agent://acme.example/grimoire-bot"}))
	var rep evalreq.Reply
	for rep.RequestID != "good" {
		m, err := replies.NextMsg(30 * time.Second)
		require.NoError(t, err)
		require.NotContains(t, string(m.Data), marker)
		require.NotContains(t, string(m.Data), "root:")
		require.NoError(t, json.Unmarshal(m.Data, &rep))
	}
	require.True(t, rep.OK, rep.Error)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal(rep.Result, &res))
	require.Equal(t, 1, res.Run.GradedN, "the inline set's corpus and golden resolve under the roots")

	// Nothing was published to the traces subject but what the test sent
	// (the reply to verdryx.traces was refused).
	n := 0
	for {
		if _, err := tracesSub.NextMsg(200 * time.Millisecond); err != nil {
			break
		}
		n++
	}
	require.Equal(t, 4, n, "2 bad records, 1 over-maximum call and 1 good record: only what the test published")
	_, err = nextDead(100 * time.Millisecond)
	require.Error(t, err, "no further dead letters: %s", strings.Join(seen, "\n"))
	for _, path := range []string{st.Path()} {
		db, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NotContains(t, string(db), marker)
		require.NotContains(t, string(db), "root:x:0")
	}
}

func testdataRoot(t *testing.T) confine.Roots {
	t.Helper()
	abs, err := filepath.Abs("../testdata")
	require.NoError(t, err)
	return confine.Roots{abs}
}

// TestPointerOfAnotherBuildIsRefused: a partition pointer with a field
// this build does not know is refused naming it and the partition, not
// read in part; this build's own pointer reads back whole.
func TestPointerOfAnotherBuildIsRefused(t *testing.T) {
	want := partPointer{Partition: 3, Partitions: 8, LastSeq: 42, Writer: "w1", Runs: 5, Keys: 9,
		Snapshot: blobRef{Prefix: "snap.3.1", Chunks: 1, SHA256: "ab", Size: 10}, Written: time.Unix(1700000000, 0).UTC()}
	b, err := json.Marshal(want)
	require.NoError(t, err)
	got, err := decodePointer(3, b)
	require.NoError(t, err)
	require.Equal(t, want, got)
	other := append(bytes.TrimSuffix(b, []byte("}")), []byte(`,"generation":2}`)...)
	_, err = decodePointer(3, other)
	require.ErrorContains(t, err, "partition 3 pointer")
	require.ErrorContains(t, err, `unknown field "generation"`)
}
