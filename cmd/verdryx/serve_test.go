package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracegen"
	"github.com/verdryx/verdryx/worker"
)

// serveOnce runs `serve --once` on its own data dir and loopback port.
func serveOnce(t *testing.T, data string, args ...string) (string, string, int) {
	t.Helper()
	base := []string{"serve", "--once", "--data", data, "--nats-listen", "127.0.0.1:0", "--http", "", "--rag-corpus", ""}
	return runCLI(t, append(base, args...)...)
}

// tableOf returns the outcome table of a cost report (its first lines up to
// the "cost per resolved outcome" line).
func tableOf(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, "        outcome")
	require.GreaterOrEqual(t, i, 0, "no report in:\n%s", out)
	rest := out[i:]
	j := strings.Index(rest, "cost per resolved outcome")
	require.GreaterOrEqual(t, j, 0, "no resolved line in:\n%s", out)
	k := strings.Index(rest[j:], "\n")
	return rest[:j+k]
}

func TestServeOnceEqualStepsMatchCostPerCorrect(t *testing.T) {
	dir := t.TempDir()
	call := func(run string, step uint32, decision string, cost int64, tag string) calls.Call {
		return calls.Call{RunID: run, HasRunID: true, Step: step, HasStep: true, Decision: decision, CostMicroUSD: cost, Model: "m", Outcome: tag}
	}
	// r1's step 2 is a blocked call and its allowed retry: both count, and
	// the retry (read later) carries the outcome.
	fx := tracegen.Fixture{Name: "equal-steps", Segments: []tracegen.FixtureSegment{{
		Name: tracegen.SegmentName(1, 1, 0), Layout: tracegen.Current, CorruptRowGroup: -1,
		Calls: []calls.Call{
			call("r1", 1, "allow", 100, ""),
			call("r1", 2, "budget_exceeded", 400, "abandoned"),
			call("r1", 2, "allow", 200, "case_resolved"),
			call("r2", 1, "allow", 150, "case_resolved"),
			call("r2", 1, "allow", 400, ""),
		},
	}}}
	require.NoError(t, tracegen.WriteFixture(dir, fx))
	want, _, code := runCLI(t, "cost-per-correct", "--traces", dir)
	require.Equal(t, 0, code)
	require.Contains(t, want, "case_resolved     2      5        1")

	data := t.TempDir()
	out, errOut, code := serveOnce(t, data, "--replay", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, tableOf(t, want), tableOf(t, out))

	// A restart replaying the same directory counts nothing twice.
	out, errOut, code = serveOnce(t, data, "--replay", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, tableOf(t, want), tableOf(t, out))
}

func TestServeOnceCorruptSegmentContributesNothingAndFails(t *testing.T) {
	dir, err := filepath.Abs("../../testdata/traces/corrupt")
	require.NoError(t, err)
	want, _, code := runCLI(t, "cost-per-correct", "--traces", dir)
	require.Equal(t, 0, code)
	out, errOut, code := serveOnce(t, t.TempDir(), "--replay", dir)
	require.Equal(t, exitFailure, code, "a failed segment fails the command")
	require.Contains(t, errOut, "calls-9-20-00000002.parquet", "the failed segment is named")
	require.Equal(t, tableOf(t, want), tableOf(t, out), "the corrupt segment is rolled back whole, as cost-per-correct does")
}

// TestServeOnceMatchesCostPerCorrectOnEveryFixture: the worker counts
// exactly what the direct reduction counts, on every shipped trace shape
// (old and nullable schemas, no run_id, blocked calls, row groups, split
// runs, agent ids that are not canonical).
func TestServeOnceMatchesCostPerCorrectOnEveryFixture(t *testing.T) {
	root, err := filepath.Abs("../../testdata/traces")
	require.NoError(t, err)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "corrupt" {
			continue
		}
		n++
		dir := filepath.Join(root, e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			want, _, code := runCLI(t, "cost-per-correct", "--traces", dir)
			require.Equal(t, 0, code)
			out, errOut, code := serveOnce(t, t.TempDir(), "--replay", dir)
			require.Equal(t, 0, code, errOut)
			require.Equal(t, tableOf(t, want), tableOf(t, out))
		})
	}
	require.GreaterOrEqual(t, n, 8, "every fixture directory is checked")
}

// TestServeAskCorpus: with no --rag-corpus, serve answers RAG asks from the
// active index generation, saying with which embedder, and serves none
// (logged at info) while the data directory holds no generation;
// --rag-corpus wins.
func TestServeAskCorpus(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	data := t.TempDir()
	ctx := context.Background()
	a, err := worker.OpenAsks(ctx, worker.Options{DataDir: data, Logger: logger})
	require.NoError(t, err)
	gens, ok := a.(*worker.Generations)
	require.True(t, ok, "asks follow the active generation")
	assert.Empty(t, gens.Generation())
	select {
	case <-gens.Ready():
		t.Fatal("ready with no generation")
	default:
	}
	assert.Contains(t, logs.String(), `level=INFO msg="rag asks disabled: no Options.RAGCorpus and no index generation with a recorded corpus; enabled when one is activated"`)

	_, errOut, code := ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data)
	require.Equal(t, exitOK, code, errOut)
	a, err = worker.OpenAsks(ctx, worker.Options{DataDir: data, Logger: logger})
	require.NoError(t, err)
	require.NotNil(t, a)
	assert.Regexp(t, `msg="rag asks answered from the active index generation" generation=[0-9a-f]{32} corpus=grimoire-v1 embedder=offline-hash/hash-v1/d1024/w1-b2-c3..5 generator=offline-extractive`, logs.String())
	rec, err := a.AskWith(ctx, "How many grains of pearl salt for moonpetal?", rag.AskOptions{TopK: 3})
	require.NoError(t, err)
	assert.Len(t, rec.RetrievedIDs, 3)

	a, err = worker.OpenAsks(ctx, worker.Options{DataDir: data, Logger: logger, RAGCorpus: ragCorpusPath})
	require.NoError(t, err)
	require.NotNil(t, a)
	assert.Contains(t, logs.String(), `msg="rag asks answered from Options.RAGCorpus in memory"`)
	a, err = worker.OpenAsks(ctx, worker.Options{DataDir: data, Logger: logger, RAGCorpus: filepath.Join(data, "nope.json")})
	require.NoError(t, err)
	assert.Nil(t, a)
}

// serveOptions parses serve's flags args into the worker's options.
func serveOptions(t *testing.T, args ...string) (worker.Options, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f := addServeFlags(fs)
	require.NoError(t, fs.Parse(args))
	return f.options(t.TempDir(), slog.New(slog.DiscardHandler), nil)
}

// TestServeHugePagesFollowOnce: --huge-pages auto hints the heap for a
// run that ends when drained (--once) and not for a long-running one;
// on and off say so whatever --once.
func TestServeHugePagesFollowOnce(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--once"}, true},
		{[]string{"--once", "--huge-pages", "off"}, false},
		{[]string{"--huge-pages", "on"}, true},
		{[]string{"--huge-pages", "auto"}, false},
	} {
		o, err := serveOptions(t, tc.args...)
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.want, o.HugePages, "%v", tc.args)
	}
}

// TestServeHoursKept: --hours-kept takes a duration (two days by
// default), the retention, or off (negative: every call by the day).
func TestServeHoursKept(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 48 * time.Hour},
		{[]string{"--hours-kept", "retention"}, streams.DefaultRetention},
		{[]string{"--hours-kept", "retention", "--retention", "240h"}, 240 * time.Hour},
		{[]string{"--hours-kept", "off"}, -1},
		{[]string{"--hours-kept", "36h"}, 36 * time.Hour},
		{[]string{"--hours-kept", "2d"}, 48 * time.Hour},
	} {
		o, err := serveOptions(t, tc.args...)
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.want, o.HoursKept, "%v", tc.args)
	}
	for _, v := range []string{"", "0d", "always"} {
		_, err := serveOptions(t, "--hours-kept="+v)
		require.ErrorContains(t, err, "--hours-kept", "%q", v)
	}
}
