package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/bench/soak"
)

// TestBenchSoakSmall runs a short soak end to end: six simulated days of
// a second each, streams and state kept three days, the delivery of day 3
// replayed again on day 6 (after the one-day duplicate window: the
// stream stores it again, and the worker must recognize its rows by its
// row sets, or count them late where a day is already pruned), a takeover
// after the last day. The fleet's report of the days it holds must equal
// the direct reduction every day, and each of those days alone after the
// last (before the takeover: the worker prunes days on its own clock).
func TestBenchSoakSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)
	dir := t.TempDir()

	plot := filepath.Join(dir, "soak.svg")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "bench", "soak", "--json", "--days", "6", "--calls-per-day", "3000",
		"--day-seconds", "1", "--retention", "3", "--plot", plot)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var res soak.Result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res))
	require.Len(t, res.Series, 6)
	assert.Empty(t, res.Problems)
	var late int64
	for _, d := range res.Series {
		assert.True(t, d.Exact, "day %d: fleet %d calls, direct %d", d.Day, d.FleetCalls, d.DirectCalls)
		assert.Equal(t, d.DirectCalls, d.FleetCalls)
		assert.Positive(t, d.RSS)
		assert.Positive(t, d.DiskBytes)
		late += d.Late
	}
	assert.Positive(t, late, "some calls arrive late")
	assert.Equal(t, 3, res.Series[5].Replayed, "day 6 replays day 3 again")
	assert.Positive(t, res.Series[5].TakeoverSeconds, "a takeover after the last day")
	require.NotEmpty(t, res.Series[5].Takeovers, "the takeover's tries")
	loaded := 0.0
	for i, tk := range res.Series[5].Takeovers {
		assert.True(t, 0 < tk.Ready && tk.Ready <= tk.CaughtUp && tk.CaughtUp <= tk.Probed && tk.Probed <= tk.Total,
			"try %d: phases in order: %+v", i, tk)
		assert.GreaterOrEqual(t, tk.Load, 0.0, "try %d: the worker exports verdryx_partition_load_seconds", i)
		assert.Positive(t, tk.CPU, "try %d: the worker exports process_cpu_seconds_total", i)
		loaded = max(loaded, tk.Load)
	}
	// A probe replayed again within the one-second duplicate window is
	// dropped by the stream and loads nothing; the first try's is not.
	assert.Positive(t, loaded, "a probe loads partitions")
	// Days alone, newest first: a difference is only inconclusive where
	// the check began after the day's retention could have passed on the
	// worker's clock (the harness ran over on a loaded machine); the
	// newest day is checked first, well inside its retention.
	require.NotEmpty(t, res.DayReports)
	assert.Equal(t, 6, res.DayReports[0].Day, "newest day first")
	assert.True(t, res.DayReports[0].Exact, "the newest day alone: %+v", res.DayReports[0])
	for _, d := range res.DayReports {
		assert.True(t, d.Exact || d.Inconclusive, "day %d alone: fleet %d calls, direct %d", d.Day, d.FleetCalls, d.DirectCalls)
		if d.Exact {
			assert.Positive(t, d.FleetCalls)
		}
	}
	svg, err := os.ReadFile(plot)
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, string(svg), "worker RSS")
}
