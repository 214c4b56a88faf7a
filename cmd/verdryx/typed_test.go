package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdryx/verdryx/testkit/otlptest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/provider/typryx"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/testkit/typryxtest"
)

// typedCLIKey is the key the fake typryx accepts; no byte of it may leave
// verdryx.
const typedCLIKey = "tpx_cli_key_7Hq2Zx9Lw4Rt6Yp"

var typedEvalSet = filepath.Join("..", "..", "testdata", "typed", "evalset.json")

// typedReplies answers testdata/typed/evalset.json: three answered, two
// unanswered with different reasons.
func typedReplies(a typryxtest.Ask) typryxtest.Reply {
	switch {
	case strings.Contains(a.State["task"], "refund"):
		return typryxtest.Noulp(0.92)
	case strings.Contains(a.State["task"], "late delivery"):
		return typryxtest.Noulp(0.81)
	case strings.Contains(a.State["task"], "old address"):
		return typryxtest.Noulp(0.12)
	case strings.Contains(a.State["task"], "password"):
		return typryxtest.Reply{Unanswered: "timeout"}
	}
	return typryxtest.Reply{Unanswered: "backend_error"}
}

func typedCLIFake(t *testing.T, opts typryxtest.Options) *typryxtest.Server {
	t.Helper()
	if opts.Key == "" {
		opts.Key = typedCLIKey
	}
	s := typryxtest.New(opts)
	t.Cleanup(s.Close)
	return s
}

func typedKeyFile(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "typryx.key")
	require.NoError(t, os.WriteFile(p, []byte(typedCLIKey+"\n"), 0o600))
	return p
}

// assertNoKey fails when the key appears in any of blobs or files.
func assertNoKey(t *testing.T, blobs map[string][]byte, files ...string) {
	t.Helper()
	for _, f := range files {
		for _, p := range []string{f, f + "-wal", f + "-shm"} {
			b, err := os.ReadFile(p)
			if os.IsNotExist(err) {
				continue
			}
			require.NoError(t, err)
			blobs[p] = b
		}
	}
	for name, b := range blobs {
		assert.False(t, bytes.Contains(b, []byte(typedCLIKey)), "the typryx key is in %s", name)
	}
}

func loadOnlyRun(t *testing.T, db string) grading.Run {
	t.Helper()
	st, err := store.Open(context.Background(), db, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.Runs(context.Background())
	require.NoError(t, err)
	require.Len(t, runs, 1)
	run, err := st.Run(context.Background(), runs[0].ID)
	require.NoError(t, err)
	return run
}

// TestEvalTypedDoneWhen is the done-when: the typed eval set
// against a fake typryx grades every case, prints the unanswered line,
// stores the run, posts the labels, emits the event and the spans, and
// leaves no byte of the key anywhere.
func TestEvalTypedDoneWhen(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv(typryx.EnvKeyFile, "")
	fake := typedCLIFake(t, typryxtest.Options{Answer: typedReplies})
	col := &otlptest.Collector{}
	otlp := httptest.NewServer(col)
	defer otlp.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	events := filepath.Join(dir, "events.ndjson")
	keyFile := typedKeyFile(t, dir)

	junit := filepath.Join(dir, "junit.xml")
	stdout, stderr, code := runCLI(t, "eval", typedEvalSet, "--typed-url", fake.URL, "--typed-key-file", keyFile,
		"--db", db, "--events", events, "--agent-id", "agent://verdryx.example/support-bot", "--otlp", otlp.URL, "-v", "--junit", junit)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "unanswered: 2 of 5 asked (backend_error: 1, timeout: 1)")
	assert.Contains(t, stdout, "run-")
	assert.Contains(t, stdout, "mean score 0.713 over 4 graded of 6 cases", "(0.92+0.81+0.12+1)/4")
	assert.Contains(t, stdout, "labels: 3 posted to typryx (source verdryx:evalset)")
	assert.Regexp(t, `UNANSWERED\s+password-reset\s+typed`, stdout)
	assert.Contains(t, stdout, "reason: typryx unanswered: timeout (answer 0000000000000000000000000000000")
	assert.NotContains(t, stdout, "unmeasured:", "the unanswered are counted apart, not as unmeasured")
	assert.Contains(t, stdout, "saved to "+db)
	assert.Contains(t, stderr, "typryx", "-v logs the typryx calls' spans or debug lines")

	xmlOut, err := os.ReadFile(junit)
	require.NoError(t, err)
	assert.Contains(t, string(xmlOut), `skipped="2"`)
	assert.Contains(t, string(xmlOut), "unanswered by typryx: timeout (answer 0000000000000000000000000000000")

	// Every typed case was asked once, with the run id; the labels of the
	// three answered, labelled cases were posted.
	run := loadOnlyRun(t, db)
	asks := fake.Asks()
	require.Len(t, asks, 5)
	for _, a := range asks {
		assert.Equal(t, run.ID, a.RunID)
	}
	outs := fake.Outcomes()
	require.Len(t, outs, 3)
	posted := map[string]string{}
	for _, o := range outs {
		posted[o.AnswerID] = string(o.Truth)
		assert.Equal(t, "verdryx:evalset", o.Source)
	}
	sum := grading.Summarize(run)
	require.NotNil(t, sum.Typed)
	assert.Equal(t, 5, sum.Typed.Asked)
	assert.Equal(t, 2, sum.Typed.Unanswered)
	assert.Equal(t, 3, sum.Typed.LabelsPosted)
	for _, s := range run.Scores {
		if s.Typed != nil && s.Typed.LabelPosted {
			assert.Equal(t, s.Typed.Label, posted[s.Typed.AnswerID], s.CaseID)
		}
	}

	// The eval_run event counts the unanswered.
	evs, err := os.ReadFile(events)
	require.NoError(t, err)
	var evalRun map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(evs), []byte("\n")) {
		var ev envelope.Event
		require.NoError(t, json.Unmarshal(line, &ev))
		if ev.Type == "eval_run" {
			evalRun = ev.Data
		}
	}
	require.NotNil(t, evalRun)
	assert.Equal(t, json.Number("2"), evalRun["unanswered"])

	// Spans: the run, six cases, and an ask span per typed case.
	spans := col.Spans()
	spanBytes := []byte{}
	asksSeen := 0
	for _, s := range spans {
		b, err := proto.Marshal(s)
		require.NoError(t, err)
		spanBytes = append(spanBytes, b...)
		if s.Name == "ask "+typryx.DefaultTemplate {
			asksSeen++
		}
	}
	assert.Equal(t, 5, asksSeen)

	// The JSON output carries the same counts.
	jsonOut, stderr2, code := runCLI(t, "eval", typedEvalSet, "--typed-url", fake.URL, "--typed-key-file", keyFile, "--db", db, "--json")
	require.Equal(t, exitOK, code, stderr2)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(jsonOut), &res))
	require.NotNil(t, res.Run.Typed)
	assert.Equal(t, 2, res.Run.Typed.Unanswered)
	assert.Len(t, res.Run.Typed.UnansweredCases, 2)

	// The report's grid colours the unanswered cells apart, never as a fail.
	page := filepath.Join(dir, "report.html")
	_, stderr3, code := runCLI(t, "report", "--db", db, "--out", page)
	require.Equal(t, exitOK, code, stderr3)
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(string(html), `class="mark cell unanswered"`), "two unanswered cases in each of two runs")
	assert.Contains(t, string(html), "unanswered by typryx (not a fail): timeout")
	assert.Contains(t, string(html), "unanswered by typryx in 2 of 2 runs (not a fail): backend_error")
	assert.Equal(t, 6, strings.Count(string(html), `class="mark cell fail"`),
		"the three answered typed cases (under the pass mark 1) in each run; the unanswered are not fails")

	// No byte of the key in the output, logs, store, events or spans.
	_, headers := fake.Requests()
	for _, h := range headers {
		assert.Equal(t, typedCLIKey, h.Get(typryx.HeaderKey), "the key is sent, only in its header")
	}
	assertNoKey(t, map[string][]byte{"stdout": []byte(stdout), "stderr": []byte(stderr), "json": []byte(jsonOut),
		"stderr2": []byte(stderr2), "spans": spanBytes, "report": html, "junit": xmlOut}, db, events)
}

func TestEvalTypedRefusalsExit3WithNothingStored(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv(typryx.EnvKeyFile, "")
	cases := []struct {
		name     string
		opts     typryxtest.Options
		template string
		timeout  string
		want     string
	}{
		{name: "401", opts: typryxtest.Options{Key: "another-key-entirely"}, want: "HTTP 401 unauthorized"},
		{name: "404 template", template: "no.such.template", want: "HTTP 404 unknown_template"},
		{name: "400", opts: typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Status: 400, Code: "bad_state"} }}, want: "HTTP 400 bad_state"},
		{name: "413", opts: typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Status: 413, Code: "state_too_large"} }}, want: "HTTP 413 state_too_large"},
		{name: "429", opts: typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Status: 429, Code: "over_hourly_cap"} }}, want: "HTTP 429 over_hourly_cap"},
		{name: "500", opts: typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Status: 500, Code: "internal"} }}, want: "HTTP 500 internal"},
		{name: "slow", opts: typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Hang: true} }}, timeout: "200ms", want: "unreachable"},
		{name: "malformed", opts: typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Raw: `{"oops":1}`} }}, want: "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := typedCLIFake(t, tc.opts)
			dir := t.TempDir()
			db := filepath.Join(dir, "v.db")
			events := filepath.Join(dir, "events.ndjson")
			args := []string{"eval", typedEvalSet, "--typed-url", fake.URL, "--typed-key-file", typedKeyFile(t, dir),
				"--db", db, "--events", events, "--agent-id", "agent://verdryx.example/support-bot", "-v"}
			if tc.template != "" {
				args = append(args, "--typed-template", tc.template)
			}
			if tc.timeout != "" {
				args = append(args, "--typed-timeout", tc.timeout)
			}
			start := time.Now()
			stdout, stderr, code := runCLI(t, args...)
			require.Equal(t, exitService, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Less(t, time.Since(start), 20*time.Second)
			assert.Contains(t, stderr, tc.want)
			assert.Contains(t, stderr, "nothing was saved")
			assert.NotContains(t, stdout, "saved to")
			st, err := store.Open(context.Background(), db, store.Options{})
			require.NoError(t, err)
			runs, err := st.Runs(context.Background())
			require.NoError(t, err)
			require.NoError(t, st.Close())
			assert.Empty(t, runs, "nothing stored")
			evs, _ := os.ReadFile(events)
			assert.Empty(t, evs, "no event")
			assert.Empty(t, fake.Outcomes(), "no label posted")
			assertNoKey(t, map[string][]byte{"stdout": []byte(stdout), "stderr": []byte(stderr)}, db, events)
		})
	}
}

func TestEvalTypedUsage(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv(typryx.EnvKeyFile, "")
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	fake := typedCLIFake(t, typryxtest.Options{Answer: typedReplies})
	keyFile := typedKeyFile(t, dir)

	_, stderr, code := runCLI(t, "eval", typedEvalSet, "--db", db)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--typed-url", "typed cases without typryx are refused, saying how to enable it")
	assert.Empty(t, fake.Asks())

	_, stderr, code = runCLI(t, "eval", typedEvalSet, "--db", db, "--typed-url", fake.URL)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--typed-key-file")

	// The key file may come from the environment, never the command line.
	t.Setenv(typryx.EnvKeyFile, keyFile)
	_, stderr, code = runCLI(t, "eval", typedEvalSet, "--db", db, "--typed-url", fake.URL)
	assert.Equal(t, exitOK, code, stderr)

	_, stderr, code = runCLI(t, "eval", typedEvalSet, "--db", db, "--typed-url", fake.URL, "--typed-template", typryxtest.Choice)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "choice")

	_, stderr, code = runCLI(t, "eval", typedEvalSet, "--db", db, "--typed-url", fake.URL, "--typed-key-file", filepath.Join(dir, "absent"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--typed-key-file")
}

func TestEvalTypedAllUnansweredHasNoMean(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv(typryx.EnvKeyFile, "")
	fake := typedCLIFake(t, typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply {
		return typryxtest.Reply{Unanswered: "no_probabilities"}
	}})
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	set := filepath.Join(dir, "set.json")
	require.NoError(t, os.WriteFile(set, []byte(`{"id":"all-typed","cases":[
		{"id":"a","grader":"typed","prompt":"x","expected":"true"},{"id":"b","grader":"typed","prompt":"y"}]}`), 0o644))
	stdout, stderr, code := runCLI(t, "eval", set, "--typed-url", fake.URL, "--typed-key-file", typedKeyFile(t, dir), "--db", db)
	assert.Equal(t, exitService, code, "nothing measured because typryx answered nothing")
	assert.Contains(t, stdout, "mean score: unmeasured (0 of 2 answered)")
	assert.Contains(t, stdout, "unanswered: 2 of 2 asked (no_probabilities: 2)")
	assert.Contains(t, stderr, "the run is stored")
	run := loadOnlyRun(t, db)
	_, stderr, code = runCLI(t, "baseline", "--db", db, run.ID)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no graded case")
}

// comparable strips what differs between two gradings of the same set:
// ids, times, durations and typryx's answer ids.
func comparableRun(r grading.Run) grading.Run {
	r.ID, r.RequestID = "", ""
	r.StartedAt, r.FinishedAt = time.Time{}, time.Time{}
	scores := make([]grading.Score, len(r.Scores))
	for i, s := range r.Scores {
		s.Duration = 0
		if s.Typed != nil {
			v := *s.Typed
			v.AnswerID = ""
			s.Typed = &v
		}
		var checks []grader.Check
		for _, c := range s.Checks {
			if i := strings.Index(c.Detail, ", answer "); i >= 0 {
				c.Detail = c.Detail[:i]
			}
			checks = append(checks, c)
		}
		s.Checks = checks
		scores[i] = s
	}
	r.Scores = scores
	return r
}

// TestServeTypedMatchesEval sends the same set through serve (an eval
// request over NATS) and through eval: the stored runs are the same.
func TestServeTypedMatchesEval(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv(typryx.EnvKeyFile, "")
	fake := typedCLIFake(t, typryxtest.Options{Answer: typedReplies})
	dir := t.TempDir()
	keyFile := typedKeyFile(t, dir)
	evalDB := filepath.Join(dir, "eval.db")
	_, stderr, code := runCLI(t, "eval", typedEvalSet, "--typed-url", fake.URL, "--typed-key-file", keyFile,
		"--db", evalDB, "--agent-id", "agent://verdryx.example/support-bot")
	require.Equal(t, exitOK, code, stderr)

	testdata, err := filepath.Abs(filepath.Join("..", "..", "testdata"))
	require.NoError(t, err)
	data := t.TempDir()
	serveDB := filepath.Join(data, "verdryx.db")
	out, errOut, code := serveOnce(t, data, "--root", testdata, "--eval-request", filepath.Join(testdata, "requests", "typed.json"),
		"--typed-url", fake.URL, "--typed-key-file", keyFile)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "eval demo-typed-1: run ")

	viaEval, viaServe := loadOnlyRun(t, evalDB), loadOnlyRun(t, serveDB)
	assert.Equal(t, comparableRun(viaEval), comparableRun(viaServe))
	assert.Len(t, fake.Outcomes(), 6, "each run posted its three labels")
	assertNoKey(t, map[string][]byte{"stdout": []byte(out), "stderr": []byte(errOut)}, serveDB)

	// Without --typed-url the worker refuses the request, saying why.
	data2 := t.TempDir()
	out, errOut, code = serveOnce(t, data2, "--root", testdata, "--eval-request", filepath.Join(testdata, "requests", "typed.json"))
	assert.NotContains(t, out, "eval demo-typed-1: run ", "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out+errOut, "--typed-url")
	_ = code
}
