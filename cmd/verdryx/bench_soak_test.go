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

	"github.com/verdryx/verdryx/internal/bench/soak"
)

// TestBenchSoakSmall runs a short soak end to end: six simulated days of
// a second each, streams kept two days, the delivery of day 2 replayed
// again on day 5 (after the one-day duplicate window and the two-day
// retention: only the worker's state can recognize it), a takeover after
// the last day. Every day's fleet report must equal the direct reduction.
func TestBenchSoakSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("soak builds the binary and runs child processes")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "verdryx")
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	plot := filepath.Join(dir, "soak.svg")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "bench", "soak", "--json", "--days", "6", "--calls-per-day", "3000",
		"--day-seconds", "1", "--retention", "2", "--plot", plot)
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
	assert.Equal(t, 2, res.Series[5].Replayed, "day 5 replays day 2 again")
	assert.Positive(t, res.Series[5].TakeoverSeconds, "a takeover after the last day")
	svg, err := os.ReadFile(plot)
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, string(svg), "worker RSS")
}
