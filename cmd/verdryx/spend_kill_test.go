package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// envSpendHelper carries the serve arguments (JSON) of the worker process
// TestEvalRequestSpendSurvivesKill starts and kills.
const envSpendHelper = "VERDRYX_SPEND_KILL_HELPER"

// TestSpendKillHelper is the worker process of
// TestEvalRequestSpendSurvivesKill: serve until killed.
func TestSpendKillHelper(t *testing.T) {
	raw := os.Getenv(envSpendHelper)
	if raw == "" {
		t.Skip("helper process of TestEvalRequestSpendSurvivesKill")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), args, os.Stdout, os.Stderr)
	t.Fatalf("serve ended before it was killed: %v", err)
}

// heldChat is an OpenAI-compatible endpoint counting every call it sees,
// at 10 input and 2 output tokens each; with hold > 0, the calls past the
// hold-th are held unanswered until their client goes away.
type heldChat struct {
	calls atomic.Int64
	hold  atomic.Int64
}

func (f *heldChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.calls.Add(1)
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if h := f.hold.Load(); h > 0 && n > h {
		<-r.Context().Done()
		return
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	fmt.Fprintf(w, `{"choices":[{"message":{"content":%q}}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`, strings.Replace(prompt, "q-", "a-", 1))
}

// TestEvalRequestSpendSurvivesKill is issue 56's "a request's spend
// survives a crash": a worker process grading a capped request (40 cases,
// $0.02 a call, max_cost_usd 0.5 under --max-cost-usd 1) is killed with
// SIGKILL while the endpoint holds the calls in flight after its 12th
// answer; restarted on the same NATS and --data, it resumes the request
// (the eval consumer is dropped first, so the redelivery comes at once
// rather than after its 30 s AckWait). The endpoint sees exactly the calls
// the stored run counts as paid, its total is within the cap, the run's
// spent_usd is that total to the call, the cases answered before the kill
// are kept, and the cases whose calls were in flight are unmeasured with
// reason lost_in_crash and their cost.
func TestEvalRequestSpendSurvivesKill(t *testing.T) {
	cleanEvalEnv(t)
	const (
		cases     = 40
		answered  = 12    // calls answered before the kill
		inFlight  = 4     // the worker grades 4 cases at once (evalrun's default)
		callMicro = 20000 // 10 input tokens at $2000/Mtok
		capMicro  = 500000
	)
	fake := &heldChat{}
	fake.hold.Store(answered)
	srv := httptest.NewServer(fake)
	defer srv.Close()

	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	numberedSet(t, root, "set.json", cases, nil)
	prices := filepath.Join(root, "prices.json")
	require.NoError(t, os.WriteFile(prices, []byte(`{"openai:fake-chat":{"input_usd_per_mtok":2000,"output_usd_per_mtok":0}}`), 0o644))
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	data := filepath.Join(dir, "data")
	args, err := json.Marshal([]string{"serve", "--nats", ns.ClientURL(), "--data", data, "--http", "", "--rag-corpus", "",
		"--root", root, "--allow-model", "openai:fake-chat", "--openai-base-url", srv.URL + "/v1",
		"--prices", prices, "--max-cost-usd", "1.0", "--log-level", "info"})
	require.NoError(t, err)

	var logs syncBuf
	start := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpendKillHelper$")
		cmd.Env = append(os.Environ(), envSpendHelper+"="+string(args), "OPENAI_API_KEY=sk-test")
		cmd.Stdout, cmd.Stderr = &logs, &logs
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited; exited <- nil })
		return cmd, exited
	}
	kill := func(cmd *exec.Cmd, exited chan error) {
		require.NoError(t, cmd.Process.Kill()) // SIGKILL
		err := <-exited
		exited <- err // for the cleanup
	}

	ctx := jstest.Ctx(t, 3*time.Minute)
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subjects := streams.DefaultSubjects()
	_, _, err = streams.EnsureStreams(ctx, js, subjects, 0)
	require.NoError(t, err)
	replies, err := nc.SubscribeSync("verdryx.reply.spend-kill")
	require.NoError(t, err)
	body, err := json.Marshal(evalreq.Request{RequestID: "r-spend-kill", EvalSetPath: "set.json", Model: "openai:fake-chat",
		MaxCostUSD: 0.5, ReplyTo: "verdryx.reply.spend-kill"})
	require.NoError(t, err)

	cmd, exited := start()
	_, err = js.Publish(ctx, subjects.EvalRequests, body)
	require.NoError(t, err)
	jstest.CheckFor(t, 90*time.Second, 20*time.Millisecond, func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("the worker exited: %v\n%s", err, logs.String())
		default:
		}
		if n := fake.calls.Load(); n < answered+inFlight {
			return fmt.Errorf("the endpoint saw %d calls, want %d answered and %d held", n, answered, inFlight)
		}
		return nil
	})
	kill(cmd, exited)
	seenBeforeKill := fake.calls.Load()
	require.EqualValues(t, answered+inFlight, seenBeforeKill)

	require.NoError(t, js.DeleteConsumer(ctx, subjects.EvalStream, streams.EvalConsumer))
	fake.hold.Store(0)
	cmd, exited = start()
	msg, err := replies.NextMsg(2 * time.Minute)
	require.NoError(t, err, "no reply after the restart; worker log:\n%s", logs.String())
	kill(cmd, exited)

	var rep evalreq.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &rep))
	require.True(t, rep.OK, rep.Error)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal(rep.Result, &res))
	run := res.Run.Run
	cl := run.Provenance.CostLimit
	require.NotNil(t, cl, "the run records its cap")

	calls := fake.calls.Load()
	assert.EqualValues(t, calls, cl.PaidCalls, "every call the endpoint saw is a paid call of the run")
	assert.LessOrEqual(t, calls*callMicro, int64(capMicro), "the endpoint was paid at most the cap across both attempts")
	assert.EqualValues(t, calls*callMicro, int64(math.Round(cl.SpentUSD*1e6)), "the run's spend is the endpoint's, to the call")
	assert.InDelta(t, cl.SpentUSD, res.Run.TotalCostUSD, 1e-9, "the cases carry the spend")

	var graded, lost, limited int
	for i, s := range run.Scores {
		switch {
		case s.Graded():
			graded++
			assert.Equal(t, 1.0, s.Value, s.CaseID)
		case s.Reason == "lost_in_crash":
			lost++
			assert.InDelta(t, 0.02, s.CostUSD, 1e-12, "a lost case's call is counted: %s", s.CaseID)
			assert.Less(t, i, answered+inFlight, "only a case in flight at the kill is lost: %s", s.CaseID)
		case s.Reason == "cost_limit":
			limited++
		default:
			t.Errorf("case %s unmeasured: %s (%s)", s.CaseID, s.Unmeasured, s.Reason)
		}
	}
	t.Logf("endpoint: %d calls ($%.2f), %d before the kill; run: %d paid calls, spent $%.6f, %d graded, %d lost_in_crash, %d cost_limit",
		calls, float64(calls*callMicro)/1e6, seenBeforeKill, cl.PaidCalls, cl.SpentUSD, graded, lost, limited)
	assert.Equal(t, inFlight, lost, "the cases whose calls were in flight at the kill")
	assert.EqualValues(t, calls-int64(lost), graded, "every other paid call graded its case once")
	assert.Equal(t, cases, graded+lost+limited)

	st := jstest.OpenStore(t, filepath.Join(data, "verdryx.db"))
	stored, err := st.Run(context.Background(), run.ID)
	require.NoError(t, err)
	require.NotNil(t, stored.Provenance.CostLimit)
	assert.Equal(t, *cl, *stored.Provenance.CostLimit, "the stored run says what the reply says")
}
