package main

import (
	"context"
	"database/sql"
	"encoding/json"
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

	"github.com/verdryx/verdryx/grading/evalrun"
)

// The stack's console (github.com/TAIPANBOX/genaryx; docs/stack.md): the
// SQL it runs on a read-only connection, and how it reads ids off the CLI.
const (
	consoleRunsSQL    = `SELECT id, model, started_at, finished_at FROM eval_runs ORDER BY started_at DESC`
	consoleRunSQL     = `SELECT id, model, started_at, finished_at FROM eval_runs WHERE id = ?1`
	consoleSummarySQL = `SELECT COUNT(*), AVG(value), COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0.0) FROM scores WHERE run_id = ?1`
	consoleScoresSQL  = `SELECT id, run_id, case_id, value, tokens, cost_usd FROM scores WHERE run_id = ?1 ORDER BY id`
	consoleHasSQL     = `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1 LIMIT 1`
	consoleReasonsSQL = `SELECT reason, COUNT(*) FROM unanswered WHERE run_id = ?1 GROUP BY reason ORDER BY reason`
	consoleBaseSQL    = `SELECT id, eval_run_id, mean_score, created_at, label FROM baselines ORDER BY created_at DESC`
)

// consoleID reads an id as the console does: the first whitespace
// separated token after prefix on the first stdout line that starts
// (after leading spaces) with it.
func consoleID(stdout, prefix string) (string, bool) {
	for _, line := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), prefix); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0], true
			}
		}
	}
	return "", false
}

// consoleView is what the quality panel shows of one run.
type consoleView struct {
	finished bool
	count    int64
	mean     sql.NullFloat64
	cost     float64
	cases    []string
	reasons  map[string]int
	baseline map[string]string // baseline id -> label
}

// readAsConsole opens db as the console does (read-only, busy timeout
// 5 s, a fresh connection) and runs its reads of run.
func readAsConsole(db, run string) (consoleView, error) {
	v := consoleView{reasons: map[string]int{}, baseline: map[string]string{}}
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return v, err
	}
	defer conn.Close()
	rows, err := conn.Query(consoleRunsSQL)
	if err != nil {
		return v, err
	}
	rows.Close()
	var id, model, started string
	var finished sql.NullString
	if err := conn.QueryRow(consoleRunSQL, run).Scan(&id, &model, &started, &finished); err != nil {
		return v, fmt.Errorf("run %s: %w", run, err)
	}
	v.finished = finished.Valid
	var tokens int64
	if err := conn.QueryRow(consoleSummarySQL, run).Scan(&v.count, &v.mean, &tokens, &v.cost); err != nil {
		return v, err
	}
	rows, err = conn.Query(consoleScoresSQL, run)
	if err != nil {
		return v, err
	}
	for rows.Next() {
		var sid, tok int64
		var rid, cid string
		var val, cost float64
		if err := rows.Scan(&sid, &rid, &cid, &val, &tok, &cost); err != nil {
			rows.Close()
			return v, err
		}
		v.cases = append(v.cases, cid)
	}
	rows.Close()
	var one int
	if err := conn.QueryRow(consoleHasSQL, "unanswered").Scan(&one); err != nil {
		return v, fmt.Errorf("no unanswered table: %w", err)
	}
	rows, err = conn.Query(consoleReasonsSQL, run)
	if err != nil {
		return v, err
	}
	for rows.Next() {
		var reason string
		var n int
		if err := rows.Scan(&reason, &n); err != nil {
			rows.Close()
			return v, err
		}
		v.reasons[reason] = n
	}
	rows.Close()
	rows, err = conn.Query(consoleBaseSQL)
	if err != nil {
		return v, err
	}
	defer rows.Close()
	for rows.Next() {
		var bid, brun, created, label string
		var mean float64
		if err := rows.Scan(&bid, &brun, &mean, &created, &label); err != nil {
			return v, err
		}
		v.baseline[bid] = label
	}
	return v, rows.Err()
}

// fakeAnthropic speaks the Anthropic Messages API: the model under
// evaluation answers "hello" to "say hello" and "wrong" to anything else;
// a judge call (a system prompt) answers judgeSays. It counts both.
type fakeAnthropic struct {
	judgeSays        string
	calls, judgeHits atomic.Int32
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	text := "wrong"
	switch {
	case len(req.System) > 0 && string(req.System) != "null":
		f.judgeHits.Add(1)
		text = f.judgeSays
	case strings.Contains(string(body), "say hello"):
		text = "hello"
	}
	q, _ := json.Marshal(text)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":%s}],"stop_reason":"end_turn","usage":{"input_tokens":100,"output_tokens":10}}`, q)
}

// admissionSet has an exact case the model passes, one it fails, and a
// rubric case the judge grades.
func admissionSet(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "es.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"id":"admission","cases":[
		{"id":"greet","prompt":"say hello","expected":"hello"},
		{"id":"capital","prompt":"capital of France?","expected":"Paris"},
		{"id":"tone","grader":"llm_judge","prompt":"reply politely","rubric":"polite and brief"}]}`), 0o644))
	return p
}

// admission runs the console's admission flow: eval, the run id off
// stdout, baseline, the baseline id off stdout, the run read back.
func admission(t *testing.T, db, set, agent string) (run, baseline string, view consoleView) {
	t.Helper()
	stdout, stderr, code := runCLI(t, "eval", set, "--model", "claude-haiku-4-5", "--agent-id", agent, "--db", db)
	require.Equal(t, exitOK, code, stderr)
	first := strings.SplitN(stdout, "\n", 2)[0]
	assert.Regexp(t, `^Eval run \S+  \(model=claude-haiku-4-5, db=`+regexpQuote(db)+`\)$`, first, "the first line is the one the console parses")
	run, ok := consoleID(stdout, "Eval run ")
	require.True(t, ok, "unparseable output:\n%s", stdout)
	stdout, stderr, code = runCLI(t, "baseline", run, "--db", db, "--label", "admission-"+agent)
	require.Equal(t, exitOK, code, stderr)
	baseline, ok = consoleID(stdout, "Baseline ")
	require.True(t, ok, "unparseable output:\n%s", stdout)
	assert.Regexp(t, `^Baseline `+regexpQuote(baseline)+`  \(run=`+regexpQuote(run)+`, mean_score=\d\.\d{3}\)`, stdout)
	view, err := readAsConsole(db, run)
	require.NoError(t, err)
	return run, baseline, view
}

func regexpQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `.`, `\.`, `(`, `\(`, `)`, `\)`, `+`, `\+`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`, `{`, `\{`, `}`, `\}`, `^`, `\^`, `$`, `\$`, `|`, `\|`)
	return r.Replace(s)
}

func TestConsoleAdmissionFlow(t *testing.T) {
	cleanEvalEnv(t)
	fake := &fakeAnthropic{judgeSays: "0.8"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456")
	dir := t.TempDir()
	db := filepath.Join(dir, "verdryx.db")
	set := admissionSet(t, dir)
	const agent = "agent://acme.local/finance/billing-agent"

	run, baseline, view := admission(t, db, set, agent)
	assert.EqualValues(t, 1, fake.judgeHits.Load(), "with --model named and no --judge, the rubric case is judged by that model")
	assert.True(t, view.finished)
	assert.EqualValues(t, 3, view.count)
	assert.Equal(t, []string{"greet", "capital", "tone"}, view.cases)
	assert.InDelta(t, (1+0+0.8)/3.0, view.mean.Float64, 1e-9)
	assert.Greater(t, view.cost, 0.0, "the run's spend")
	assert.Equal(t, "admission-"+agent, view.baseline[baseline])

	// The same agent admitted again: the label moves to the new baseline,
	// as with the Python verdryx, and the panel lists both.
	run2, baseline2, view := admission(t, db, set, agent)
	assert.NotEqual(t, run, run2)
	assert.Len(t, view.baseline, 2)
	assert.Equal(t, "admission-"+agent, view.baseline[baseline2])

	// --judge stub still selects the stand-in, and the run says which.
	before := fake.judgeHits.Load()
	stdout, stderr, code := runCLI(t, "eval", set, "--model", "claude-haiku-4-5", "--judge", "stub", "--db", db, "--json")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, before, fake.judgeHits.Load())
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, "stub", res.Run.Judge)
}

func TestConsoleSeesUnmeasuredCasesApart(t *testing.T) {
	cleanEvalEnv(t)
	fake := &fakeAnthropic{judgeSays: "no idea"} // an answer with no number: unmeasured
	srv := httptest.NewServer(fake)
	defer srv.Close()
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456")
	dir := t.TempDir()
	db := filepath.Join(dir, "verdryx.db")
	set := admissionSet(t, dir)
	stdout, stderr, code := runCLI(t, "eval", set, "--model", "claude-haiku-4-5", "--db", db, "--json")
	require.Equal(t, exitOK, code, stderr)
	var raw struct {
		Run struct {
			ID     string           `json:"run_id"`
			Scores []map[string]any `json:"cases"`
		} `json:"run"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &raw))
	var tone map[string]any
	for _, s := range raw.Run.Scores {
		if s["case_id"] == "tone" {
			tone = s
		}
	}
	require.NotNil(t, tone, stdout)
	v, has := tone["value"]
	assert.True(t, has && v == nil, "an unmeasured case carries no value: %v", tone)
	assert.Equal(t, "judge_error", tone["reason"])
	for _, s := range raw.Run.Scores {
		if s["case_id"] != "tone" {
			assert.NotNil(t, s["value"], "a measured case keeps its value, 0 included")
		}
	}

	view, err := readAsConsole(db, raw.Run.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 2, view.count, "scores holds the measured cases only")
	assert.InDelta(t, 0.5, view.mean.Float64, 1e-12)
	assert.Equal(t, map[string]int{"judge_error": 1}, view.reasons)
}

func TestConsoleOnAPythonStore(t *testing.T) {
	cleanEvalEnv(t)
	fake := &fakeAnthropic{judgeSays: "1"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456")
	dir := t.TempDir()
	db := filepath.Join(dir, "verdryx.db")
	raw, err := sql.Open("sqlite", db)
	require.NoError(t, err)
	for _, q := range []string{
		`CREATE TABLE eval_runs (id TEXT PRIMARY KEY, model TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT)`,
		`CREATE TABLE scores (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES eval_runs(id), case_id TEXT NOT NULL, value REAL NOT NULL, tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0.0)`,
		`CREATE INDEX idx_scores_run_id ON scores(run_id)`,
		`CREATE TABLE baselines (id TEXT PRIMARY KEY, eval_run_id TEXT NOT NULL REFERENCES eval_runs(id), mean_score REAL NOT NULL, created_at TEXT NOT NULL, label TEXT NOT NULL DEFAULT '')`,
		`PRAGMA user_version = 1`,
		`INSERT INTO eval_runs VALUES ('3fa85f64-5717-4562-b3fc-2c963f66afa6', 'claude-haiku-4-5', '2026-07-17T10:00:00+00:00', '2026-07-17T10:05:00+00:00')`,
		`INSERT INTO scores (run_id, case_id, value, tokens, cost_usd) VALUES ('3fa85f64-5717-4562-b3fc-2c963f66afa6', 'greet', 1.0, 120, 0.004), ('3fa85f64-5717-4562-b3fc-2c963f66afa6', 'capital', 1.0, 80, 0.002)`,
		`INSERT INTO baselines VALUES ('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', '3fa85f64-5717-4562-b3fc-2c963f66afa6', 1.0, '2026-07-17T10:06:00+00:00', 'v1-golden')`,
	} {
		_, err := raw.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, raw.Close())

	stdout, _, code := runCLI(t, "store", "check", "--db", db)
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "the Python verdryx's, without the unanswered table")
	assert.Contains(t, stdout, "1 runs, 2 scores, 0 unanswered, 1 baselines")
	_, stderr, code := runCLI(t, "runs", "--db", db)
	assert.Equal(t, exitUsage, code, "a read-only command does not migrate")
	assert.Contains(t, stderr, "verdryx store migrate")

	run, _, view := admission(t, db, admissionSet(t, dir), "agent://acme.local/x")
	assert.EqualValues(t, 3, view.count)
	matches, err := filepath.Glob(db + ".python-*.bak")
	require.NoError(t, err)
	assert.Len(t, matches, 1, "the first write copied the file beside it")

	stdout, stderr, code = runCLI(t, "runs", "--db", db)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "3fa85f64-5717-4562-b3fc-2c963f66afa6")
	assert.Contains(t, stdout, run)
	stdout, stderr, code = runCLI(t, "drift", "--db", db, "--baseline", "v1-golden")
	require.Equal(t, exitFailure, code, stderr+stdout) // greet 1, capital 0, tone 1 against 1.0: regressed
	assert.Contains(t, stdout, "records no eval set")
	assert.Contains(t, stdout, "regressed")
}

func TestConsoleReadsWhileTheWorkerGrades(t *testing.T) {
	cleanEvalEnv(t)
	root := t.TempDir()
	numberedSet(t, root, "set.json", 40, nil)
	data := t.TempDir()
	db := filepath.Join(data, "verdryx.db")
	var reqs []string
	for i := range 6 {
		reqs = append(reqs, "--eval-request", writeRequest(t, root, fmt.Sprintf("r%d.json", i), fmt.Sprintf(`{"request_id":"r-%d","eval_set_path":"set.json"}`, i)))
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var reads, fails atomic.Int32
	var firstErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
			if err != nil {
				continue
			}
			var id string
			err = conn.QueryRow(`SELECT id FROM eval_runs ORDER BY started_at DESC LIMIT 1`).Scan(&id)
			if err == nil {
				_, err = readAsConsole(db, id)
				reads.Add(1)
			}
			if err != nil && err != sql.ErrNoRows && !strings.Contains(err.Error(), "no such table") && !strings.Contains(err.Error(), "unable to open") {
				fails.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
			conn.Close()
		}
	}()
	out, errOut, code := serveOnce(t, data, append([]string{"--root", root, "--json"}, reqs...)...)
	stop()
	wg.Wait()
	require.Equal(t, exitOK, code, errOut)
	require.Len(t, jsonResults(t, out), 6)
	assert.Zero(t, fails.Load(), "a console read failed while the worker wrote: %v", firstErr.Load())
	for _, r := range jsonResults(t, out) {
		view, err := readAsConsole(db, r.Run.ID)
		require.NoError(t, err, "after a clean stop the store reads read-only")
		assert.EqualValues(t, 40, view.count)
	}
	t.Logf("%d console reads during the worker's run", reads.Load())
}
