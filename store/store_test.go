package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
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
	assert.Equal(t, 1, v, "the Python verdryx's user_version, which it checks")
	require.NoError(t, st.db.QueryRowContext(ctx, "SELECT version FROM verdryx_schema").Scan(&v))
	assert.Equal(t, schemaVersion, v)
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
	assert.Contains(t, err.Error(), "user_version 99 is newer")

	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	var v int
	require.NoError(t, raw.QueryRow("PRAGMA user_version").Scan(&v))
	assert.Equal(t, 99, v, "a refused store is left as it was")
}

func TestOpenRefusesAFileOfAnotherShape(t *testing.T) {
	// Another program's tables: refused by name, nothing added.
	path := filepath.Join(t.TempDir(), "other.db")
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.Exec("CREATE TABLE unrelated (x INTEGER)")
	require.NoError(t, err)
	_, err = Open(context.Background(), path, Options{})
	require.ErrorIs(t, err, ErrUnknownShape)
	assert.Contains(t, err.Error(), "table unrelated is neither")
	var n int
	require.NoError(t, raw.QueryRow("SELECT COUNT(*) FROM sqlite_master").Scan(&n))
	assert.Equal(t, 1, n, "nothing was added")
}

func TestSaveAndLoadRun(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	run := sampleRun("r1", "agent://a.example/b", t0, 1, 0.5, 0)
	run.Scores[1].Unmeasured = "judge: unparseable"
	run.Scores[1].Reason = grading.ReasonJudgeError
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
	run.Scores[3].Value = math.NaN() // the fourth insert fails mid-save
	err := st.SaveRun(ctx, run)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "case d")
	for _, table := range []string{"eval_runs", "scores", "unanswered"} {
		var n int
		require.NoError(t, st.db.QueryRow("SELECT COUNT(*) FROM "+table).Scan(&n))
		assert.Zero(t, n, "%s keeps nothing of the failed save", table)
	}

	bad := sampleRun("r2", "", t0, 1)
	bad.Scores[0].Value = 1.5 // refused after the run row went in
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
	unmeasured.Scores[0].Unmeasured, unmeasured.Scores[0].Reason = "down", grading.ReasonModelError
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
	r3.Scores[1].Unmeasured, r3.Scores[1].Reason = "down", grading.ReasonModelError
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

func TestTimesAreStoredAsThePythonVerdryxWritesThem(t *testing.T) {
	st, _ := openTest(t)
	ctx := context.Background()
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 11, 30, 13, 4, 5, 120, time.FixedZone("X", 3600)), "2026-11-30T12:04:05+00:00"},
		{time.Date(2026, 11, 30, 12, 4, 5, 123456789, time.UTC), "2026-11-30T12:04:05.123456+00:00"},
		{time.Date(2026, 11, 30, 12, 4, 5, 120000, time.UTC), "2026-11-30T12:04:05.000120+00:00"},
	} {
		id := "req-" + tc.want
		_, err := st.ClaimRequest(ctx, id, "run-t", tc.at)
		require.NoError(t, err)
		var raw string
		require.NoError(t, st.db.QueryRowContext(ctx, `SELECT done_at FROM eval_requests WHERE request_id = ?`, id).Scan(&raw))
		require.Equal(t, tc.want, raw, "datetime.astimezone(UTC).isoformat()")
		back, err := parseTime(raw)
		require.NoError(t, err)
		require.True(t, tc.at.Truncate(time.Microsecond).Equal(back))
	}
	// In one store the strings sort as the times do, with or without
	// microseconds.
	assert.Less(t, formatTime(t0), formatTime(t0.Add(time.Microsecond)))
	assert.Less(t, formatTime(t0.Add(time.Microsecond)), formatTime(t0.Add(time.Second)))
}

func TestBaselineLabels(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	for i, id := range []string{"r1", "r2"} {
		require.NoError(t, st.SaveRun(ctx, sampleRun(id, "", t0.Add(time.Duration(i)*time.Minute), 1, 0.5, 0)))
	}

	p1, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1", Label: "prod"}, t0)
	require.NoError(t, err)
	assert.True(t, p1.Created)
	again, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1", Label: "prod"}, t0.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, again.Created, "same run, same label: idempotent")
	assert.Equal(t, p1.Baseline, again.Baseline, "the same baseline id")

	// The console labels every admission of an agent alike: the label
	// moves to the newest baseline, and the older one keeps id and label.
	p2, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r2", Label: "prod"}, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, p2.Created)
	require.NotNil(t, p2.Previous)
	assert.Equal(t, p1.Baseline, *p2.Previous)
	byLabel, err := st.Baseline(ctx, "prod")
	require.NoError(t, err)
	assert.Equal(t, p2.Baseline, byLabel, "a label names its newest baseline")
	old, err := st.Baseline(ctx, p1.ID)
	require.NoError(t, err, "the old baseline stays reachable by id")
	assert.Equal(t, "prod", old.Label)

	back, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1", Label: "prod"}, t0.Add(2*time.Minute))
	require.NoError(t, err)
	assert.True(t, back.Created, "the label named r2's baseline: r1 gets a new one")
	byLabel, err = st.Baseline(ctx, "prod")
	require.NoError(t, err)
	assert.Equal(t, back.Baseline, byLabel)

	u1, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1"}, t0)
	require.NoError(t, err)
	assert.True(t, u1.Created)
	u2, err := st.PutBaseline(ctx, BaselineSpec{RunID: "r1"}, t0.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, u2.Created, "r1 already has an unlabelled baseline")
	assert.Equal(t, u1.ID, u2.ID)

	_, err = st.PutBaseline(ctx, BaselineSpec{RunID: "r1", Label: "bl-20260101T000000Z-00000000"}, t0)
	assert.ErrorContains(t, err, "may not start with")

	list, err := st.BaselineList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 4, "no row for the idempotent calls")
	assert.Equal(t, p1.ID, list[0].ID)
	assert.Equal(t, 3, list[1].Cases, "graded and unmeasured cases of the run")
}

// TestSettingsAndComparisonRoundTrip: a run's settings and comparison id
// come back as saved (nil settings stay nil: not recorded; "" is a run
// graded on its own).
func TestSettingsAndComparisonRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	with := sampleRun("r-set", "", t0, 1, 0)
	with.Settings = &grading.Settings{Judge: "openai:judge-1", SemanticJudge: "openai:judge-1", SemanticThreshold: 0.7,
		IndexGeneration: "gen-7", Embedder: "hash/v1", Retrieval: "hybrid", TopK: 3, Generator: "offline-extractive"}
	with.ComparisonID = "cmp-1"
	without := sampleRun("r-none", "", t0.Add(time.Minute), 1)
	require.NoError(t, st.SaveRun(ctx, with))
	require.NoError(t, st.SaveRun(ctx, without))
	got, err := st.Run(ctx, "r-set")
	require.NoError(t, err)
	assert.Equal(t, with.Settings, got.Settings)
	assert.Equal(t, "cmp-1", got.ComparisonID)
	got, err = st.Run(ctx, "r-none")
	require.NoError(t, err)
	assert.Nil(t, got.Settings, "no settings recorded reads back as not recorded")
	assert.Equal(t, "", got.ComparisonID)
	list, err := st.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Nil(t, list[0].Settings)
	assert.Equal(t, with.Settings, list[1].Settings)
}

// TestUnreleasedSchemaRefused: a store stamped with a verdryx schema no
// release wrote (development versions 1 and 2, with the columns they
// lacked, and a 3 of a build before the quality log's tables) is refused
// by read-only and writing opens alike, and left as it is.
func TestUnreleasedSchemaRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		version int
		drop    string
	}{
		{1, "ALTER TABLE eval_runs DROP COLUMN comparison_id; ALTER TABLE eval_runs DROP COLUMN settings"},
		{2, "ALTER TABLE eval_runs DROP COLUMN comparison_id"},
		{3, "DROP TABLE quality_records"}, // stamped 3 by a build before the quality log
	} {
		st, path := openTest(t)
		require.NoError(t, st.SaveRun(ctx, sampleRun("r-1", "", t0, 1, 0)))
		require.NoError(t, st.Close())
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		_, err = db.Exec(c.drop + fmt.Sprintf("; UPDATE verdryx_schema SET version = %d", c.version))
		require.NoError(t, err)
		require.NoError(t, db.Close())
		before, err := os.ReadFile(path)
		require.NoError(t, err)

		sh, err := Inspect(ctx, path)
		require.NoError(t, err)
		assert.Equal(t, KindUnknown, sh.Kind, "schema %d", c.version)
		assert.Contains(t, sh.Problem, "unreleased build")
		for _, ro := range []bool{true, false} {
			_, err = Open(ctx, path, Options{ReadOnly: ro})
			require.ErrorIs(t, err, ErrUnknownShape, "schema %d, read-only %v", c.version, ro)
			assert.Contains(t, err.Error(), fmt.Sprintf("verdryx schema %d", c.version))
		}
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, before, after, "schema %d: the file is left as it is", c.version)
	}
}
