package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/bench/e2e"
)

// buildBinary builds verdryx into a temporary directory for a test that
// runs it as child processes (the bench harnesses run their own binary as
// serve, replay and cost-per-correct), skipping the test under -short or
// without a go tool.
func buildBinary(ctx context.Context, t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs child processes")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build the binary")
	}
	bin := filepath.Join(t.TempDir(), "verdryx")
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// TestBenchWorkerSmall runs `bench worker` end to end on a small generated
// directory: the worker's report equals the direct one in every round,
// and the publishing floor (replay alone into a server of its own) stored
// every row of the directory, its CPU (replayer and server) measured and
// its bounds derived from it.
func TestBenchWorkerSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "bench", "worker", "--json", "--rows", "30000", "--rounds", "2", "--dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var res e2e.Result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "stdout:\n%s", stdout.String())
	require.True(t, res.Generated)
	require.InDelta(t, 30000, res.Rows, 300, "about the rows asked for")
	require.Len(t, res.Rounds, 2)
	for _, rd := range res.Rounds {
		assert.True(t, rd.ReportsEqual, "round %d", rd.Round)
		assert.Equal(t, res.Rows, rd.FloorRowsNew, "round %d: the floor's replay stores every row, into a fresh server", rd.Round)
		assert.Positive(t, rd.FloorSeconds, "round %d", rd.Round)
		assert.InDelta(t, rd.FloorSeconds/rd.DirectSeconds, rd.FloorRatio, 1e-9, "round %d", rd.Round)
		assert.Positive(t, rd.StoreBytes, "round %d", rd.Round)
		if runtime.GOOS == "linux" {
			assert.Positive(t, rd.FloorServerCPU, "round %d: the server's CPU is the bench process's", rd.Round)
			assert.Greater(t, rd.FloorCPU, rd.FloorServerCPU, "round %d: the replayer's CPU adds to it", rd.Round)
		}
	}
	assert.Equal(t, max(res.Rounds[0].WorkerPeakRSS, res.Rounds[1].WorkerPeakRSS), res.WorkerPeakRSS, "the worst round's peak RSS")
	store := max(res.Rounds[0].StoreBytes, res.Rounds[1].StoreBytes)
	assert.InDelta(t, float64(store)/float64(res.ParquetBytes), res.StorePerParquet, 1e-12, "the worst round's store")
	assert.Equal(t, runtime.NumCPU(), res.Cores)
	assert.InDelta(t, min(res.Rounds[0].FloorSeconds, res.Rounds[1].FloorSeconds), res.FloorSeconds, 1e-9, "the best floor")
	if runtime.GOOS == "linux" {
		floorCPU := min(res.Rounds[0].FloorCPU, res.Rounds[1].FloorCPU)
		assert.InDelta(t, floorCPU/float64(res.Cores)/res.DirectSeconds, res.FloorCPUBound, 1e-9)
		workerCPU := min(res.Rounds[0].WorkerCPU, res.Rounds[1].WorkerCPU)
		assert.InDelta(t, workerCPU/float64(res.Cores)/res.DirectSeconds, res.WorkerCPUBound, 1e-9)
	}
}
