package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/qualitylog"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
)

// TestStoreSyncGivesTheConsoleTheFleet: runs committed on two workers'
// stores and recorded on the quality log reach a standalone store through
// store sync, where the console's own SQL reads every one; a second sync
// applies nothing again; runs and baseline --nats see the log; a baseline
// recorded through --nats reaches the other stores.
func TestStoreSyncGivesTheConsoleTheFleet(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var want []string
	var workerDBs []string
	for w := range 2 {
		path := filepath.Join(dir, fmt.Sprintf("w%d.db", w))
		workerDBs = append(workerDBs, path)
		st, err := store.Open(ctx, path, store.Options{})
		require.NoError(t, err)
		for i := range 2 {
			id := fmt.Sprintf("run-w%d-%d", w, i)
			run := grading.Run{ID: id, EvalSetID: "set", Model: "stub", StartedAt: start.Add(time.Duration(w*2+i) * time.Minute),
				FinishedAt: start.Add(time.Hour), Scores: []grading.Score{{CaseID: "a", Value: 1, Tokens: 2}, {CaseID: "b", Value: 0.5}}}
			require.NoError(t, st.SaveRun(ctx, run))
			want = append([]string{id}, want...)
		}
		lg, err := qualitylog.Open(ctx, js, streams.DefaultSubjects(), st, qualitylog.Options{})
		require.NoError(t, err)
		n, err := lg.PublishPending(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.NoError(t, st.Close())
	}

	console := filepath.Join(dir, "console", "verdryx.db")
	_, _, code := runCLI(t, "store", "sync", "--nats", url, "--db", console)
	assert.Equal(t, 2, code, "a --db in a missing directory is refused")
	console = filepath.Join(dir, "console.db")
	out, errOut, code := runCLI(t, "store", "sync", "--nats", url, "--db", console)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "4 new, 0 already held")
	assert.Contains(t, out, "applied through record 4 of 4 (caught up")
	out, errOut, code = runCLI(t, "store", "sync", "--nats", url, "--db", console)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "0 new, 0 already held")

	// The console's SQL (docs/stack.md).
	db, err := sql.Open("sqlite", "file:"+console+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT id, model, started_at, finished_at FROM eval_runs ORDER BY started_at DESC`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var id, model, started string
		var finished sql.NullString
		require.NoError(t, rows.Scan(&id, &model, &started, &finished))
		got = append(got, id)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	assert.Equal(t, want, got)
	var n int
	var mean float64
	require.NoError(t, db.QueryRow(`SELECT COUNT(*), AVG(value) FROM scores WHERE run_id = ?`, want[0]).Scan(&n, &mean))
	assert.Equal(t, 2, n)
	assert.InDelta(t, 0.75, mean, 1e-12)

	_, errOut, code = runCLI(t, "runs", "--db", console)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "quality log: applied through record 4 of 4")

	// A baseline through --nats on worker 0's store reaches the console's.
	out, errOut, code = runCLI(t, "baseline", "--nats", url, "--db", workerDBs[0], "run-w1-0", "--label", "prod")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "Baseline bl-"), out)
	assert.NotContains(t, out, "was taken later")
	_, errOut, code = runCLI(t, "store", "sync", "--nats", url, "--db", console)
	require.Equal(t, 0, code, errOut)
	out, errOut, code = runCLI(t, "baselines", "--db", console)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "run-w1-0")
	assert.Contains(t, out, "prod")
}
