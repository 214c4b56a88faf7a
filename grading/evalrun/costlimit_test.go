package evalrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
)

// paidServer is a fake provider speaking the OpenAI or Anthropic wire
// format that answers every call with text and 1,000 input tokens, and
// counts the calls that reach it.
func paidServer(t *testing.T, wire, text string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		q, _ := json.Marshal(text)
		switch wire {
		case "openai":
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":"acme","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":0,"total_tokens":1000}}`, q)
		default:
			fmt.Fprintf(w, `{"id":"msg_01","type":"message","role":"assistant","model":"acme-claude","content":[{"type":"text","text":%s}],"stop_reason":"end_turn","usage":{"input_tokens":1000,"output_tokens":0}}`, q)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// twoCentBook prices both fake models at $0.02 a call (1,000 input tokens
// at $20 per million).
func twoCentBook() llm.PriceBook {
	b := llm.DefaultPriceBook()
	b["openai:acme"] = llm.Price{InputPerMTok: 20}
	b["anthropic:acme-claude"] = llm.Price{InputPerMTok: 20}
	return b
}

func cappedDeps(openaiURL, anthropicURL string, conc int) evalrun.Deps {
	return evalrun.Deps{
		Models: llm.Models(llm.ModelsOptions{OpenAIBaseURL: openaiURL, AnthropicBaseURL: anthropicURL,
			Getenv: func(string) string { return "test-key-123456" }}),
		Prices: twoCentBook(), Concurrency: conc, Version: "test",
	}
}

func exactSet(n int) json.RawMessage {
	var cases []string
	for i := range n {
		cases = append(cases, fmt.Sprintf(`{"id":"c%02d","prompt":"q%d","expected":"yes"}`, i, i))
	}
	return json.RawMessage(`{"id":"capped","cases":[` + strings.Join(cases, ",") + `]}`)
}

func TestCostLimitStopsModelCalls(t *testing.T) {
	for _, wire := range []string{"openai", "anthropic"} {
		t.Run(wire, func(t *testing.T) {
			srv, hits := paidServer(t, wire, "yes")
			model := "openai:acme"
			if wire == "anthropic" {
				model = "anthropic:acme-claude"
			}
			st := openStore(t)
			deps := cappedDeps(srv.URL, srv.URL, 1)
			deps.Store = st
			res, err := evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSet: exactSet(10), Model: model, MaxCostUSD: 0.05})
			require.NoError(t, err)
			// One case at a time: the third call brings the spend to $0.06,
			// no fourth call is made.
			assert.Equal(t, int32(3), hits.Load())
			run := res.Run
			assert.Equal(t, 3, run.GradedN)
			for _, s := range run.Scores[3:] {
				assert.Equal(t, llm.ReasonCostLimit, s.Unmeasured, s.CaseID)
			}
			assert.InDelta(t, 0.06, run.TotalCostUSD, 1e-9)
			assert.Equal(t, 0.05, run.CostLimitUSD)
			assert.Equal(t, "c03", run.StoppedAtCase)
			assert.Equal(t, 7, run.CostLimited)
			cl := run.Provenance.CostLimit
			require.NotNil(t, cl)
			assert.InDelta(t, 0.06, cl.SpentUSD, 1e-9)
			assert.Equal(t, 3, cl.PaidCalls)
			assert.Equal(t, 7, cl.RefusedCalls)

			// The run is stored and says so.
			require.True(t, res.Saved)
			stored, err := st.Run(context.Background(), run.ID)
			require.NoError(t, err)
			require.NotNil(t, stored.Provenance.CostLimit)
			assert.Equal(t, "c03", stored.Provenance.CostLimit.StoppedAtCase)
			assert.Equal(t, "c03", grading.Summarize(stored).StoppedAtCase)
		})
	}
}

func TestCostLimitBoundUnderConcurrency(t *testing.T) {
	srv, hits := paidServer(t, "openai", "yes")
	const conc = 4
	res, err := evalrun.Execute(context.Background(), cappedDeps(srv.URL, "", conc), evalrun.Request{EvalSet: exactSet(20), Model: "openai:acme", MaxCostUSD: 0.05})
	require.NoError(t, err)
	n := int(hits.Load())
	// At least the three calls that reach the cap; at most those plus the
	// calls already in flight when the third returned (conc-1).
	assert.GreaterOrEqual(t, n, 3)
	assert.LessOrEqual(t, n, 3+conc-1)
	assert.Equal(t, n, res.Run.GradedN)
	assert.Equal(t, 20-n, res.Run.CostLimited)
}

func TestCostLimitCountsJudgeCalls(t *testing.T) {
	srv, hits := paidServer(t, "openai", "0.9")
	deps := cappedDeps(srv.URL, "", 1)
	judge, err := deps.Models("openai:acme")
	require.NoError(t, err)
	deps.Judge = &grader.Judge{Model: judge, Prices: deps.Prices}
	var cases []string
	for i := range 6 {
		cases = append(cases, fmt.Sprintf(`{"id":"j%d","prompt":"p%d","grader":"llm_judge","rubric":"says hello"}`, i, i))
	}
	set := json.RawMessage(`{"id":"judged","cases":[` + strings.Join(cases, ",") + `]}`)
	res, err := evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSet: set, MaxCostUSD: 0.05})
	require.NoError(t, err)
	assert.Equal(t, int32(3), hits.Load(), "the stub model is free; the paid judge stops at the cap")
	assert.Equal(t, 3, res.Run.GradedN)
	assert.Equal(t, "j3", res.Run.StoppedAtCase)
}

func TestCostLimitRefusesUnpricedModelsAndBadCaps(t *testing.T) {
	srv, hits := paidServer(t, "openai", "yes")
	deps := cappedDeps(srv.URL, "", 1)
	_, err := evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSet: exactSet(2), Model: "openai:unlisted-model", MaxCostUSD: 1})
	require.ErrorIs(t, err, grading.ErrBadRequest)
	assert.Contains(t, err.Error(), "openai:unlisted-model has no price")
	_, err = evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSet: exactSet(2), Model: "openai:acme", MaxCostUSD: -1})
	require.ErrorIs(t, err, grading.ErrBadRequest)
	assert.Zero(t, hits.Load())

	// Uncapped, an unpriced model is graded and reported unpriced.
	res, err := evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSet: exactSet(2), Model: "openai:unlisted-model"})
	require.NoError(t, err)
	assert.Equal(t, []string{"openai:unlisted-model"}, res.Run.Unpriced)
	assert.Zero(t, res.Run.CostLimitUSD)
	assert.Nil(t, res.Run.Provenance.CostLimit)
}

func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }
