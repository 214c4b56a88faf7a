package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/junit"
	"github.com/verdryx/verdryx/grading/llm"
)

// cleanEvalEnv keeps the developer's environment out of the tests.
func cleanEvalEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"VERDRYX_DB", "VERDRYX_EVENTS_PATH", "VERDRYX_OTLP_ENDPOINT", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "VERDRYX_OPENAI_BASE_URL"} {
		t.Setenv(k, "")
	}
}

// numberedSet writes an eval set of n exact cases "q-i" -> "a-i".
func numberedSet(t *testing.T, dir, name string, n int, edit func(i int) string) string {
	t.Helper()
	var cases []string
	for i := range n {
		want := fmt.Sprintf("a-%d", i)
		if edit != nil {
			want = edit(i)
		}
		cases = append(cases, fmt.Sprintf(`{"id":"case-%02d","prompt":"q-%d","expected":%q}`, i, i, want))
	}
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(`{"id":"numbered","cases":[`+strings.Join(cases, ",")+`]}`), 0o644))
	return p
}

// fakeChat is an OpenAI-compatible endpoint answering "q-i" with "a-i",
// except for prompts in wrong (answered "wrong") or when down (503).
type fakeChat struct {
	mu    sync.Mutex
	wrong map[string]bool
	down  atomic.Bool
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
		return
	}
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	prompt := req.Messages[len(req.Messages)-1].Content
	answer := strings.Replace(prompt, "q-", "a-", 1)
	f.mu.Lock()
	if f.wrong[prompt] {
		answer = "wrong"
	}
	f.mu.Unlock()
	fmt.Fprintf(w, `{"choices":[{"message":{"content":%q}}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`, answer)
}

func (f *fakeChat) lower(prompts ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wrong = map[string]bool{}
	for _, p := range prompts {
		f.wrong[p] = true
	}
}

func TestEvalExitCodes(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	good := numberedSet(t, dir, "good.json", 4, func(i int) string { return fmt.Sprintf("q-%d", i) }) // the stub echoes
	half := numberedSet(t, dir, "half.json", 4, func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("q-%d", i)
		}
		return "x"
	})
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"id":"s","cases":[{"id":"j","prompt":"p","grader":"llm_judge"}]}`), 0o644))

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no eval set", []string{"eval", "--db", db}, exitUsage, "", "want exactly one EVALSET"},
		{"unknown flag", []string{"eval", "--nope", good}, exitUsage, "", "unknown flag: --nope (see 'verdryx eval --help')"},
		{"invalid eval set names the field", []string{"eval", "--db", db, bad}, exitUsage, "", `bad.json: case #0 "j": field "rubric": required for grader llm_judge`},
		{"missing eval set", []string{"eval", "--db", db, filepath.Join(dir, "absent.json")}, exitUsage, "", "read eval set"},
		{"pass", []string{"eval", "--db", db, good}, exitOK, "mean score 1.000 over 4 graded of 4 cases", ""},
		{"at the floor passes", []string{"eval", "--db", db, "--fail-under", "0.5", half}, exitOK, "mean score 0.500", ""},
		{"under the floor", []string{"eval", "--db", db, "--fail-under", "0.6", half}, exitFailure, "", "mean score 0.500 is under --fail-under 0.600"},
		{"floor above 1", []string{"eval", "--db", db, "--fail-under", "2", good}, exitUsage, "", "--fail-under 2 is above 1"},
		{"real model without a key", []string{"eval", "--db", db, "--model", "claude-sonnet-4-5", good}, exitUsage, "", "ANTHROPIC_API_KEY"},
		{"bad agent id", []string{"eval", "--db", db, "--agent-id", "bob", good}, exitUsage, "", "not a canonical agent:// id"},
		{"baseline of an unknown run", []string{"baseline", "--db", db, "run-nope"}, exitUsage, "", "not found"},
		{"drift needs a baseline", []string{"drift", "--db", db}, exitUsage, "", "--baseline is required"},
		{"drift on an unknown baseline", []string{"drift", "--db", db, "--baseline", "bl-nope"}, exitUsage, "", "not found"},
		{"runs on a missing store", []string{"runs", "--db", filepath.Join(dir, "absent.db")}, exitUsage, "", "no store at"},
		{"help", []string{"eval", "--help"}, exitOK, "Exit 0: pass; 1: mean under --fail-under", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			assert.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stdout, tc.stdout)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
}

func TestEvalUnmeasuredIsNeverZero(t *testing.T) {
	cleanEvalEnv(t)
	chat := &fakeChat{}
	chat.down.Store(true)
	srv := httptest.NewServer(chat)
	defer srv.Close()
	dir := t.TempDir()
	set := numberedSet(t, dir, "set.json", 3, nil)
	db := filepath.Join(dir, "v.db")
	args := []string{"eval", "--db", db, "--model", "openai:local", "--openai-base-url", srv.URL}

	// Every case unmeasured: the provider failed, exit 3; the run is
	// still printed and stored, and its mean is unmeasured, not 0.
	stdout, stderr, code := runCLI(t, append(args, set)...)
	assert.Equal(t, exitService, code)
	assert.Contains(t, stderr, "no case could be graded")
	assert.Contains(t, stdout, "mean score unmeasured (0 of 3 cases graded)")
	assert.Contains(t, stdout, "UNMEASURED")
	assert.Contains(t, stdout, "provider answered an error status")
	assert.Contains(t, stdout, "HTTP 503: down")
	assert.NotContains(t, stdout, "0.000 over")

	_, stderr, code = runCLI(t, append(args, "--fail-under", "0.1", set)...)
	assert.Equal(t, exitService, code, "an unmeasured mean never passes a floor; the service failure decides the code")
	assert.Contains(t, stderr, "unmeasured")

	stdout, _, code = runCLI(t, append(args, "--json", set)...)
	require.Equal(t, exitService, code)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Nil(t, res.Run.MeanScore)
	assert.Equal(t, 3, res.Run.Unanswered)

	// The store shows it too, and refuses to baseline it.
	stdout, _, code = runCLI(t, "runs", "--db", db)
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "unmeasured (0/3)")
	_, stderr, code = runCLI(t, "baseline", "--db", db, res.Run.ID)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no graded case")
}

func TestEvalBaselineDriftFlow(t *testing.T) {
	cleanEvalEnv(t)
	chat := &fakeChat{}
	srv := httptest.NewServer(chat)
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	events := filepath.Join(dir, "events.ndjson")
	set := numberedSet(t, dir, "set.json", 24, nil)
	const agentID = "agent://acme.example/support/bot"
	evalArgs := []string{"eval", "--db", db, "--model", "openai:local", "--openai-base-url", srv.URL,
		"--events", events, "--agent-id", agentID, "--json", set}

	evalJSON := func() evalrun.Result {
		t.Helper()
		stdout, stderr, code := runCLI(t, evalArgs...)
		require.Equal(t, exitOK, code, stderr)
		var res evalrun.Result
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		return res
	}
	first := evalJSON()
	stdout, _, code := runCLI(t, "baseline", "--db", db, "--label", "v1", "--json", first.Run.ID)
	require.Equal(t, exitOK, code)
	var bl drift.Baseline
	require.NoError(t, json.Unmarshal([]byte(stdout), &bl))
	assert.Equal(t, 1.0, bl.MeanScore)
	evalJSON()

	driftArgs := []string{"drift", "--db", db, "--baseline", bl.ID, "--events", events, "--agent-id", agentID}
	stdout, _, code = runCLI(t, driftArgs...)
	assert.Equal(t, exitOK, code, stdout)
	assert.Contains(t, stdout, "verdict on-track")

	// Plant a real regression: a quarter of the cases now answer wrong.
	chat.lower("q-1", "q-5", "q-9", "q-13", "q-17", "q-21")
	for range 3 {
		evalJSON()
	}
	stdout, _, code = runCLI(t, append(driftArgs, "--window", "3", "--json", "--seed", "11")...)
	require.Equal(t, exitFailure, code, stdout)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	assert.Equal(t, drift.VerdictRegressed, rep.Verdict)
	require.NotNil(t, rep.CIHigh)
	assert.Less(t, *rep.CIHigh, 0.0)
	assert.InDelta(t, -0.25, rep.Delta, 1e-12)
	assert.Equal(t, uint64(11), rep.Seed)
	require.NotNil(t, rep.Paired)
	assert.Equal(t, 24, rep.Paired.Cases)

	again, _, code := runCLI(t, append(driftArgs, "--window", "3", "--json", "--seed", "11")...)
	require.Equal(t, exitFailure, code)
	assert.JSONEq(t, stdout, again, "a seeded report reproduces exactly")

	// The events file verifies and carries one quality_drift per regression.
	vout, _, code := runCLI(t, "verify", events)
	assert.Equal(t, exitOK, code, vout)
	raw, err := os.ReadFile(events)
	require.NoError(t, err)
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev struct {
			Type  string         `json:"type"`
			RunID string         `json:"run_id"`
			Data  map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		counts[ev.Type]++
		if ev.Type == "quality_drift" {
			assert.Equal(t, first.Run.ID, ev.RunID)
			assert.Equal(t, "regressed", ev.Data["verdict"])
		}
	}
	assert.Equal(t, map[string]int{"quality_score": 5 * 24, "eval_run": 5, "quality_drift": 2}, counts)

	stdout, _, code = runCLI(t, "runs", "--db", db, "--json")
	require.Equal(t, exitOK, code)
	var runs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &runs))
	assert.Len(t, runs, 5)
}

func TestDriftRefusesChangedSet(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	echo := func(i int) string { return fmt.Sprintf("q-%d", i) }
	v1 := numberedSet(t, dir, "v1.json", 4, echo)
	v2 := numberedSet(t, dir, "v2.json", 4, func(i int) string {
		if i == 2 {
			return "edited"
		}
		return echo(i)
	})
	stdout, _, code := runCLI(t, "eval", "--db", db, "--json", v1)
	require.Equal(t, exitOK, code)
	var first evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &first))
	stdout, _, code = runCLI(t, "baseline", "--db", db, "--json", first.Run.ID)
	require.Equal(t, exitOK, code)
	var bl drift.Baseline
	require.NoError(t, json.Unmarshal([]byte(stdout), &bl))
	_, _, code = runCLI(t, "eval", "--db", db, v2)
	require.Equal(t, exitOK, code)

	_, stderr, code := runCLI(t, "drift", "--db", db, "--baseline", bl.ID)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "changed cases: case-02")
	assert.Contains(t, stderr, "--allow-changed-set")

	stdout, _, code = runCLI(t, "drift", "--db", db, "--baseline", bl.ID, "--allow-changed-set")
	assert.Equal(t, exitFailure, code, "the edited case now fails: 0.75 vs 1.0")
	assert.Contains(t, stdout, "WARNING: the eval set changed since the baseline (--allow-changed-set); changed cases: case-02")
}

func TestEvalJUnit(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	set := filepath.Join(dir, "set.json")
	require.NoError(t, os.WriteFile(set, []byte(`{"id":"mixed","cases":[
		{"id":"echo","prompt":"hi","expected":"hi"},
		{"id":"miss","prompt":"hi","expected":"bye"},
		{"id":"tag","prompt":"escalated","grader":"outcome_tag"},
		{"id":"tools","prompt":"do it","grader":"tool_trace","tools":[{"name":"a"}],"expected_tools":["a"]}]}`), 0o644))
	out := filepath.Join(dir, "junit.xml")
	_, stderr, code := runCLI(t, "eval", "--db", filepath.Join(dir, "v.db"), "--junit", out, set)
	require.Equal(t, exitOK, code, stderr)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	var suite junit.Suite
	require.NoError(t, xml.Unmarshal(raw, &suite))
	assert.Equal(t, "mixed", suite.Name)
	require.Len(t, suite.Cases, 4, "one testcase per eval case")
	assert.Equal(t, 4, suite.Tests)
	assert.Equal(t, 3, suite.Failures, "miss, tag at 0.5 and tools (the stub calls none) are under 1.0")
	assert.Nil(t, suite.Cases[0].Failure)
	require.NotNil(t, suite.Cases[1].Failure)
	assert.Contains(t, suite.Cases[1].Failure.Body, `want "bye", have "hi"`)
	assert.Contains(t, suite.Cases[1].Failure.Message, "failed: exact", "the message names the failed checks")
	assert.Equal(t, "mixed.exact", suite.Cases[1].Classname)
	// Every case carries its model output, passing or not (the stub echoes).
	assert.Equal(t, "hi", suite.Cases[0].SystemOut)
	assert.Equal(t, "hi", suite.Cases[1].SystemOut)
	assert.Contains(t, string(raw), "<system-out>hi</system-out>")
}

func TestEvalGrimoireOffline(t *testing.T) {
	cleanEvalEnv(t)
	path := filepath.Join("..", "..", "testdata", "grimoire", "evalset.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("committed grimoire fixture missing (renamed or deleted?): %v", err)
	}
	stdout, stderr, code := runCLI(t, "eval", path, "--model", "stub", "--db", filepath.Join(t.TempDir(), "v.db"))
	require.Equal(t, exitOK, code, stderr)
	for _, id := range []string{"numeric-source-verdigris-dose", "numeric-source-amber-dose", "numeric-source-obsidian-dose",
		"near-synonym-moonpetal-vapor", "conditional-shadeglass-harvest", "conditional-shadeglass-direct-sun", "absent-moonpetal-dew-shelf-life"} {
		assert.Contains(t, stdout, id)
	}
	assert.Contains(t, stdout, "graded of 7 cases")
	assert.Contains(t, stdout, "deterministic stub")
}

func TestEvalRefusesAStoreOfAnotherSchema(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	set := numberedSet(t, dir, "set.json", 1, nil)
	_, _, code := runCLI(t, "eval", "--db", db, set)
	require.Equal(t, exitOK, code)
	bumpUserVersion(t, db, 999)
	_, stderr, code := runCLI(t, "eval", "--db", db, set)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "user_version 999 is newer")
}

func TestEvalExportsSpans(t *testing.T) {
	cleanEvalEnv(t)
	var hits atomic.Int32
	var bodyBytes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			hits.Add(1)
			bodyBytes.Add(int64(len(b)))
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	dir := t.TempDir()
	t.Setenv("VERDRYX_OTLP_ENDPOINT", srv.URL)
	_, stderr, code := runCLI(t, "eval", "--db", filepath.Join(dir, "v.db"), numberedSet(t, dir, "s.json", 2, nil))
	require.Equal(t, exitOK, code, stderr)
	assert.EqualValues(t, 1, hits.Load(), "the span was flushed before the command returned")
	assert.Positive(t, bodyBytes.Load())
	assert.Empty(t, stderr)
}

func bumpUserVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
	require.NoError(t, err)
}

// plantDrop evaluates an n-case set, baselines it, makes k cases answer
// wrong, evaluates again and returns the drift arguments.
func plantDrop(t *testing.T, n, k int) []string {
	t.Helper()
	chat := &fakeChat{}
	srv := httptest.NewServer(chat)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	set := numberedSet(t, dir, "set.json", n, nil)
	evalArgs := []string{"eval", "--db", db, "--model", "openai:local", "--openai-base-url", srv.URL, "--json", set}
	stdout, stderr, code := runCLI(t, evalArgs...)
	require.Equal(t, exitOK, code, stderr)
	var first evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &first))
	stdout, _, code = runCLI(t, "baseline", "--db", db, "--json", first.Run.ID)
	require.Equal(t, exitOK, code)
	var bl drift.Baseline
	require.NoError(t, json.Unmarshal([]byte(stdout), &bl))
	var wrong []string
	for i := range k {
		wrong = append(wrong, fmt.Sprintf("q-%d", i*n/k))
	}
	chat.lower(wrong...)
	_, stderr, code = runCLI(t, evalArgs...)
	require.Equal(t, exitOK, code, stderr)
	return []string{"drift", "--db", db, "--baseline", bl.ID, "--window", "1", "--seed", "5"}
}

// TestDriftSignificanceGate: a small-n planted drop is regressed but not
// significant (exit 0 with --require-significance); a 40-case planted
// regression is significant and fails the gate.
func TestDriftSignificanceGate(t *testing.T) {
	cleanEvalEnv(t)
	small := plantDrop(t, 5, 2)
	stdout, _, code := runCLI(t, small...)
	assert.Equal(t, exitFailure, code, "without the flag the contract's verdict decides")
	assert.Regexp(t, `verdict regressed \(not significant: CI \[-?\d\.\d\d, -?\d\.\d\d\] includes 0, n=5, paired p 0\.\d{4} >= 0\.05\)`, stdout)
	assert.Regexp(t, `welch t\s+-?\d+\.\d{4}, df \d+\.\d\d, two-sided p 0\.\d{4}`, stdout)
	stdout, _, code = runCLI(t, append(small, "--require-significance")...)
	assert.Equal(t, exitOK, code, stdout)
	stdout, _, code = runCLI(t, append(small, "--require-significance", "--json")...)
	assert.Equal(t, exitOK, code)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	assert.Equal(t, drift.VerdictRegressed, rep.Verdict)
	assert.False(t, rep.Significant)
	assert.Equal(t, 0.05, rep.Alpha)

	large := plantDrop(t, 40, 12)
	stdout, _, code = runCLI(t, append(large, "--require-significance")...)
	assert.Equal(t, exitFailure, code, stdout)
	assert.Regexp(t, `verdict regressed \(significant: CI \[-0\.\d\d, -0\.\d\d\] below 0, n=40`, stdout)

	_, stderr, code := runCLI(t, append(small, "--alpha", "1.5")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--alpha 1.5: want between 0 and 1, exclusive")
}

// TestDriftRefusesGoldenEdit: removing one forbidden literal from a golden
// case is a changed eval set, named by case, not a model regression.
func TestDriftRefusesGoldenEdit(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	for _, f := range []string{"corpus.json", "evalset.json", "golden.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "grimoire", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	set := filepath.Join(dir, "evalset.json")
	stdout, stderr, code := runCLI(t, "eval", "--db", db, "--json", set)
	require.Equal(t, exitOK, code, stderr)
	var first evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &first))
	stdout, _, code = runCLI(t, "baseline", "--db", db, "--json", first.Run.ID)
	require.Equal(t, exitOK, code)
	var bl drift.Baseline
	require.NoError(t, json.Unmarshal([]byte(stdout), &bl))

	golden := filepath.Join(dir, "golden.json")
	b, err := os.ReadFile(golden)
	require.NoError(t, err)
	soft := strings.Replace(string(b), `"GRIM-OBSIDIAN-PETAL", "amber glass", "at dawn"`, `"GRIM-OBSIDIAN-PETAL", "at dawn"`, 1)
	require.NotEqual(t, string(b), soft)
	require.NoError(t, os.WriteFile(golden, []byte(soft), 0o644))
	_, stderr, code = runCLI(t, "eval", "--db", db, set)
	require.Equal(t, exitOK, code, stderr)

	_, stderr, code = runCLI(t, "drift", "--db", db, "--baseline", bl.ID)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "measured a different eval set than the baseline (changed cases: numeric-source-verdigris-dose)")
}

// TestEvalLiveInCaseOrder feeds the per-case callback out of order: a
// stdout that is not a terminal gets the lines in case order, each as
// soon as the cases before it are done.
func TestEvalLiveInCaseOrder(t *testing.T) {
	set, err := grading.ParseEvalSet([]byte(`{"id":"s","cases":[
		{"id":"c0","prompt":"p","grader":"exact","expected":"p"},
		{"id":"c1","prompt":"p","grader":"exact","expected":"p"},
		{"id":"c2","prompt":"p","grader":"exact","expected":"p"}]}`), "")
	require.NoError(t, err)
	var out bytes.Buffer
	l := newEvalLive(&out, io.Discard, set, llm.StubID, llm.StubID, false)
	header := out.Len()
	l.onCase(2, grading.Score{CaseID: "c2", Value: 1})
	assert.Equal(t, header, out.Len(), "c2 waits for c0 and c1")
	l.onCase(0, grading.Score{CaseID: "c0", Value: 1})
	assert.Contains(t, out.String(), "c0")
	assert.NotContains(t, out.String(), "c2")
	l.onCase(1, grading.Score{CaseID: "c1", Value: 1})
	l.finish()
	body := out.String()[header:]
	assert.Less(t, strings.Index(body, "c0"), strings.Index(body, "c1"))
	assert.Less(t, strings.Index(body, "c1"), strings.Index(body, "c2"))
}

// TestEvalHonoursOTelEnv sends the span where the OpenTelemetry SDK's
// standard variables say, with their headers, and no --otlp.
func TestEvalHonoursOTelEnv(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv("VERDRYX_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	var hits atomic.Int32
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			hits.Add(1)
			auth.Store(r.Header.Get("X-Tenant"))
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	dir := t.TempDir()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Tenant=acme")
	_, stderr, code := runCLI(t, "eval", "--db", filepath.Join(dir, "v.db"), numberedSet(t, dir, "s.json", 2, nil))
	require.Equal(t, exitOK, code, stderr)
	assert.EqualValues(t, 1, hits.Load())
	assert.Equal(t, "acme", auth.Load())

	// The traces variable is a full URL, used as given.
	var custom atomic.Int32
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.URL.Path == "/custom/path" {
			custom.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv2.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv2.URL+"/custom/path")
	_, stderr, code = runCLI(t, "eval", "--db", filepath.Join(dir, "v.db"), numberedSet(t, dir, "s.json", 2, nil))
	require.Equal(t, exitOK, code, stderr)
	assert.EqualValues(t, 1, custom.Load(), "posted to the traces URL as given")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")
	_, stderr, code = runCLI(t, "eval", "--db", filepath.Join(dir, "v.db"), numberedSet(t, dir, "s.json", 2, nil))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--otlp")
}

func TestEvalPricesAndCostLimit(t *testing.T) {
	cleanEvalEnv(t)
	var hits atomic.Int32
	chat := &fakeChat{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		chat.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	set := numberedSet(t, dir, "set.json", 8, nil)
	db := filepath.Join(dir, "v.db")
	// 10 input and 2 output tokens a call: $0.02 a call.
	prices := filepath.Join(dir, "prices.json")
	require.NoError(t, os.WriteFile(prices, []byte(`{"openai:local": {"input_usd_per_mtok": 1000, "output_usd_per_mtok": 5000}}`), 0o644))
	args := []string{"eval", "--db", db, "--model", "openai:local", "--openai-base-url", srv.URL, "--concurrency", "1"}

	// Unpriced and uncapped: graded, and said to be unpriced.
	stdout, _, code := runCLI(t, append(args, set)...)
	require.Equal(t, exitOK, code, stdout)
	assert.Contains(t, stdout, "unpriced: no price for openai:local")
	assert.Equal(t, int32(8), hits.Load())

	// Unpriced and capped: refused before any call.
	_, stderr, code := runCLI(t, append(args, "--cost-limit-usd", "0.05", set)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "openai:local has no price")
	assert.Equal(t, int32(8), hits.Load())

	// Priced at $0.02 a call and capped at $0.05: three calls, the rest unmeasured.
	hits.Store(0)
	stdout, stderr, code = runCLI(t, append(args, "--prices", prices, "--cost-limit-usd", "0.05", "--json", set)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, int32(3), hits.Load())
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, 3, res.Run.GradedN)
	assert.Equal(t, 5, res.Run.CostLimited)
	assert.Equal(t, "case-03", res.Run.StoppedAtCase)
	assert.Equal(t, 0.05, res.Run.CostLimitUSD)
	assert.InDelta(t, 0.06, res.Run.TotalCostUSD, 1e-9)
	assert.Empty(t, res.Run.Unpriced)
	for _, s := range res.Run.Scores[3:] {
		assert.Equal(t, llm.ReasonCostLimit, s.Unmeasured)
	}
	assert.True(t, res.Saved)

	hits.Store(0)
	stdout, _, code = runCLI(t, append(args, "--prices", prices, "--cost-limit-usd", "0.05", set)...)
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "cost limit $0.050000: spent $0.060000 in 3 paid calls; stopped at case case-03, 5 cases unmeasured (cost_limit), 5 calls not made")
	assert.Contains(t, stdout, "cost_limit: 5")

	// Bad price files and caps are input errors naming what is wrong.
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"openai:local": {"input_usd_per_mtok": -1, "output_usd_per_mtok": 1}}`), 0o644))
	_, stderr, code = runCLI(t, append(args, "--prices", bad, set)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, bad)
	assert.Contains(t, stderr, `model "openai:local": input_usd_per_mtok is -1`)
	_, stderr, code = runCLI(t, append(args, "--cost-limit-usd", "-1", set)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--cost-limit-usd -1")
}

func TestEvalSemanticStub(t *testing.T) {
	cleanEvalEnv(t)
	path := filepath.Join("..", "..", "testdata", "grimoire", "evalset.json")
	db := filepath.Join(t.TempDir(), "v.db")
	stdout, stderr, code := runCLI(t, "eval", path, "--semantic", "--json", "--db", db)
	require.Equal(t, exitOK, code, stderr)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	require.Equal(t, 7, res.Run.GradedN)
	for _, s := range res.Run.Scores {
		assert.Equal(t, 1.0, s.Value, "case %s: %v", s.CaseID, s.Failing())
		var names []string
		for _, c := range s.Checks {
			names = append(names, c.Name)
			if c.Name == "faithfulness" || c.Name == "answer_relevance" {
				require.NotNil(t, c.Score, "case %s check %s", s.CaseID, c.Name)
				assert.GreaterOrEqual(t, *c.Score, 0.7)
			}
		}
		assert.Contains(t, names, "faithfulness")
		assert.Contains(t, names, "answer_relevance")
	}
	_, stderr, code = runCLI(t, "eval", path, "--semantic", "--semantic-threshold", "0", "--db", db)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--semantic-threshold 0")
}

func TestMutateSemanticKillsUnsupportedClaim(t *testing.T) {
	cleanEvalEnv(t)
	path := filepath.Join("..", "..", "testdata", "grimoire", "evalset.json")
	stdout, stderr, code := runCLI(t, "mutate", "--semantic", path)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "unsupported claim appended 6/6")
	assert.Contains(t, stdout, "0 survived")
	assert.Contains(t, stdout, "0 failed (specificity 100.0%)")
	stdout, _, code = runCLI(t, "mutate", path)
	require.Equal(t, exitOK, code)
	assert.NotContains(t, stdout, "unsupported claim appended")
}
