package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/bench/chaos"
)

// runChaosBinary builds verdryx into a temp dir and runs `verdryx bench
// chaos` through it (the harness runs that same binary as its serve,
// replay and cost-per-correct children). It returns the raw JSON, the
// decoded result and the exit code.
func runChaosBinary(t *testing.T, args ...string) (map[string]any, chaos.Result, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := buildBinary(ctx, t)

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "chaos", "--json",
		"--evalset", filepath.Join("..", "..", "testdata", "grimoire", "evalset.json")}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	require.Contains(t, []int{0, 1}, code, "exit %d (2 means the harness could not run); stderr:\n%s", code, stderr.String())
	var raw map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &raw), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var res chaos.Result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res))
	t.Logf("bench chaos %v: exit %d\n%s", args, code, stdout.String())
	return raw, res, code
}

// TestBenchChaosReport runs a small chaos run end to end (SIGKILLs of
// serve while it replays and grades), checks that the JSON is complete and
// self-consistent, and requires exactly once: nothing lost or doubled, the
// report equal to cost-per-correct's, every eval request run once and every
// chain verified without an event emitted twice.
func TestBenchChaosReport(t *testing.T) {
	raw, res, code := runChaosBinary(t, "--kills", "2", "--records", "5000", "--evals", "3", "--seed", "7", "--drain-timeout", "75s") // more than the eval AckWait (30 s): a request in flight at a kill is redelivered only after it

	for _, k := range []string{"kills", "records", "lost", "duplicated", "eval_requests", "eval_runs", "chains_verified",
		"chains", "elapsed_s", "problems", "ok", "report_diffs", "eval_runs_by_request", "direct_calls", "store_calls"} {
		assert.Contains(t, raw, k)
	}
	assert.Equal(t, 2, res.Kills)
	assert.Equal(t, 1, res.GracefulRestarts)
	assert.Equal(t, 4, res.ServeStarts, "2 kills + 1 graceful restart + the final start")
	assert.EqualValues(t, 5000, res.Records)
	assert.EqualValues(t, 5000, res.DirectCalls, "every generated row is in the directory report")
	assert.Equal(t, 3, res.EvalRequests)
	assert.Len(t, res.EvalRunsByRequest, 3)
	sum := 0
	for _, n := range res.EvalRunsByRequest {
		sum += n
	}
	assert.Equal(t, res.EvalRuns, sum)
	assert.GreaterOrEqual(t, res.Lost, int64(0))
	assert.GreaterOrEqual(t, res.Duplicated, int64(0))
	assert.Equal(t, res.DirectCalls-res.Lost+res.Duplicated, res.StoreCalls, "store = directory - lost + duplicated")
	assert.GreaterOrEqual(t, len(res.Chains), 2, "the events file and this instance's subject")
	verified := 0
	for _, c := range res.Chains {
		if c.OK {
			verified++
		}
	}
	assert.Equal(t, verified, res.ChainsVerified)
	assert.Positive(t, res.ElapsedS)
	assert.Empty(t, res.Dir, "the work directory is removed without --keep")

	once := true
	for _, n := range res.EvalRunsByRequest {
		once = once && n == 1
	}
	wantOK := res.Lost == 0 && res.Duplicated == 0 && len(res.ReportDiffs) == 0 && once &&
		len(res.EvalNotRecorded) == 0 && res.ChainsVerified == len(res.Chains)
	assert.Equal(t, wantOK, res.OK)
	if res.OK {
		assert.Equal(t, 0, code)
	} else {
		assert.Equal(t, 1, code)
		assert.NotEmpty(t, res.Problems, "a failed run says why")
	}

	// Exactly once.
	assert.Zero(t, res.Lost, "lost calls")
	assert.Zero(t, res.Duplicated, "duplicated calls")
	assert.Empty(t, res.ReportDiffs)
	assert.True(t, once, "every eval request ran once: %v", res.EvalRunsByRequest)
	for _, c := range res.Chains {
		assert.Zero(t, c.DuplicateEvents, "chain %s", c.Name)
	}
	assert.True(t, res.Drained)
	assert.True(t, res.OK, "problems: %v", res.Problems)
}

// TestBenchChaosClusterStaysUp: the workers against a three-node cluster,
// a node down across every worker stop and restart: no worker exits by
// itself, and counting stays exact.
func TestBenchChaosClusterStaysUp(t *testing.T) {
	raw, res, code := runChaosBinary(t, "--cluster", "3", "--kills", "1", "--records", "3000", "--evals", "2", "--seed", "5", "--drain-timeout", "75s")
	for _, k := range []string{"cluster_nodes", "node_stops", "unplanned_exits"} {
		assert.Contains(t, raw, k)
	}
	assert.Equal(t, 3, res.ClusterNodes)
	assert.Equal(t, 2, res.NodeStops, "one node stop per worker stop (a kill and a graceful restart)")
	assert.Zero(t, res.UnplannedExits, "problems: %v", res.Problems)
	assert.Zero(t, res.Lost)
	assert.Zero(t, res.Duplicated)
	assert.Empty(t, res.ReportDiffs)
	assert.GreaterOrEqual(t, len(res.Chains), 2, "the events file and this instance's subject on the cluster")
	assert.True(t, res.OK, "problems: %v", res.Problems)
	assert.Equal(t, 0, code)
}
