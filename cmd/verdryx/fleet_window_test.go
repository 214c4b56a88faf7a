package main

import (
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

// TestReportsByDayOverNATS: three days of traces replayed to a NATS
// server and drained by `serve --once` (which folds the first days out of
// memory); `cost-per-correct`, `slo` and `report` over `--nats` for a day
// or two give the direct reduction of the same days, and a window off
// midnight UTC is refused.
func TestReportsByDayOverNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker over a replay")
	}
	dir := t.TempDir()
	traces := filepath.Join(dir, "traces")
	require.NoError(t, os.Mkdir(traces, 0o755))
	_, err := tracegen.GenerateFleet(traces, tracegen.FleetOptions{Rows: 6000, MeanCallsPerRun: 10, Concurrent: 40,
		SegmentRows: 1500, RowGroupRows: 500, Agents: 3, Seed: 4, Start: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), Span: 72 * time.Hour})
	require.NoError(t, err)
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()

	_, errOut, code := tracesRun(t, "serve", "--data", filepath.Join(dir, "data"), "--nats", url, "--http", "", "--rag-corpus", "",
		"--once", "--replay", traces, "--log-level", "warn")
	require.Equal(t, 0, code, errOut)

	for _, w := range [][]string{{"--from", "2026-06-01", "--to", "2026-06-01"}, {"--from", "2026-06-02", "--to", "2026-06-03"}, {"--from", "2026-06-03"}} {
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
	require.Contains(t, errOut, "midnight UTC")
	// --last widens to the midnight before, and says so; the report is
	// the direct one of the same whole days.
	fleet, errOut, code := tracesRun(t, "cost-per-correct", "--nats", url, "--last", "100000w")
	require.Equal(t, 0, code, errOut)
	_, rest, ok := strings.Cut(errOut, "--last 100000w over --nats starts at ")
	require.True(t, ok, "--last over --nats names where it starts: %q", errOut)
	from, _, _ := strings.Cut(rest, ",")
	require.True(t, strings.HasSuffix(from, "T00:00:00Z"), errOut)
	direct, errOut, code := tracesRun(t, "cost-per-correct", "--traces", traces, "--from", from)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, tablesOf(t, direct), tablesOf(t, fleet))

	page := filepath.Join(dir, "report.html")
	_, errOut, code = tracesRun(t, "report", "--db", filepath.Join(dir, "data", "verdryx.db"), "--nats", url, "--from", "2026-06-02", "--out", page)
	require.Equal(t, 0, code, errOut)
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(html), "the merged trace partitions of the fleet at "+url)
	_, errOut, code = tracesRun(t, "report", "--db", filepath.Join(dir, "data", "verdryx.db"), "--last", "7d", "--out", page)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--from, --to and --last window the calls")
}
