package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/tracegen"
)

// tablesOf returns the report's lines before its "calls read" line: the
// window's tables (the line itself also counts calls outside the window).
func tablesOf(t *testing.T, out string) string {
	t.Helper()
	head, _, ok := strings.Cut(out, "calls read:")
	require.True(t, ok, "no calls read line in:\n%s", out)
	return head
}

// TestReportsByWindowOverNATS: three days of June traces (older than the
// hours kept: kept by the day) and thirty hours of traces up to ten hours
// ago (kept by the hour) in one directory, replayed to a NATS server and
// drained by `serve --once` (which folds the first days out of memory);
// `cost-per-correct`, `slo` and `report` over `--nats` for whole days of
// either and for windows starting and ending on any hour of the recent
// ones give the direct reduction of the same window; `--last 24h` starts
// on the hour and says where; a window off the hour, or cutting a day kept
// whole, is refused.
func TestReportsByWindowOverNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker over a replay")
	}
	dir := t.TempDir()
	traces := filepath.Join(dir, "traces")
	require.NoError(t, os.Mkdir(traces, 0o755))
	_, err := tracegen.GenerateFleet(traces, tracegen.FleetOptions{Rows: 6000, MeanCallsPerRun: 10, Concurrent: 40,
		SegmentRows: 1500, RowGroupRows: 500, Agents: 3, Seed: 4, Start: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), Span: 72 * time.Hour})
	require.NoError(t, err)
	// Calls of the last 40 hours: kept by the hour (--hours-kept 48h).
	recent := time.Now().UTC().Truncate(time.Hour).Add(-40 * time.Hour)
	_, err = tracegen.GenerateFleet(traces, tracegen.FleetOptions{Rows: 6000, MeanCallsPerRun: 10, Concurrent: 40,
		SegmentRows: 1500, RowGroupRows: 500, Agents: 3, Seed: 5, Start: recent.Add(17 * time.Minute), Span: 30 * time.Hour})
	require.NoError(t, err)
	segs, err := os.ReadDir(traces)
	require.NoError(t, err)
	require.Len(t, segs, 8, "both fleets' segments")
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()

	_, errOut, code := tracesRun(t, "serve", "--data", filepath.Join(dir, "data"), "--nats", url, "--http", "", "--rag-corpus", "",
		"--once", "--replay", traces, "--log-level", "warn")
	require.Equal(t, 0, code, errOut)

	at := func(h int) string { return recent.Add(time.Duration(h) * time.Hour).Format(time.RFC3339) }
	for _, w := range [][]string{
		{"--from", "2026-06-01", "--to", "2026-06-01"}, {"--from", "2026-06-02", "--to", "2026-06-03"},
		{"--from", at(7), "--to", at(29)}, {"--from", at(13)}, {"--to", at(25)}, {"--from", at(20), "--to", at(21)},
	} {
		for _, cmd := range []string{"cost-per-correct", "slo"} {
			direct, errOut, code := tracesRun(t, append([]string{cmd, "--traces", traces}, w...)...)
			require.Equal(t, 0, code, errOut)
			fleet, errOut, code := tracesRun(t, append([]string{cmd, "--nats", url}, w...)...)
			require.Equal(t, 0, code, errOut)
			if cmd == "slo" { // all but the last line, which names the source
				cut := func(s string) string { return s[:strings.LastIndex(strings.TrimRight(s, "\n"), "\n")] }
				require.Equal(t, cut(direct), cut(fleet), "%s %v", cmd, w)
				continue
			}
			require.Equal(t, tablesOf(t, direct), tablesOf(t, fleet), "%s %v", cmd, w)
		}
	}
	_, errOut, code = tracesRun(t, "cost-per-correct", "--nats", url, "--from", "2026-06-01T12:00:00Z")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "keeps whole")
	require.Contains(t, errOut, "2026-06-01")
	_, errOut, code = tracesRun(t, "cost-per-correct", "--nats", url, "--from", recent.Add(90*time.Minute).Format(time.RFC3339))
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "on the hour")
	// --last widens to the hour before, and says so; the report is the
	// direct one of the same window.
	fleet, errOut, code := tracesRun(t, "cost-per-correct", "--nats", url, "--last", "24h")
	require.Equal(t, 0, code, errOut)
	_, rest, ok := strings.Cut(errOut, "--last 24h starts at ")
	require.True(t, ok, "--last over --nats names where it starts: %q", errOut)
	from, _, _ := strings.Cut(rest, ",")
	require.True(t, strings.HasSuffix(from, ":00:00Z"), errOut)
	direct, errOut, code := tracesRun(t, "cost-per-correct", "--traces", traces, "--from", from)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, tablesOf(t, direct), tablesOf(t, fleet))
	require.NotEqual(t, tablesOf(t, direct), tablesOf(t, mustRun(t, "cost-per-correct", "--traces", traces)), "the last 24 hours hold part of the calls")
	// --last over a directory starts on the hour too: the same command
	// gives the same report either way.
	var js struct{ From string }
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, "cost-per-correct", "--traces", traces, "--last", "24h", "--json")), &js))
	require.True(t, strings.HasSuffix(js.From, ":00:00Z"), js.From)

	page := filepath.Join(dir, "report.html")
	_, errOut, code = tracesRun(t, "report", "--db", filepath.Join(dir, "data", "verdryx.db"), "--nats", url, "--from", at(13), "--out", page)
	require.Equal(t, 0, code, errOut)
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(html), "the merged trace partitions of the fleet at "+url)
	_, errOut, code = tracesRun(t, "report", "--db", filepath.Join(dir, "data", "verdryx.db"), "--last", "7d", "--out", page)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--from, --to and --last window the calls")
}

// mustRun runs the command and returns its output; it fails the test on
// a non-zero exit.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := tracesRun(t, args...)
	require.Equal(t, 0, code, errOut)
	return out
}
