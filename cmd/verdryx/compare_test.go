package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading/compare"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/junit"
	"github.com/verdryx/verdryx/store"
)

// modelsChat is an OpenAI-compatible endpoint serving several models: a
// model answers the prompt "q-i" correctly ("a-i") when a uniform draw
// seeded by the model and the prompt is under its accuracy, "wrong"
// otherwise, so each model's answers are the same on every call. It
// counts the calls per model.
type modelsChat struct {
	accuracy map[string]float64 // by the model id the endpoint sees
	mu       sync.Mutex
	calls    map[string]int
}

// draw is the uniform number in [0, 1) of model and prompt.
func draw(model, prompt string) float64 {
	h := sha256.Sum256([]byte(model + "|" + prompt))
	return float64(binary.BigEndian.Uint64(h[:8])>>11) / (1 << 53)
}

func (m *modelsChat) correct(model, prompt string) bool {
	return draw(model, prompt) < m.accuracy[model]
}

func (m *modelsChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string                     `json:"model"`
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	if _, ok := m.accuracy[req.Model]; !ok {
		http.Error(w, `{"error":"no such model"}`, http.StatusNotFound)
		return
	}
	m.mu.Lock()
	m.calls[req.Model]++
	m.mu.Unlock()
	prompt := req.Messages[len(req.Messages)-1].Content
	answer := "wrong"
	if m.correct(req.Model, prompt) {
		answer = strings.Replace(prompt, "q-", "a-", 1)
	}
	fmt.Fprintf(w, `{"choices":[{"message":{"content":%q}}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`, answer)
}

func (m *modelsChat) callCounts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.calls {
		out[k] = v
	}
	return out
}

// TestCompareRoutesToTheCheaperOfTwoAsGoodModels is the scenario:
// three models behind a fake endpoint on a held-out set, one clearly
// worse, two within noise of each other at different prices.
func TestCompareRoutesToTheCheaperOfTwoAsGoodModels(t *testing.T) {
	cleanEvalEnv(t)
	const n = 200
	chat := &modelsChat{calls: map[string]int{}, accuracy: map[string]float64{
		"alpha-pricey": 0.92, "bravo-cheap": 0.88, "charlie-worse": 0.45}}
	srv := httptest.NewServer(chat)
	defer srv.Close()
	dir := t.TempDir()
	set := numberedSet(t, dir, "held-out.json", n, nil)
	db := filepath.Join(dir, "v.db")
	prices := filepath.Join(dir, "prices.json")
	// Per call (10 in, 2 out): $0.00042, $0.000042, $0.000014.
	require.NoError(t, os.WriteFile(prices, []byte(`{
		"openai:alpha-pricey": {"input_usd_per_mtok": 30, "output_usd_per_mtok": 60},
		"openai:bravo-cheap": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 6},
		"openai:charlie-worse": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2}}`), 0o644))
	perCall := map[string]float64{"alpha-pricey": 420e-6, "bravo-cheap": 42e-6, "charlie-worse": 14e-6}

	// What the fake will answer, counted apart from verdryx.
	passes := map[string]int{}
	for m := range chat.accuracy {
		for i := range n {
			if chat.correct(m, fmt.Sprintf("q-%d", i)) {
				passes[m]++
			}
		}
	}
	require.Greater(t, passes["alpha-pricey"], passes["bravo-cheap"], "fixture: the pricey model is the best by mean")
	cpc := func(m string) float64 { return float64(n) * perCall[m] / float64(passes[m]) }

	junitPath := filepath.Join(dir, "compare.xml")
	args := []string{"compare", "--db", db, "--openai-base-url", srv.URL, "--prices", prices,
		"--model", "openai:alpha-pricey", "--model", "openai:bravo-cheap", "--model", "openai:charlie-worse"}
	stdout, stderr, code := runCLI(t, append(args, "--json", "--junit", junitPath, set)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, map[string]int{"alpha-pricey": n, "bravo-cheap": n, "charlie-worse": n}, chat.callCounts(), "one call per model per case")

	var res evalrun.CompareResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	c := res.Comparison
	assert.Empty(t, res.ReusedRuns)
	assert.Len(t, res.GradedRuns, 3)
	assert.Equal(t, "openai:alpha-pricey", c.Best)
	verdicts := map[string]string{}
	for _, tt := range c.Tests {
		verdicts[tt.Model] = tt.Verdict
		assert.Equal(t, n, tt.Pairs)
	}
	assert.Equal(t, map[string]string{"openai:bravo-cheap": compare.VerdictSame, "openai:charlie-worse": compare.VerdictWorse}, verdicts)
	for _, m := range c.Models {
		short := strings.TrimPrefix(m.Model, "openai:")
		assert.Equal(t, passes[short], m.Passed, m.Model)
		require.NotNil(t, m.CostPerCorrectUSD, m.Model)
		assert.InDelta(t, cpc(short), *m.CostPerCorrectUSD, 1e-9, m.Model)
	}
	rec := c.Recommendation
	assert.Equal(t, "openai:bravo-cheap", rec.Candidate)
	require.NotNil(t, rec.SavingPerCorrectUSD)
	assert.InDelta(t, cpc("alpha-pricey")-cpc("bravo-cheap"), *rec.SavingPerCorrectUSD, 1e-9)
	assert.NotEmpty(t, c.Disagreements)
	assert.Len(t, c.Disagreements[0].Answers, 3)

	// JUnit: a testsuite per model, a testcase per case and model.
	raw, err := os.ReadFile(junitPath)
	require.NoError(t, err)
	var suites junit.Suites
	require.NoError(t, xml.Unmarshal(raw, &suites))
	require.Len(t, suites.Suites, 3)
	for _, s := range suites.Suites {
		assert.Len(t, s.Cases, n)
	}

	// Every run is stored, tagged with the comparison id.
	out, _, code := runCLI(t, "runs", "--db", db, "--json")
	require.Equal(t, exitOK, code)
	var stored []store.RunInfo
	require.NoError(t, json.Unmarshal([]byte(out), &stored))
	assert.Len(t, stored, 3)
	for _, id := range res.GradedRuns {
		stdout, _, code := runCLI(t, "compare", "--db", db, "--json", "--runs", res.GradedRuns[0]+","+id)
		if id == res.GradedRuns[0] {
			assert.Equal(t, exitUsage, code, "one model twice is refused")
			continue
		}
		require.Equal(t, exitOK, code)
		var two evalrun.CompareResult
		require.NoError(t, json.Unmarshal([]byte(stdout), &two))
		assert.Equal(t, c.ComparisonID, two.Comparison.ComparisonID, "runs of one comparison keep its id")
	}

	// A second compare reuses every stored run: no call.
	stdout, stderr, code = runCLI(t, append(args, set)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, map[string]int{"alpha-pricey": n, "bravo-cheap": n, "charlie-worse": n}, chat.callCounts(), "a second compare makes no call")
	assert.Contains(t, stdout, "reused runs (no call): "+strings.Join(res.GradedRuns, ", "))
	assert.Contains(t, stdout, "graded runs: none")
	assert.Contains(t, stdout, "recommendation: route to openai:bravo-cheap")
	assert.Contains(t, stdout, fmt.Sprintf("saves $%.6f (", cpc("alpha-pricey")-cpc("bravo-cheap")))
	assert.Contains(t, stdout, fmt.Sprintf("(best openai:alpha-pricey at $%.6f)", cpc("alpha-pricey")))
	assert.Contains(t, stdout, "openai:charlie-worse")
	assert.Contains(t, stdout, "WORSE")

	// --fresh calls again.
	_, stderr, code = runCLI(t, append(args, "--fresh", "--model", "stub", set)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, map[string]int{"alpha-pricey": 2 * n, "bravo-cheap": 2 * n, "charlie-worse": 2 * n}, chat.callCounts())
}

// TestCompareCostLimitCoversTheWholeComparison: one --cost-limit-usd over
// every model, graded one after another; models not reached are named.
func TestCompareCostLimitCoversTheWholeComparison(t *testing.T) {
	cleanEvalEnv(t)
	const n = 200
	chat := &modelsChat{calls: map[string]int{}, accuracy: map[string]float64{"alpha-pricey": 0.9, "bravo-cheap": 0.9, "charlie-worse": 0.5}}
	srv := httptest.NewServer(chat)
	defer srv.Close()
	dir := t.TempDir()
	set := numberedSet(t, dir, "held-out.json", n, nil)
	prices := filepath.Join(dir, "prices.json")
	require.NoError(t, os.WriteFile(prices, []byte(`{
		"openai:alpha-pricey": {"input_usd_per_mtok": 30, "output_usd_per_mtok": 60},
		"openai:bravo-cheap": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 6},
		"openai:charlie-worse": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2}}`), 0o644))
	args := []string{"compare", "--db", filepath.Join(dir, "v.db"), "--openai-base-url", srv.URL, "--prices", prices, "--concurrency", "1",
		"--model", "openai:alpha-pricey", "--model", "openai:bravo-cheap", "--model", "openai:charlie-worse", "--json"}

	// alpha costs $0.084 for 200 cases; $0.09 leaves $0.006 for bravo
	// ($0.000042 a call: 143 calls) and nothing for charlie.
	stdout, stderr, code := runCLI(t, append(args, "--cost-limit-usd", "0.09", set)...)
	require.Equal(t, exitOK, code, stderr)
	var res evalrun.CompareResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	calls := chat.callCounts()
	assert.Equal(t, n, calls["alpha-pricey"])
	assert.Equal(t, 143, calls["bravo-cheap"], "calls stop once the comparison's spend reaches the cap")
	assert.Zero(t, calls["charlie-worse"])
	require.Len(t, res.NotGraded, 1)
	assert.Equal(t, "openai:charlie-worse", res.NotGraded[0].Model)
	assert.GreaterOrEqual(t, res.SpentUSD, 0.09)
	assert.Less(t, res.SpentUSD, 0.09+42e-6, "past the cap by at most the one call that crossed it")
	require.Len(t, res.Comparison.Models, 2)
	assert.Equal(t, n-143, res.Comparison.Models[1].Unmeasured, "cases past the cap are unmeasured")

	_, stderr, code = runCLI(t, append(args, "--fresh", "--cost-limit-usd", "0.01", set)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "only 1 of 3 models graded before the cost limit")
}

func TestCompareRefusesBadInput(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	set := numberedSet(t, dir, "s.json", 4, nil)
	_, stderr, code := runCLI(t, "eval", "--db", db, set)
	require.Equal(t, exitOK, code, stderr)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"one model", []string{"compare", "--db", db, "--model", "stub", set}, "want at least two --model, have 1"},
		{"no set", []string{"compare", "--db", db, "--model", "stub", "--model", "openai:x"}, "want exactly one EVALSET (or --runs)"},
		{"a model twice", []string{"compare", "--db", db, "--model", "stub", "--model", "stub", set}, "model stub is named twice"},
		{"runs with a set", []string{"compare", "--db", db, "--runs", "a,b", set}, "give no EVALSET, --model or --fresh with it"},
		{"unknown run", []string{"compare", "--db", db, "--runs", "run-a,run-b"}, `run "run-a": store: not found`},
		{"alpha", []string{"compare", "--db", db, "--alpha", "1", "--model", "stub", "--model", "openai:x", set}, "--alpha 1: want between 0 and 1"},
		{"cap over an unpriced model", []string{"compare", "--db", db, "--openai-base-url", "http://127.0.0.1:1", "--cost-limit-usd", "1",
			"--model", "stub", "--model", "openai:unpriced-x", set}, "model openai:unpriced-x has no price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			assert.Equal(t, exitUsage, code, stderr)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
}
