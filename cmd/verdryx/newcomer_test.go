package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
)

// TestNewcomerPath walks the README's first steps with the default data
// directory (./.verdryx) and no --db anywhere: the quickstart, runs,
// baseline, drift, eval with live lines, report, and the quickstart
// again, which answers the eval request from the store and says so.
func TestNewcomerPath(t *testing.T) {
	cleanEvalEnv(t)
	for _, k := range []string{"VERDRYX_DATA", "VERDRYX_DB", "VERDRYX_EVENTS_PATH", "NATS_URL", "VERDRYX_NATS_URL",
		"VERDRYX_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	testdata, err := filepath.Abs(filepath.Join("..", "..", "testdata"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dir, "testdata"), os.DirFS(testdata)))
	t.Chdir(dir)

	// The quickstart (README), on a free port and without the HTTP
	// listener so that it runs beside other tests.
	quickstart := []string{"serve", "--once", "--replay", "testdata/traces/basic", "--eval-request", "testdata/requests/grimoire.json",
		"--root", "testdata", "--events", ".verdryx/events.ndjson", "--nats-listen", "127.0.0.1:0", "--http="}
	out, stderr, code := runCLI(t, quickstart...)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	assert.Contains(t, out, "9 new, 0 already stored")
	evalLine := regexp.MustCompile(`eval demo-grimoire-1: run (run-\S+) model stub: 7 cases, 7 graded, mean 1\.000`)
	m := evalLine.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	runID := m[1]
	assert.Contains(t, out, "cost per resolved outcome: $0.000500")
	assert.FileExists(t, filepath.Join(".verdryx", "verdryx.db"))

	// runs finds the quickstart's store with no flag.
	out, stderr, code = runCLI(t, "runs")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, runID)

	// A baseline of that run, with a label.
	out, stderr, code = runCLI(t, "baseline", runID, "--label", "v1", "--json")
	require.Equal(t, exitOK, code, stderr)
	var bl drift.Baseline
	require.NoError(t, json.Unmarshal([]byte(out), &bl))
	assert.Equal(t, "v1", bl.Label)

	// eval prints each case's line as it finishes (in case order: stdout is
	// not a terminal), then the totals.
	out, stderr, code = runCLI(t, "eval", "testdata/grimoire/evalset.json")
	require.Equal(t, exitOK, code, stderr)
	set, err := grading.LoadEvalSet("testdata/grimoire/evalset.json")
	require.NoError(t, err)
	last := 0
	for _, c := range set.Cases {
		i := strings.Index(out, " "+c.ID+" ")
		require.Positive(t, i, "case %s has a line:\n%s", c.ID, out)
		assert.Greater(t, i, last, "case %s in case order", c.ID)
		last = i
	}
	assert.Greater(t, strings.Index(out, "mean score 1.000"), last, "totals after the cases")
	assert.Contains(t, out, "saved to "+filepath.Join(".verdryx", "verdryx.db"))

	// drift against the baseline, named by its label, finds both runs; the
	// label is listed by `baselines`.
	out, stderr, code = runCLI(t, "drift", "--baseline", "v1")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	assert.Contains(t, out, "verdict on-track")
	assert.Contains(t, out, bl.ID, "the report names the baseline's id")
	out, stderr, code = runCLI(t, "baselines", "--json")
	require.Equal(t, exitOK, code, stderr)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Len(t, listed, 1)
	assert.Equal(t, "v1", listed[0]["label"])

	// report reads the same store; the tour's traces give its SLO
	// section data, not only "not measured".
	out, stderr, code = runCLI(t, "report", "--traces", "testdata/traces/slo", "--out", "report.html")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "wrote report.html")
	page, err := os.ReadFile("report.html")
	require.NoError(t, err)
	assert.Contains(t, string(page), "exhausted (alert)", "an SLO measured and alerting")
	assert.Contains(t, string(page), "0.6250", "the fleet's task_success, measured")

	// The quickstart again: nothing new, and the eval line is answered
	// from the store instead of silently missing.
	out, stderr, code = runCLI(t, quickstart...)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	assert.Contains(t, out, "0 new, 9 already stored")
	assert.Contains(t, out, "eval demo-grimoire-1: run "+runID)
	assert.Contains(t, out, "already done: answered from the store")

	// The events of both serve runs chain in the one file.
	out, stderr, code = runCLI(t, "verify", filepath.Join(".verdryx", "events.ndjson"))
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
}
