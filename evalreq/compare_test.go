package evalreq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/lease"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// fakeChat is an OpenAI-compatible endpoint: model "good" answers "q-i"
// with "a-i", any other model "wrong". It counts calls per model and calls
// onCall (when set) before answering.
type fakeChat struct {
	mu     sync.Mutex
	calls  map[string]int
	onCall func(model string, n int)
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string                     `json:"model"`
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.calls[req.Model]++
	n := f.calls[req.Model]
	f.mu.Unlock()
	if f.onCall != nil {
		f.onCall(req.Model, n)
	}
	answer := "wrong"
	if req.Model == "good" {
		answer = strings.Replace(req.Messages[len(req.Messages)-1].Content, "q-", "a-", 1)
	}
	fmt.Fprintf(w, `{"choices":[{"message":{"content":%q}}],"usage":{"prompt_tokens":10,"completion_tokens":0}}`, answer)
}

func (f *fakeChat) count(model string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[model]
}

func (f *fakeChat) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func fakeModels(t *testing.T, f *fakeChat) func(string) (llm.Model, error) {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return llm.Models(llm.ModelsOptions{OpenAIBaseURL: srv.URL + "/v1", Timeout: 5 * time.Second,
		Getenv: func(k string) string { return map[string]string{"OPENAI_API_KEY": "sk-o"}[k] }})
}

func numbered(n int) json.RawMessage {
	var cs []string
	for i := range n {
		cs = append(cs, fmt.Sprintf(`{"id":"c%d","prompt":"q-%d","expected":"a-%d"}`, i, i, i))
	}
	return json.RawMessage(`{"id":"cmp-set","cases":[` + strings.Join(cs, ",") + `]}`)
}

// TestEvalRequestComparesModels: a request naming models grades the set
// once per model, stores each run tagged with the comparison id and
// replies with the comparison; a second request reuses the stored runs
// and makes no call. A model off the allow-list, model with models, one
// model or a repeated one refuse the whole request before any call.
func TestEvalRequestComparesModels(t *testing.T) {
	e := newEnv(t)
	chat := &fakeChat{calls: map[string]int{}}
	st := jstest.OpenStore(t, filepath.Join(e.Dir, "cmp.db"))
	ql := &recordingLog{}
	h := NewHandler(st, evalrun.Deps{Store: st, Version: "test"}, e.NC, Options{Roots: testdataRoot(t), Logger: jstest.Logger(t),
		Models: fakeModels(t, chat), Allowed: []string{"openai:good", "openai:bad"}, Quality: ql})
	jstest.RunPuller(t, e.Eval, h, pull.Options{Name: "eval", Batch: 1, Logger: jstest.Logger(t)})
	set := numbered(6)

	rep := e.request(Request{RequestID: "c-1", EvalSet: set, Models: []string{"openai:good", "openai:bad"}})
	require.True(t, rep.OK, rep.Error)
	var res evalrun.CompareResult
	require.NoError(t, json.Unmarshal(rep.Result, &res))
	c := res.Comparison
	require.NotEmpty(t, c.ComparisonID)
	assert.Len(t, res.GradedRuns, 2)
	assert.Empty(t, res.ReusedRuns)
	assert.Equal(t, "openai:good", c.Best)
	require.Len(t, c.Models, 2)
	assert.Equal(t, 6, chat.count("good"))
	assert.Equal(t, 6, chat.count("bad"))
	for _, id := range res.GradedRuns {
		run, err := st.Run(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, c.ComparisonID, run.ComparisonID, "each run tagged with the comparison id")
	}
	assert.ElementsMatch(t, res.GradedRuns, ql.runs(), "every graded run recorded on the quality log before the reply")
	rec, ok, err := st.EvalRequestState(context.Background(), "c-1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, store.RequestDone, rec.State)
	assert.Equal(t, c.ComparisonID, rec.RunID)

	again := e.request(Request{RequestID: "c-1", EvalSet: set, Models: []string{"openai:good", "openai:bad"}})
	require.True(t, again.OK)
	assert.True(t, again.Replayed)
	assert.JSONEq(t, string(rep.Result), string(again.Result))

	second := e.request(Request{RequestID: "c-2", EvalSet: set, Models: []string{"openai:bad", "openai:good"}})
	require.True(t, second.OK, second.Error)
	var res2 evalrun.CompareResult
	require.NoError(t, json.Unmarshal(second.Result, &res2))
	assert.ElementsMatch(t, res.GradedRuns, res2.ReusedRuns, "the stored runs are reused")
	assert.Equal(t, 12, chat.total(), "no call")

	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{RequestID: "x-1", EvalSet: set, Models: []string{"openai:good", "openai:other"}}, `field models[1]: "openai:other" is not allowed on this worker`},
		{Request{RequestID: "x-2", EvalSet: set, Model: "openai:good", Models: []string{"openai:good", "openai:bad"}}, "fields model and models: give one"},
		{Request{RequestID: "x-3", EvalSet: set, Models: []string{"openai:good"}}, "field models: want at least two models, have 1"},
		{Request{RequestID: "x-4", EvalSet: set, Models: []string{"openai:good", "openai:good"}}, `field models[1]: "openai:good" is named twice`},
		{Request{RequestID: "x-5", EvalSet: set, Models: []string{"openai:good", "openai:bad"}, BaselineID: "b"}, "field baseline_id: not with models"},
		{Request{RequestID: "x-6", EvalSet: set, Model: "openai:good", Fresh: true}, "field fresh: only with models"},
	} {
		rep := e.request(tc.req)
		require.False(t, rep.OK, tc.req.RequestID)
		assert.Contains(t, rep.Error, tc.want, tc.req.RequestID)
		_, seen, err := st.EvalRequestState(context.Background(), tc.req.RequestID)
		require.NoError(t, err)
		assert.False(t, seen, "%s: nothing recorded", tc.req.RequestID)
	}
	assert.Equal(t, 12, chat.total(), "a refused request makes no call")
}

// cancelOnce runs the handler under a context the test can cancel during
// the first delivery only: a worker dying mid-comparison.
type cancelOnce struct {
	inner  pull.BatchHandler
	mu     sync.Mutex
	cancel context.CancelFunc
	runs   int
}

func (c *cancelOnce) HandleBatch(ctx context.Context, msgs []pull.Msg) []error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	c.runs++
	if c.runs == 1 {
		c.cancel = cancel
	}
	c.mu.Unlock()
	return c.inner.HandleBatch(ctx, msgs)
}

func (c *cancelOnce) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
}

// TestEvalRequestComparisonCapHoldsAcrossARedelivery: a comparison under
// the worker's --max-cost-usd bound dies in the middle of its second
// model and is delivered again: the first model's stored run is kept
// (not graded again) and its spend counted, the second model resumes
// from its spend ledger, and every call of every attempt together costs
// no more than the bound.
func TestEvalRequestComparisonCapHoldsAcrossARedelivery(t *testing.T) {
	const n, perCall, bound = 6, 0.001, 0.009 // 10 input tokens at $100/Mtok
	e := newEnv(t)
	chat := &fakeChat{calls: map[string]int{}}
	ctx := jstest.Ctx(t, 10*time.Second)
	l, err := lease.Acquire(ctx, e.JS, "w", "host:w", lease.Options{})
	require.NoError(t, err)
	t.Cleanup(l.Release)
	claims, err := NewClaims(ctx, e.JS, "w", 0, nil)
	require.NoError(t, err)
	st := jstest.OpenStore(t, filepath.Join(e.Dir, "cap.db"))
	prices := llm.PriceBook{"openai:good": {InputPerMTok: 100}, "openai:bad": {InputPerMTok: 100}}
	h := NewHandler(st, evalrun.Deps{Store: st, Version: "test", Prices: prices, Concurrency: 1}, e.NC, Options{Roots: testdataRoot(t),
		Logger: jstest.Logger(t), Models: fakeModels(t, chat), Allowed: []string{"openai:good", "openai:bad"}, Claims: claims, MaxCostUSD: bound})
	dying := &cancelOnce{inner: h}
	chat.onCall = func(model string, k int) {
		if model == "bad" && k == 2 {
			dying.kill()
		}
	}
	jstest.RunPuller(t, e.Eval, dying, pull.Options{Name: "eval", Batch: 1, NakDelay: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})

	rep := e.request(Request{RequestID: "cap-1", EvalSet: numbered(n), Models: []string{"openai:good", "openai:bad"}, MaxCostUSD: 1})
	require.True(t, rep.OK, rep.Error)
	var res evalrun.CompareResult
	require.NoError(t, json.Unmarshal(rep.Result, &res))
	dying.mu.Lock()
	runs := dying.runs
	dying.mu.Unlock()
	require.GreaterOrEqual(t, runs, 2, "delivered again after the kill")
	assert.Equal(t, n, chat.count("good"), "the first model's stored run is not graded again")
	assert.Len(t, res.GradedRuns, 2)
	assert.Equal(t, bound, res.CostLimitUSD, "the worker's bound caps the request")
	assert.LessOrEqual(t, res.SpentUSD, bound+1e-9)
	assert.LessOrEqual(t, float64(chat.total())*perCall, bound+1e-9, "every attempt's calls together stay under the cap: %v", chat.calls)
}

// recordingLog is a QualityLog that notes the runs published on it.
type recordingLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *recordingLog) Publish(_ context.Context, kind, id string) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kind == store.KindRun {
		l.ids = append(l.ids, id)
	}
	return uint64(len(l.ids)), nil
}

func (l *recordingLog) CatchUp(context.Context, time.Duration) (uint64, error) { return 0, nil }

func (l *recordingLog) runs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}
