package store

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/llm"
)

// The stack's console's SQL, verbatim (github.com/TAIPANBOX/genaryx,
// crates/connectors/src/verdryx.rs; docs/stack.md).
const (
	consoleHasTable = `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1 LIMIT 1`
	consoleRuns     = `SELECT id, model, started_at, finished_at FROM eval_runs ORDER BY started_at DESC`
	consoleRun      = `SELECT id, model, started_at, finished_at FROM eval_runs WHERE id = ?1`
	consoleSummary  = `SELECT COUNT(*), AVG(value), COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0.0) FROM scores WHERE run_id = ?1`
	consoleScores   = `SELECT id, run_id, case_id, value, tokens, cost_usd FROM scores WHERE run_id = ?1 ORDER BY id`
	consoleReasons  = `SELECT reason, COUNT(*) FROM unanswered WHERE run_id = ?1 GROUP BY reason ORDER BY reason`
	consoleBaseline = `SELECT id, eval_run_id, mean_score, created_at, label FROM baselines ORDER BY created_at DESC`
)

// pythonDDLv1 is the Python verdryx's schema (github.com/TAIPANBOX/verdryx,
// verdryx/store.py; docs/formats.md) in its first generation: no
// unanswered.
const pythonDDLv1 = `
CREATE TABLE eval_runs (id TEXT PRIMARY KEY, model TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT);
CREATE TABLE scores (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES eval_runs(id),
       case_id TEXT NOT NULL, value REAL NOT NULL, tokens INTEGER NOT NULL DEFAULT 0,
       cost_usd REAL NOT NULL DEFAULT 0.0);
CREATE INDEX idx_scores_run_id ON scores(run_id);
CREATE TABLE baselines (id TEXT PRIMARY KEY, eval_run_id TEXT NOT NULL REFERENCES eval_runs(id),
       mean_score REAL NOT NULL, created_at TEXT NOT NULL, label TEXT NOT NULL DEFAULT '');
`

// pythonDDLv2 adds the second generation's unanswered table.
const pythonDDLv2 = pythonDDLv1 + `
CREATE TABLE unanswered (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES eval_runs(id),
       case_id TEXT NOT NULL, answer_id TEXT NOT NULL, reason TEXT NOT NULL);
CREATE INDEX idx_unanswered_run_id ON unanswered(run_id);
`

// roDB opens path as the console does: read-only, busy timeout 5 s.
func roDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// pythonStore writes a store as the Python verdryx would: its DDL, its
// timestamps, UUID ids, a run still in flight, a label given twice.
func pythonStore(t *testing.T, gen int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "verdryx.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	ddl := pythonDDLv1
	if gen == 2 {
		ddl = pythonDDLv2
	}
	for _, q := range []string{"PRAGMA journal_mode=WAL", "PRAGMA foreign_keys=ON", ddl, "PRAGMA user_version = 1",
		`INSERT INTO eval_runs VALUES ('3fa85f64-5717-4562-b3fc-2c963f66afa6', 'claude-sonnet-5', '2026-07-17T10:00:00+00:00', '2026-07-17T10:05:00.250000+00:00')`,
		`INSERT INTO eval_runs VALUES ('11111111-1111-4111-8111-111111111111', 'claude-sonnet-5', '2026-07-17T11:00:00.123456+00:00', '2026-07-17T11:02:00+00:00')`,
		`INSERT INTO eval_runs VALUES ('22222222-2222-4222-8222-222222222222', 'claude-opus-4-8', '2026-07-17T12:00:00+00:00', NULL)`,
		`INSERT INTO scores (run_id, case_id, value, tokens, cost_usd) VALUES
			('3fa85f64-5717-4562-b3fc-2c963f66afa6', 'c1', 1.0, 120, 0.004),
			('3fa85f64-5717-4562-b3fc-2c963f66afa6', 'c2', 0.5, 80, 0.002),
			('11111111-1111-4111-8111-111111111111', 'c1', 0.0, 100, 0.003),
			('11111111-1111-4111-8111-111111111111', 'c2', 0.25, 90, 0.0025)`,
		`INSERT INTO baselines VALUES ('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', '3fa85f64-5717-4562-b3fc-2c963f66afa6', 0.75, '2026-07-17T10:06:00+00:00', 'v1-golden')`,
		`INSERT INTO baselines VALUES ('bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb', '3fa85f64-5717-4562-b3fc-2c963f66afa6', 0.75, '2026-07-17T10:07:00+00:00', 'admission-agent://acme.local/x')`,
		`INSERT INTO baselines VALUES ('cccccccc-cccc-4ccc-8ccc-cccccccccccc', '11111111-1111-4111-8111-111111111111', 0.125, '2026-07-17T11:03:00.5+00:00', 'admission-agent://acme.local/x')`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	if gen == 2 {
		_, err := db.Exec(`INSERT INTO unanswered (run_id, case_id, answer_id, reason) VALUES
			('11111111-1111-4111-8111-111111111111', 'c3', '0f1e2d3c4b5a69788796a5b4c3d2e1f0', 'backend_error')`)
		require.NoError(t, err)
	}
	return path
}

// dumpPython reads every row of the Python verdryx's columns, in id order.
func dumpPython(t *testing.T, db *sql.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for table, cols := range pythonColumns() {
		var n int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n))
		if n == 0 {
			continue
		}
		q := "SELECT quote(" + strings.Join(cols, ") || '|' || quote(") + ") FROM " + table + " ORDER BY id"
		rows, err := db.Query(q)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out[table] = append(out[table], s)
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return out
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// consoleReads runs every read of the console on one fresh read-only
// connection and returns what the panel would show of a run.
type consolePanel struct {
	runs     []string
	finished map[string]bool
	count    int64
	mean     sql.NullFloat64
	tokens   int64
	cost     float64
	cases    []string
	ids      []int64
	reasons  map[string]int
	hasUnans bool
	labels   []string
}

func consoleReads(ctx context.Context, db *sql.DB, runID string) (consolePanel, error) {
	p := consolePanel{finished: map[string]bool{}, reasons: map[string]int{}}
	conn, err := db.Conn(ctx)
	if err != nil {
		return p, err
	}
	defer conn.Close()
	var one int
	switch err := conn.QueryRowContext(ctx, consoleHasTable, "unanswered").Scan(&one); err {
	case nil:
		p.hasUnans = true
	case sql.ErrNoRows:
	default:
		return p, err
	}
	rows, err := conn.QueryContext(ctx, consoleRuns)
	if err != nil {
		return p, err
	}
	for rows.Next() {
		var id, model, started string
		var finished sql.NullString
		if err := rows.Scan(&id, &model, &started, &finished); err != nil {
			rows.Close()
			return p, err
		}
		p.runs = append(p.runs, id)
		p.finished[id] = finished.Valid
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return p, err
	}
	var id, model, started string
	var finished sql.NullString
	if err := conn.QueryRowContext(ctx, consoleRun, runID).Scan(&id, &model, &started, &finished); err != nil {
		return p, fmt.Errorf("run %s: %w", runID, err)
	}
	if err := conn.QueryRowContext(ctx, consoleSummary, runID).Scan(&p.count, &p.mean, &p.tokens, &p.cost); err != nil {
		return p, err
	}
	rows, err = conn.QueryContext(ctx, consoleScores, runID)
	if err != nil {
		return p, err
	}
	for rows.Next() {
		var id, tokens int64
		var run, caseID string
		var value, cost float64
		if err := rows.Scan(&id, &run, &caseID, &value, &tokens, &cost); err != nil {
			rows.Close()
			return p, err
		}
		p.ids = append(p.ids, id)
		p.cases = append(p.cases, caseID)
	}
	rows.Close()
	if p.hasUnans {
		rows, err = conn.QueryContext(ctx, consoleReasons, runID)
		if err != nil {
			return p, err
		}
		for rows.Next() {
			var reason string
			var n int
			if err := rows.Scan(&reason, &n); err != nil {
				rows.Close()
				return p, err
			}
			p.reasons[reason] = n
		}
		rows.Close()
	}
	rows, err = conn.QueryContext(ctx, consoleBaseline)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, run, created, label string
		var mean float64
		if err := rows.Scan(&id, &run, &mean, &created, &label); err != nil {
			return p, err
		}
		p.labels = append(p.labels, label)
	}
	return p, rows.Err()
}

// mixedRun has graded cases, a typed case typryx left unanswered, a cost
// cap and a judge failure, in that set order.
func mixedRun(id string, start time.Time) grading.Run {
	r := sampleRun(id, "agent://acme.local/finance/billing-agent", start, 1, 0, 0.5, 0, 0, 1)
	r.Scores[1].Unmeasured, r.Scores[1].Reason = "typryx unanswered: backend_error", "backend_error"
	r.Scores[1].Grader = grading.GraderTyped
	r.Scores[1].Typed = &grading.TypedVerdict{AnswerID: "0f1e2d3c4b5a69788796a5b4c3d2e1f0", Template: "eval.outcome_met", Type: "noul", Unanswered: true, Reason: "backend_error"}
	r.Scores[3].Unmeasured, r.Scores[3].Reason = llm.ReasonCostLimit, llm.ReasonCostLimit
	r.Scores[4].Unmeasured, r.Scores[4].Reason = "judge: no number in the answer", grading.ReasonJudgeError
	for i := range r.Scores {
		if !r.Scores[i].Graded() {
			r.Scores[i].Value = 0
		}
	}
	return r
}

func TestConsoleReadsAStoreVerdryxWrote(t *testing.T) {
	ctx := context.Background()
	st, path := openTest(t)
	run := mixedRun("run-1", t0)
	require.NoError(t, st.SaveRun(ctx, run))
	_, err := st.CreateBaseline(ctx, "run-1", "admission-agent://acme.local/finance/billing-agent", t0.Add(time.Minute))
	require.NoError(t, err)

	p, err := consoleReads(ctx, roDB(t, path), "run-1")
	require.NoError(t, err)
	assert.True(t, p.hasUnans, "the panel shows unanswered accounting")
	assert.Equal(t, []string{"run-1"}, p.runs)
	assert.True(t, p.finished["run-1"], "finished_at is set once a run is stored")
	assert.EqualValues(t, 3, p.count, "scores holds the measured cases only")
	require.True(t, p.mean.Valid)
	assert.InDelta(t, 2.5/3, p.mean.Float64, 1e-12, "the mean over measured cases, never a zero for an unmeasured one")
	assert.Equal(t, []string{"a", "c", "f"}, p.cases, "scores in set order by id")
	assert.IsIncreasing(t, p.ids)
	assert.Equal(t, map[string]int{"backend_error": 1, "cost_limit": 1, "judge_error": 1}, p.reasons)
	assert.Equal(t, []string{"admission-agent://acme.local/finance/billing-agent"}, p.labels)

	back, err := st.Run(ctx, "run-1")
	require.NoError(t, err)
	assert.Equal(t, run.Scores, back.Scores, "verdryx reads back every case, in set order")
}

func TestPythonStoresMigrateKeepingEveryRow(t *testing.T) {
	for _, gen := range []int{1, 2} {
		t.Run(fmt.Sprintf("generation %d", gen), func(t *testing.T) {
			ctx := context.Background()
			path := pythonStore(t, gen)
			raw, err := sql.Open("sqlite", path)
			require.NoError(t, err)
			defer raw.Close()
			before := dumpPython(t, raw)

			sh, err := Inspect(ctx, path)
			require.NoError(t, err)
			assert.Equal(t, KindPython, sh.Kind)
			assert.Equal(t, gen == 2, sh.Unanswered)

			_, err = Open(ctx, path, Options{ReadOnly: true})
			require.ErrorIs(t, err, ErrNeedsMigration, "a read-only open never migrates")
			assert.Equal(t, before, dumpPython(t, raw))

			st, err := Open(ctx, path, Options{})
			require.NoError(t, err)
			defer st.Close()
			m := st.Migrated()
			require.NotNil(t, m)
			assert.Equal(t, 3, m.Runs)
			assert.Equal(t, 4, m.Scores)
			assert.Equal(t, 3, m.Baselines)
			assert.Equal(t, map[bool]int{true: 1, false: 0}[gen == 2], m.Unanswered)

			// The copy is the store as it was.
			bak, err := sql.Open("sqlite", "file:"+m.Backup+"?mode=ro")
			require.NoError(t, err)
			defer bak.Close()
			assert.Equal(t, before, dumpPython(t, bak))
			bsh, err := Inspect(ctx, m.Backup)
			require.NoError(t, err)
			assert.Equal(t, KindPython, bsh.Kind)

			// Every row keeps its id and values.
			assert.Equal(t, before, dumpPython(t, raw))
			var uv int
			require.NoError(t, raw.QueryRow("PRAGMA user_version").Scan(&uv))
			assert.Equal(t, 1, uv, "the Python verdryx still opens it")

			// verdryx reads the old runs and baselines.
			runs, err := st.Runs(ctx)
			require.NoError(t, err)
			require.Len(t, runs, 3)
			assert.Equal(t, "22222222-2222-4222-8222-222222222222", runs[0].ID)
			old, err := st.Run(ctx, "11111111-1111-4111-8111-111111111111")
			require.NoError(t, err)
			assert.Equal(t, time.Date(2026, 7, 17, 11, 0, 0, 123456000, time.UTC), old.StartedAt)
			if gen == 2 {
				require.Len(t, old.Scores, 3)
				assert.False(t, old.Scores[2].Graded())
				assert.True(t, old.Scores[2].Unanswered(), "the Python verdryx's unanswered row is a typed case left unanswered")
				assert.Equal(t, "backend_error", old.Scores[2].Reason)
			}
			inflight, err := st.Run(ctx, "22222222-2222-4222-8222-222222222222")
			require.NoError(t, err)
			assert.True(t, inflight.FinishedAt.IsZero())
			b, err := st.Baseline(ctx, "v1-golden")
			require.NoError(t, err)
			assert.Equal(t, time.Date(2026, 7, 17, 10, 6, 0, 0, time.UTC), b.CreatedAt)
			b, err = st.Baseline(ctx, "admission-agent://acme.local/x")
			require.NoError(t, err)
			assert.Equal(t, "cccccccc-cccc-4ccc-8ccc-cccccccccccc", b.ID, "a repeated label names its newest baseline")

			// A run with no recorded eval set pools by model, as the Python
			// verdryx's window did.
			window, err := st.RecentRuns(ctx, "", "claude-sonnet-5", 3, "3fa85f64-5717-4562-b3fc-2c963f66afa6")
			require.NoError(t, err)
			require.Len(t, window, 1)

			// New runs are saved beside the old ones, and the console reads both.
			require.NoError(t, st.SaveRun(ctx, mixedRun("run-new", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))))
			p, err := consoleReads(ctx, roDB(t, path), "run-new")
			require.NoError(t, err)
			assert.Len(t, p.runs, 4)
			assert.EqualValues(t, 3, p.count)
			assert.True(t, p.hasUnans)
			assert.Equal(t, 3, len(p.reasons))
			p, err = consoleReads(ctx, roDB(t, path), "3fa85f64-5717-4562-b3fc-2c963f66afa6")
			require.NoError(t, err)
			assert.EqualValues(t, 2, p.count)
			assert.InDelta(t, 0.75, p.mean.Float64, 1e-12)

			// The Python verdryx, sharing the file, still writes and reads it.
			for _, q := range []string{
				`INSERT OR REPLACE INTO eval_runs (id, model, started_at, finished_at) VALUES ('33333333-3333-4333-8333-333333333333', 'claude-sonnet-5', '2026-12-02T00:00:00+00:00', '2026-12-02T00:01:00+00:00')`,
				`DELETE FROM scores WHERE run_id = '33333333-3333-4333-8333-333333333333'`,
				`INSERT INTO scores (run_id, case_id, value, tokens, cost_usd) VALUES ('33333333-3333-4333-8333-333333333333', 'c1', 0.5, 10, 0.001)`,
				`INSERT OR REPLACE INTO baselines (id, eval_run_id, mean_score, created_at, label) VALUES ('dddddddd-dddd-4ddd-8ddd-dddddddddddd', '33333333-3333-4333-8333-333333333333', 0.5, '2026-12-02T00:02:00+00:00', '')`,
			} {
				_, err := raw.Exec(q)
				require.NoError(t, err, q)
			}
			py, err := st.Run(ctx, "33333333-3333-4333-8333-333333333333")
			require.NoError(t, err)
			require.Len(t, py.Scores, 1)
			assert.Equal(t, 0.5, py.Scores[0].Value)
			var n int
			require.NoError(t, raw.QueryRow(`SELECT COUNT(*) FROM scores WHERE run_id = 'run-new'`).Scan(&n))
			assert.Equal(t, 3, n, "the Python verdryx's own read of scores sees measured cases only")
		})
	}
}

func TestOpenRefusesUnknownShapesUntouched(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		sql  string
		want error
		says string
	}{
		"newer python":          {pythonDDLv2 + "PRAGMA user_version = 2;", ErrSchemaVersion, "user_version 2 is newer"},
		"newer verdryx":         {pythonDDLv2 + "CREATE TABLE verdryx_schema (version INTEGER NOT NULL); INSERT INTO verdryx_schema VALUES (7); PRAGMA user_version = 1;", ErrSchemaVersion, "verdryx schema 7"},
		"unreleased verdryx":    {"CREATE TABLE eval_runs (id TEXT PRIMARY KEY, eval_set_id TEXT); CREATE TABLE unmeasured (run_id TEXT); PRAGMA user_version = 1;", ErrUnknownShape, "unreleased verdryx build"},
		"python table missing":  {"CREATE TABLE eval_runs (id TEXT PRIMARY KEY, model TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT); PRAGMA user_version = 1;", ErrUnknownShape, "table scores is missing"},
		"python column missing": {strings.Replace(pythonDDLv1, "cost_usd REAL NOT NULL DEFAULT 0.0", "cost REAL", 1) + "PRAGMA user_version = 1;", ErrUnknownShape, "table scores has columns"},
		"version and no tables": {"PRAGMA user_version = 1;", ErrUnknownShape, "no tables"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			raw, err := sql.Open("sqlite", path)
			require.NoError(t, err)
			_, err = raw.Exec(tc.sql)
			require.NoError(t, err)
			require.NoError(t, raw.Close())
			digest := fileDigest(t, path)
			_, err = Open(ctx, path, Options{})
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), "nothing was changed")
			_, err = Open(ctx, path, Options{ReadOnly: true})
			require.ErrorIs(t, err, tc.want)
			assert.Equal(t, digest, fileDigest(t, path), "a refused file is left as it was")
			matches, _ := filepath.Glob(path + ".python-*")
			assert.Empty(t, matches, "no copy of a file that is not migrated")
		})
	}
}

// TestMigrationHelper is the process TestMigrationSurvivesKill kills: it
// migrates the store named by its environment and stops, for ever, just
// before the commit.
func TestMigrationHelper(t *testing.T) {
	path := os.Getenv("VERDRYX_STORE_MIGRATE_HELPER")
	if path == "" {
		t.Skip("run by TestMigrationSurvivesKill")
	}
	_, err := Open(context.Background(), path, Options{beforeCommit: func() {
		fmt.Println("in the migration's transaction")
		select {}
	}})
	t.Fatalf("the helper's open returned: %v", err)
}

func TestMigrationSurvivesKill(t *testing.T) {
	ctx := context.Background()
	path := pythonStore(t, 2)
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	before := dumpPython(t, raw)

	cmd := exec.Command(os.Args[0], "-test.run=^TestMigrationHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "VERDRYX_STORE_MIGRATE_HELPER="+path)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	reached := false
	for lines.Scan() {
		if strings.Contains(lines.Text(), "in the migration's transaction") {
			reached = true
			break
		}
	}
	require.True(t, reached, "the helper reached the migration's commit")
	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	_ = cmd.Wait()

	sh, err := Inspect(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, KindPython, sh.Kind, "the killed migration left the original")
	assert.Equal(t, before, dumpPython(t, raw), "every row is readable as it was")

	st, err := Open(ctx, path, Options{})
	require.NoError(t, err, "the next open finishes the migration")
	defer st.Close()
	require.NotNil(t, st.Migrated())
	assert.Equal(t, before, dumpPython(t, raw))
	runs, err := st.Runs(ctx)
	require.NoError(t, err)
	assert.Len(t, runs, 3)
}

func TestTwoOpensMigrateOnce(t *testing.T) {
	ctx := context.Background()
	path := pythonStore(t, 1)
	var wg sync.WaitGroup
	var migrated atomic.Int32
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := Open(ctx, path, Options{})
			if err == nil {
				if st.Migrated() != nil {
					migrated.Add(1)
				}
				err = st.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, migrated.Load(), "one open migrates, the others find it done")
	sh, err := Inspect(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, KindCurrent, sh.Kind)
}

func TestReadersNeverFailWhileVerdryxWrites(t *testing.T) {
	ctx := context.Background()
	st, path := openTest(t)
	const runs = 60
	saved := make(chan string, runs)
	go func() {
		defer close(saved)
		for i := range runs {
			id := fmt.Sprintf("run-%03d", i)
			if err := st.SaveRun(ctx, mixedRun(id, t0.Add(time.Duration(i)*time.Second))); err != nil {
				t.Errorf("save %s: %v", id, err)
				return
			}
			if _, err := st.CreateBaseline(ctx, id, "admission-x", t0.Add(time.Duration(i)*time.Second)); err != nil {
				t.Errorf("baseline %s: %v", id, err)
				return
			}
			saved <- id
		}
	}()
	db := roDB(t, path)
	n := 0
	for id := range saved {
		// A run is readable as soon as the write that stored it returns.
		p, err := consoleReads(ctx, db, id)
		require.NoError(t, err, "read %s while the writer goes on", id)
		assert.EqualValues(t, 3, p.count)
		n++
	}
	assert.Equal(t, runs, n)
}

func TestCloseLeavesAFileAReaderNeedsNoWALFor(t *testing.T) {
	ctx := context.Background()
	st, path := openTest(t)
	require.NoError(t, st.SaveRun(ctx, mixedRun("run-1", t0)))
	other, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = os.Stat(path + "-wal")
	require.NoError(t, err, "another connection still has the file open: it stays in WAL mode")
	require.NoError(t, other.Close())
	for _, f := range []string{path + "-wal", path + "-shm"} {
		assert.NoFileExists(t, f)
	}
	var mode string
	require.NoError(t, roDB(t, path).QueryRow("PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "delete", mode, "checkpointed, in rollback mode: a read-only open needs no WAL")
	again, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	require.NoError(t, again.db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "wal", mode, "the next open for writing turns WAL on again")
	require.NoError(t, again.Close())
}
