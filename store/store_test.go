package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "verdryx.db")
	st, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st, path
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func sampleRun(id, agent string, start time.Time, vals ...float64) grading.Run {
	r := grading.Run{ID: id, EvalSetID: "set", EvalSetDigest: "sha256:d", AgentID: agent, Model: "stub", Version: "test",
		StartedAt: start, FinishedAt: start.Add(time.Second),
		Provenance: grading.Provenance{EvalSetDigest: "sha256:d", CaseDigests: map[string]string{"a": "x"},
			Graders: map[string]map[string]any{"exact": {}}, Model: "stub", Version: "test"}}
	for i, v := range vals {
		r.Scores = append(r.Scores, grading.Score{CaseID: string(rune('a' + i)), Grader: "exact", Value: v, Tokens: 3, CostUSD: 0.001,
			Duration: time.Millisecond, Checks: []grader.Check{{Name: "exact", OK: v == 1, Detail: "d"}}, Output: "out"})
	}
	return r
}

func TestOpenConfiguresAndMigrates(t *testing.T) {
	st, _ := openTest(t)
	ctx := context.Background()
	var v int
	require.NoError(t, st.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v))
	assert.Equal(t, SchemaVersion(), v)
	var mode string
	require.NoError(t, st.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "wal", mode)
	var fk, busy int
	require.NoError(t, st.db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))
	assert.Equal(t, 1, fk)
	require.NoError(t, st.db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy))
	assert.Equal(t, 5000, busy)
	var page, ckpt, limit int
	require.NoError(t, st.db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&page))
	assert.Equal(t, pageSize, page, "a new file gets large pages")
	require.NoError(t, st.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&ckpt))
	assert.Equal(t, 64, ckpt)
	require.NoError(t, st.db.QueryRowContext(ctx, "PRAGMA journal_size_limit").Scan(&limit))
	assert.Equal(t, 4<<20, limit)

	_, err := st.db.ExecContext(ctx, `INSERT INTO baselines (id, eval_run_id, mean_score, created_at) VALUES ('b', 'no-such-run', 1, 'x')`)
	assert.Error(t, err, "foreign keys are enforced")
}

func TestOpenIsIdempotentAndRefusesNewer(t *testing.T) {
	ctx := context.Background()
	st, path := openTest(t)
	require.NoError(t, st.SaveRun(ctx, sampleRun("r1", "", t0, 1)))
	require.NoError(t, st.Close())

	again, err := Open(ctx, path, Options{})
	require.NoError(t, err, "reopening an up-to-date store runs no migration")
	_, err = again.Run(ctx, "r1")
	require.NoError(t, err)
	_, err = again.db.ExecContext(ctx, "PRAGMA user_version = 99")
	require.NoError(t, err)
	require.NoError(t, again.Close())

	_, err = Open(ctx, path, Options{})
	require.ErrorIs(t, err, ErrSchemaVersion)
	assert.Contains(t, err.Error(), "the file is version 99, this build reads version 1 only")

	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	var v int
	require.NoError(t, raw.QueryRow("PRAGMA user_version").Scan(&v))
	assert.Equal(t, 99, v, "a refused store is left as it was")
}

func TestOpenCreatesTheSchemaInAFileWithoutOne(t *testing.T) {
	// A file at version 0 (another program's tables, none of verdryx's)
	// gets the schema.
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = raw.Exec("CREATE TABLE unrelated (x INTEGER)")
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	st, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	defer st.Close()
	var n int
	require.NoError(t, st.db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name IN ('eval_runs','scores','unmeasured','baselines','unrelated')").Scan(&n))
	assert.Equal(t, 5, n)
}

func TestSaveAndLoadRun(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	run := sampleRun("r1", "agent://a.example/b", t0, 1, 0.5, 0)
	run.Scores[1].Unmeasured = "judge: unparseable"
	run.Scores[1].Value = 0
	run.Provenance.CorpusDigest = "sha256:c"
	run.Provenance.IndexGeneration = "gen-1"
	require.NoError(t, st.SaveRun(ctx, run))
	got, err := st.Run(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, run.Scores, got.Scores, "graded and unmeasured come back in case order")
	assert.Equal(t, run.Provenance, got.Provenance)
	assert.True(t, run.StartedAt.Equal(got.StartedAt))
	assert.Equal(t, run.AgentID, got.AgentID)

	_, err = st.Run(ctx, "nope")
	assert.ErrorIs(t, err, ErrNotFound)

	runs, err := st.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, 3, runs[0].Cases)
	assert.Equal(t, 1, runs[0].Unmeasured)
	require.NotNil(t, runs[0].MeanScore)
	assert.InDelta(t, 0.5, *runs[0].MeanScore, 1e-12, "mean over graded cases only")
	assert.InDelta(t, 0.003, runs[0].CostUSD, 1e-12, "cost counts every case")
}

func TestSaveRunIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	run := sampleRun("r1", "", t0, 1, 1, 1, 1)
	run.Scores[3].CaseID = run.Scores[0].CaseID // the fourth insert fails mid-save
	err := st.SaveRun(ctx, run)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "case a")
	for _, table := range []string{"eval_runs", "scores", "unmeasured"} {
		var n int
		require.NoError(t, st.db.QueryRow("SELECT COUNT(*) FROM "+table).Scan(&n))
		assert.Zero(t, n, "%s keeps nothing of the failed save", table)
	}

	bad := sampleRun("r2", "", t0, 1)
	bad.Scores[0].Value = 1.5 // violates the CHECK after the run row went in
	require.Error(t, st.SaveRun(ctx, bad))
	_, err = st.Run(ctx, "r2")
	assert.ErrorIs(t, err, ErrNotFound)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, st.SaveRun(cctx, sampleRun("r3", "", t0, 1)))
	_, err = st.Run(ctx, "r3")
	assert.ErrorIs(t, err, ErrNotFound)

	require.NoError(t, st.SaveRun(ctx, sampleRun("r4", "", t0, 1)), "the store is usable after a failed save")
}

func TestRecentRunsAndBaselines(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	for i, id := range []string{"r1", "r2", "r3", "r4"} {
		require.NoError(t, st.SaveRun(ctx, sampleRun(id, "", t0.Add(time.Duration(i)*time.Minute), 1, 0)))
	}
	other := sampleRun("other-model", "", t0.Add(time.Hour), 1)
	other.Model = "claude"
	require.NoError(t, st.SaveRun(ctx, other))

	runs, err := st.RecentRuns(ctx, "set", "stub", 2, "r4")
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, "r3", runs[0].ID, "most recent first, excluded run skipped, other model left out")
	assert.Equal(t, "r2", runs[1].ID)

	b, err := st.CreateBaseline(ctx, "r1", "v1", t0)
	require.NoError(t, err)
	assert.Equal(t, 0.5, b.MeanScore)
	got, err := st.Baseline(ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, b, got)
	_, err = st.Baseline(ctx, "nope")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = st.CreateBaseline(ctx, "nope", "", t0)
	assert.ErrorIs(t, err, ErrNotFound)

	unmeasured := sampleRun("r5", "", t0, 0)
	unmeasured.Scores[0].Unmeasured = "down"
	require.NoError(t, st.SaveRun(ctx, unmeasured))
	_, err = st.CreateBaseline(ctx, "r5", "", t0)
	assert.ErrorIs(t, err, ErrUnmeasured, "no baseline of an unmeasured mean")
}

func TestAgentScores(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	require.NoError(t, st.SaveRun(ctx, sampleRun("r1", "agent://a.example/x", t0, 1, 0.5)))
	require.NoError(t, st.SaveRun(ctx, sampleRun("r2", "", t0, 0, 0)))
	r3 := sampleRun("r3", "agent://a.example/x", t0.Add(time.Minute), 0.25, 1)
	r3.Scores[1].Unmeasured = "down"
	require.NoError(t, st.SaveRun(ctx, r3))
	require.NoError(t, st.SaveRun(ctx, sampleRun("r4", "agent://a.example/y", t0, 0.75)))
	got, err := st.AgentScores(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string][]float64{
		"agent://a.example/x": {1, 0.5, 0.25},
		"agent://a.example/y": {0.75},
	}, got, "runs without an agent belong to nobody; unmeasured cases are not scores")
}

func TestResolvePath(t *testing.T) {
	env := func(vars map[string]string, dirs ...string) Env {
		return Env{
			Getenv:  func(k string) string { return vars[k] },
			HomeDir: func() (string, error) { return "/home/op", nil },
			DirExists: func(p string) bool {
				for _, d := range dirs {
					if d == p {
						return true
					}
				}
				return false
			},
		}
	}
	for _, tc := range []struct {
		name string
		flag string
		data string
		env  Env
		want string
	}{
		{"flag wins", "/x/flag.db", "/d", env(map[string]string{"VERDRYX_DB": "/x/env.db"}, "/home/op/.taipan"), "/x/flag.db"},
		{"VERDRYX_DB even if missing", "", "/d", env(map[string]string{"VERDRYX_DB": "/missing/dir/env.db"}, "/home/op/.taipan"), "/missing/dir/env.db"},
		{"TAIPAN_HOME when it exists", "", "/d", env(map[string]string{"TAIPAN_HOME": "/opt/taipan"}, "/opt/taipan"), "/opt/taipan/verdryx.db"},
		{"TAIPAN_HOME missing falls through", "", "/d", env(map[string]string{"TAIPAN_HOME": "/opt/taipan"}, "/home/op/.taipan"), "/d/verdryx.db"},
		{"default ~/.taipan when it exists", "", "/d", env(nil, "/home/op/.taipan"), "/home/op/.taipan/verdryx.db"},
		{"nothing installed: the data directory", "", "/d", env(nil), "/d/verdryx.db"},
		{"nothing installed, no data directory", "", "", env(nil), "verdryx.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ResolvePath(tc.flag, tc.data, tc.env))
		})
	}
}

func TestOpenCreatesNoDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "verdryx.db")
	_, err := Open(context.Background(), path, Options{})
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrSchemaVersion))
	assert.NoDirExists(t, filepath.Dir(path))
}

func TestRunsByRequest(t *testing.T) {
	st, _ := openTest(t)
	ctx := context.Background()
	for i, req := range []string{"req-a", "req-b", "req-a", ""} {
		r := sampleRun(string(rune('1'+i)), "agent://a.example/x", t0.Add(time.Duration(i)*time.Minute), 1)
		r.RequestID = req
		require.NoError(t, st.SaveRun(ctx, r))
	}
	have, err := st.RunsByRequest(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"req-a": 2, "req-b": 1}, have)
}

func TestTimesAreStoredInTheStoreTimeFormat(t *testing.T) {
	st, _ := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 13, 4, 5, 120, time.FixedZone("X", 3600))
	_, err := st.ClaimRequest(ctx, "req-t", "run-t", at)
	require.NoError(t, err)
	var raw string
	require.NoError(t, st.db.QueryRowContext(ctx, `SELECT done_at FROM eval_requests WHERE request_id = 'req-t'`).Scan(&raw))
	require.Equal(t, "2026-11-30T12:04:05.000000120Z", raw)
	back, err := parseTime(raw)
	require.NoError(t, err)
	require.True(t, at.Equal(back))
}

func TestBaselineLabels(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	for i, id := range []string{"r1", "r2"} {
		require.NoError(t, st.SaveRun(ctx, sampleRun(id, "", t0.Add(time.Duration(i)*time.Minute), 1, 0.5, 0)))
	}

	b1, created, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1", Label: "prod"}, t0)
	require.NoError(t, err)
	assert.True(t, created)
	again, created, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1", Label: "prod"}, t0.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, created, "same run, same label: idempotent")
	assert.Equal(t, b1, again, "the same baseline id")

	_, _, err = st.PutBaseline(ctx, BaselineSpec{RunID: "r2", Label: "prod"}, t0)
	require.ErrorIs(t, err, ErrLabelTaken, "a label is not moved silently")
	assert.Contains(t, err.Error(), "--force")
	byLabel, err := st.Baseline(ctx, "prod")
	require.NoError(t, err)
	assert.Equal(t, b1, byLabel, "a label resolves like an id")

	b2, created, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r2", Label: "prod", Force: true}, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, b1.ID, b2.ID)
	byLabel, err = st.Baseline(ctx, "prod")
	require.NoError(t, err)
	assert.Equal(t, "r2", byLabel.RunID, "--force moves the label")
	old, err := st.Baseline(ctx, b1.ID)
	require.NoError(t, err, "the old baseline stays reachable by id")
	assert.Empty(t, old.Label)

	u1, created, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1"}, t0)
	require.NoError(t, err)
	assert.False(t, created, "r1 already has an unlabelled baseline (the one the label left)")
	assert.Equal(t, b1.ID, u1.ID)

	_, _, err = st.PutBaseline(ctx, BaselineSpec{RunID: "r1", Label: "bl-20260101T000000Z-00000000"}, t0)
	assert.ErrorContains(t, err, "may not start with")

	list, err := st.BaselineList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "no row for the idempotent calls")
	assert.Equal(t, b1.ID, list[0].ID)
	assert.Equal(t, b2.ID, list[1].ID)
	assert.Equal(t, "prod", list[1].Label)
	assert.Equal(t, "r2", list[1].RunID)
	assert.Equal(t, 3, list[1].Cases, "graded and unmeasured cases of the run")
}

func TestLabelsAreUnique(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	require.NoError(t, st.SaveRun(ctx, sampleRun("r1", "", t0, 1)))
	_, err := st.db.ExecContext(ctx, `INSERT INTO baselines (id, eval_run_id, mean_score, created_at, label) VALUES
		('bl-a','r1',1,'x','v1'), ('bl-b','r1',1,'x','')`)
	require.NoError(t, err)
	_, err = st.db.ExecContext(ctx, `UPDATE baselines SET label = 'v1' WHERE id = 'bl-b'`)
	assert.Error(t, err, "a label names one baseline")
}
