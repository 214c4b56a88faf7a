// Package store is verdryx's one SQLite file (pure-Go driver, no cgo). It
// keeps eval runs with their per-case scores and baselines (SaveRun, Run,
// Runs, RecentRuns, Baselines, PutBaseline) and the worker's eval requests,
// claimed and committed exactly once (ClaimRequest, CommitRequest).
// ResolvePath resolves where the file is. Partition state is not here: its
// one persisted copy is the KV bucket (docs/architecture.md).
//
// The schema (schema.go) is version 1, stamped in PRAGMA user_version when
// the file is created; a file of another version is refused on open. The
// file runs in WAL mode with foreign keys on and a busy timeout, and every
// write is one transaction: a crash mid-save leaves no half-saved run. A
// Store is safe for concurrent use.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
)

// Errors callers test with errors.Is.
var (
	// ErrSchemaVersion: the file's schema is not the one this build
	// reads (SchemaVersion).
	ErrSchemaVersion = errors.New("store: schema version is not this build's")
	ErrNotFound      = errors.New("store: not found")
	ErrUnmeasured    = errors.New("store: run has no graded case")
	// ErrLabelTaken: the baseline label names a baseline of another run.
	ErrLabelTaken = errors.New("store: baseline label is taken")
)

// Options tune Open.
type Options struct {
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection or process; 0 means 5 s.
	BusyTimeout time.Duration
}

// Store is an open eval store. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// SchemaVersion is the user_version this build writes and reads.
func SchemaVersion() int { return schemaVersion }

// pageSize is the page size of a store file created by this build.
const pageSize = 64 << 10

// Open opens (creating the file, never a directory) the store at path and
// creates its schema in a new file. A store whose user_version is another
// than SchemaVersion is refused with ErrSchemaVersion and left untouched.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store %s: path may not contain '?' or '#'", path)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	// A new file gets 64 KiB pages: eval runs store their scores and
	// answers as large rows, and SQLite reads an overflow chain page by
	// page (fewer, larger pages read it in fewer steps). An existing file
	// keeps its page size. The WAL is
	// checkpointed every 64 pages (4 MiB, as 1,000 pages of 4 KiB were)
	// and truncated to 4 MiB after, so it does not grow with the pages.
	dsn := fmt.Sprintf("%s?_pragma=page_size(%d)&_pragma=wal_autocheckpoint(64)&_pragma=journal_size_limit(%d)"+
		"&_pragma=foreign_keys(1)&_pragma=busy_timeout(%d)&_txlock=immediate",
		path, pageSize, 4<<20, opts.BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.ensureSchema(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// Path returns the file the store was opened at.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// ensureSchema creates the schema in a file without one (user_version 0)
// and refuses a file of another version.
func (s *Store) ensureSchema(ctx context.Context) error {
	var have int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch have {
	case schemaVersion:
	case 0:
	default:
		return fmt.Errorf("%w: the file is version %d, this build reads version %d only (a store of an unreleased build: move it aside)",
			ErrSchemaVersion, have, schemaVersion)
	}
	if _, err := s.db.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
		return fmt.Errorf("enable wal: %w", err)
	}
	if have == schemaVersion {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		tx.Rollback()
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		tx.Rollback()
		return fmt.Errorf("create schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return nil
}

// RunsByRequest counts the stored eval runs of each request id (runs
// without a request id are left out).
func (s *Store) RunsByRequest(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT request_id, COUNT(*) FROM eval_runs WHERE request_id != '' GROUP BY request_id`)
	if err != nil {
		return nil, fmt.Errorf("count eval runs by request: %w", err)
	}
	defer rows.Close()
	runs := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count eval runs by request: %w", err)
		}
		runs[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count eval runs by request: %w", err)
	}
	return runs, nil
}

const timeFormat = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeFormat, s) }

// SaveRun stores a run and all its scores in one transaction: either all of
// it is saved or none of it.
func (s *Store) SaveRun(ctx context.Context, run grading.Run) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save run %s: %w", run.ID, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err = saveRun(ctx, tx, run); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("save run %s: commit: %w", run.ID, err)
	}
	return nil
}

// saveRun inserts a run and its scores inside tx.
func saveRun(ctx context.Context, tx *sql.Tx, run grading.Run) (err error) {
	prov, err := json.Marshal(run.Provenance)
	if err != nil {
		return fmt.Errorf("save run %s: provenance: %w", run.ID, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO eval_runs
		(id, eval_set_id, eval_set_digest, agent_id, model, judge_id, verdryx_version, request_id, started_at, finished_at, provenance)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run.ID, run.EvalSetID, run.EvalSetDigest, run.AgentID, run.Model, run.Judge, run.Version, run.RequestID,
		formatTime(run.StartedAt), formatTime(run.FinishedAt), string(prov))
	if err != nil {
		return fmt.Errorf("save run %s: %w", run.ID, err)
	}
	for i, sc := range run.Scores {
		checks, merr := json.Marshal(sc.Checks)
		if merr != nil {
			return fmt.Errorf("save run %s: case %s checks: %w", run.ID, sc.CaseID, merr)
		}
		typed := ""
		if sc.Typed != nil {
			b, merr := json.Marshal(sc.Typed)
			if merr != nil {
				return fmt.Errorf("save run %s: case %s typed verdict: %w", run.ID, sc.CaseID, merr)
			}
			typed = string(b)
		}
		if sc.Graded() {
			_, err = tx.ExecContext(ctx, `INSERT INTO scores
				(run_id, seq, case_id, grader, value, tokens, cost_usd, duration_ns, checks, output, typed)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				run.ID, i, sc.CaseID, sc.Grader, sc.Value, sc.Tokens, sc.CostUSD, int64(sc.Duration), string(checks), sc.Output, typed)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO unmeasured
				(run_id, seq, case_id, grader, reason, tokens, cost_usd, duration_ns, checks, output, typed)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				run.ID, i, sc.CaseID, sc.Grader, sc.Unmeasured, sc.Tokens, sc.CostUSD, int64(sc.Duration), string(checks), sc.Output, typed)
		}
		if err != nil {
			return fmt.Errorf("save run %s: case %s: %w", run.ID, sc.CaseID, err)
		}
	}
	return nil
}

// RunInfo is one row of the run list.
type RunInfo struct {
	ID         string    `json:"run_id"`
	EvalSetID  string    `json:"eval_set_id"`
	Model      string    `json:"model"`
	AgentID    string    `json:"agent_id,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	Cases      int       `json:"cases"`
	Graded     int       `json:"graded"`
	Unmeasured int       `json:"unmeasured"`
	// MeanScore is nil when no case was graded.
	MeanScore *float64 `json:"mean_score"`
	CostUSD   float64  `json:"total_cost_usd"`
}

// Runs lists every stored run, most recent first.
func (s *Store) Runs(ctx context.Context) ([]RunInfo, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT r.id, r.eval_set_id, r.model, r.agent_id, r.started_at,
			(SELECT COUNT(*) FROM scores WHERE run_id = r.id),
			(SELECT COUNT(*) FROM unmeasured WHERE run_id = r.id),
			(SELECT AVG(value) FROM scores WHERE run_id = r.id),
			(SELECT COALESCE(SUM(cost_usd), 0) FROM scores WHERE run_id = r.id) +
			(SELECT COALESCE(SUM(cost_usd), 0) FROM unmeasured WHERE run_id = r.id)
		FROM eval_runs r ORDER BY r.started_at DESC, r.rowid DESC`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []RunInfo
	for rows.Next() {
		var ri RunInfo
		var started string
		var mean sql.NullFloat64
		if err := rows.Scan(&ri.ID, &ri.EvalSetID, &ri.Model, &ri.AgentID, &started, &ri.Graded, &ri.Unmeasured, &mean, &ri.CostUSD); err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		if ri.StartedAt, err = parseTime(started); err != nil {
			return nil, fmt.Errorf("list runs: run %s started_at: %w", ri.ID, err)
		}
		if mean.Valid {
			m := mean.Float64
			ri.MeanScore = &m
		}
		ri.Cases = ri.Graded + ri.Unmeasured
		out = append(out, ri)
	}
	return out, rows.Err()
}

// Run loads one run with every score, graded and unmeasured, in case order.
// A missing run is ErrNotFound.
func (s *Store) Run(ctx context.Context, id string) (grading.Run, error) {
	var run grading.Run
	var started, finished, prov string
	err := s.db.QueryRowContext(ctx, `SELECT id, eval_set_id, eval_set_digest, agent_id, model, judge_id,
		verdryx_version, request_id, started_at, finished_at, provenance FROM eval_runs WHERE id = ?`, id).
		Scan(&run.ID, &run.EvalSetID, &run.EvalSetDigest, &run.AgentID, &run.Model, &run.Judge,
			&run.Version, &run.RequestID, &started, &finished, &prov)
	if errors.Is(err, sql.ErrNoRows) {
		return grading.Run{}, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return grading.Run{}, fmt.Errorf("load run %s: %w", id, err)
	}
	if run.StartedAt, err = parseTime(started); err != nil {
		return grading.Run{}, fmt.Errorf("load run %s: started_at: %w", id, err)
	}
	if run.FinishedAt, err = parseTime(finished); err != nil {
		return grading.Run{}, fmt.Errorf("load run %s: finished_at: %w", id, err)
	}
	if err := json.Unmarshal([]byte(prov), &run.Provenance); err != nil {
		return grading.Run{}, fmt.Errorf("load run %s: provenance: %w", id, err)
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT seq, case_id, grader, value, '' AS reason, tokens, cost_usd, duration_ns, checks, output, typed FROM scores WHERE run_id = ?
		UNION ALL
		SELECT seq, case_id, grader, 0, reason, tokens, cost_usd, duration_ns, checks, output, typed FROM unmeasured WHERE run_id = ?
		ORDER BY seq`, id, id)
	if err != nil {
		return grading.Run{}, fmt.Errorf("load run %s scores: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var sc grading.Score
		var seq int
		var dur int64
		var checks, typed string
		if err := rows.Scan(&seq, &sc.CaseID, &sc.Grader, &sc.Value, &sc.Unmeasured, &sc.Tokens, &sc.CostUSD, &dur, &checks, &sc.Output, &typed); err != nil {
			return grading.Run{}, fmt.Errorf("load run %s scores: %w", id, err)
		}
		sc.Duration = time.Duration(dur)
		if err := json.Unmarshal([]byte(checks), &sc.Checks); err != nil {
			return grading.Run{}, fmt.Errorf("load run %s case %s checks: %w", id, sc.CaseID, err)
		}
		if typed != "" {
			sc.Typed = &grading.TypedVerdict{}
			if err := json.Unmarshal([]byte(typed), sc.Typed); err != nil {
				return grading.Run{}, fmt.Errorf("load run %s case %s typed verdict: %w", id, sc.CaseID, err)
			}
		}
		run.Scores = append(run.Scores, sc)
	}
	if err := rows.Err(); err != nil {
		return grading.Run{}, fmt.Errorf("load run %s scores: %w", id, err)
	}
	return run, nil
}

// RecentRuns returns up to n runs of the eval set and model, most recent
// first, skipping the run ids in exclude.
func (s *Store) RecentRuns(ctx context.Context, evalSetID, model string, n int, exclude ...string) ([]grading.Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM eval_runs WHERE eval_set_id = ? AND model = ?
		ORDER BY started_at DESC, rowid DESC`, evalSetID, model)
	if err != nil {
		return nil, fmt.Errorf("recent runs of %s/%s: %w", evalSetID, model, err)
	}
	var ids []string
	for rows.Next() && len(ids) < n {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("recent runs of %s/%s: %w", evalSetID, model, err)
		}
		skip := false
		for _, x := range exclude {
			skip = skip || x == id
		}
		if !skip {
			ids = append(ids, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent runs of %s/%s: %w", evalSetID, model, err)
	}
	out := make([]grading.Run, 0, len(ids))
	for _, id := range ids {
		r, err := s.Run(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// CreateBaseline is PutBaseline without Force, for callers that need
// only the baseline.
func (s *Store) CreateBaseline(ctx context.Context, runID, label string, now time.Time) (drift.Baseline, error) {
	b, _, err := s.PutBaseline(ctx, BaselineSpec{RunID: runID, Label: label}, now)
	return b, err
}

// BaselineSpec names the baseline PutBaseline makes.
type BaselineSpec struct {
	RunID string
	// Label, when set, names the baseline; a label names at most one
	// baseline in the store. "" makes an unlabelled baseline.
	Label string
	// Force moves Label from the run it names to RunID.
	Force bool
}

// PutBaseline snapshots a stored run's mean as a baseline, idempotently:
//
//   - a label that already names a baseline of the same run returns that
//     baseline (created false), as does an unlabelled spec for a run that
//     already has an unlabelled baseline;
//   - a label that names a baseline of another run is refused with
//     ErrLabelTaken unless Force, which makes a new baseline with the label
//     and leaves the old one reachable by its id, unlabelled;
//   - otherwise a new baseline is made (created true).
//
// A run with no graded case is refused with ErrUnmeasured: a baseline of
// an unmeasured mean would be a made-up number. A label that has the shape
// of a baseline id ("bl-...") is refused: ids and labels share drift's
// --baseline. It runs in one transaction.
func (s *Store) PutBaseline(ctx context.Context, spec BaselineSpec, now time.Time) (b drift.Baseline, created bool, err error) {
	if strings.HasPrefix(spec.Label, "bl-") {
		return drift.Baseline{}, false, fmt.Errorf("baseline label %q: labels may not start with \"bl-\" (baseline ids do)", spec.Label)
	}
	run, err := s.Run(ctx, spec.RunID)
	if err != nil {
		return drift.Baseline{}, false, err
	}
	mean, ok := run.Mean()
	if !ok {
		return drift.Baseline{}, false, fmt.Errorf("baseline of run %s: %w (%d cases, all unmeasured)", spec.RunID, ErrUnmeasured, len(run.Scores))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return drift.Baseline{}, false, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	}
	defer tx.Rollback()
	var existing drift.Baseline
	var createdAt string
	var q *sql.Row
	if spec.Label != "" {
		q = tx.QueryRowContext(ctx, `SELECT id, eval_run_id, mean_score, created_at, label FROM baselines WHERE label = ?`, spec.Label)
	} else {
		q = tx.QueryRowContext(ctx, `SELECT id, eval_run_id, mean_score, created_at, label FROM baselines
			WHERE eval_run_id = ? AND label = '' ORDER BY created_at, rowid LIMIT 1`, spec.RunID)
	}
	err = q.Scan(&existing.ID, &existing.RunID, &existing.MeanScore, &createdAt, &existing.Label)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return drift.Baseline{}, false, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	case existing.RunID == spec.RunID:
		if existing.CreatedAt, err = parseTime(createdAt); err != nil {
			return drift.Baseline{}, false, fmt.Errorf("load baseline %s: created_at: %w", existing.ID, err)
		}
		return existing, false, nil
	case !spec.Force:
		return drift.Baseline{}, false, fmt.Errorf("baseline label %q: %w: it names %s (run %s); pass --force to move it to run %s",
			spec.Label, ErrLabelTaken, existing.ID, existing.RunID, spec.RunID)
	default:
		if _, err := tx.ExecContext(ctx, `UPDATE baselines SET label = '' WHERE id = ?`, existing.ID); err != nil {
			return drift.Baseline{}, false, fmt.Errorf("baseline label %q: release from %s: %w", spec.Label, existing.ID, err)
		}
	}
	b = drift.Baseline{ID: grading.NewID("bl", now), RunID: spec.RunID, MeanScore: mean, CreatedAt: now.UTC(), Label: spec.Label}
	if _, err := tx.ExecContext(ctx, `INSERT INTO baselines (id, eval_run_id, mean_score, created_at, label) VALUES (?, ?, ?, ?, ?)`,
		b.ID, b.RunID, b.MeanScore, formatTime(b.CreatedAt), b.Label); err != nil {
		return drift.Baseline{}, false, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	}
	if err := tx.Commit(); err != nil {
		return drift.Baseline{}, false, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	}
	return b, true, nil
}

// Baseline loads a baseline by id, else by label; neither is ErrNotFound.
// An id wins over an equal label (labels cannot take the "bl-" id shape).
func (s *Store) Baseline(ctx context.Context, idOrLabel string) (drift.Baseline, error) {
	var b drift.Baseline
	var created string
	err := s.db.QueryRowContext(ctx, `SELECT id, eval_run_id, mean_score, created_at, label FROM baselines
		WHERE id = ?1 OR (label = ?1 AND label <> '') ORDER BY id = ?1 DESC LIMIT 1`, idOrLabel).
		Scan(&b.ID, &b.RunID, &b.MeanScore, &created, &b.Label)
	if errors.Is(err, sql.ErrNoRows) {
		return drift.Baseline{}, fmt.Errorf("baseline %q (no baseline has this id or label; verdryx baselines lists them): %w", idOrLabel, ErrNotFound)
	}
	if err != nil {
		return drift.Baseline{}, fmt.Errorf("load baseline %s: %w", idOrLabel, err)
	}
	if b.CreatedAt, err = parseTime(created); err != nil {
		return drift.Baseline{}, fmt.Errorf("load baseline %s: created_at: %w", b.ID, err)
	}
	return b, nil
}

// BaselineInfo is one row of BaselineList.
type BaselineInfo struct {
	drift.Baseline
	// Cases is the number of cases of the baseline's run, graded or not.
	Cases int `json:"case_count"`
}

// BaselineList lists every baseline, oldest first (by created_at, then
// insertion order), with its run's case count. It only reads.
func (s *Store) BaselineList(ctx context.Context) ([]BaselineInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT b.id, b.eval_run_id, b.mean_score, b.created_at, b.label,
		(SELECT COUNT(*) FROM scores WHERE run_id = b.eval_run_id) + (SELECT COUNT(*) FROM unmeasured WHERE run_id = b.eval_run_id)
		FROM baselines b ORDER BY b.created_at, b.rowid`)
	if err != nil {
		return nil, fmt.Errorf("list baselines: %w", err)
	}
	defer rows.Close()
	var out []BaselineInfo
	for rows.Next() {
		var bi BaselineInfo
		var created string
		if err := rows.Scan(&bi.ID, &bi.RunID, &bi.MeanScore, &created, &bi.Label, &bi.Cases); err != nil {
			return nil, fmt.Errorf("list baselines: %w", err)
		}
		if bi.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("list baselines: %s created_at: %w", bi.ID, err)
		}
		out = append(out, bi)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list baselines: %w", err)
	}
	return out, nil
}

// AgentScores returns, per agent id, every graded case score of the runs
// that carry an agent id (runs without one belong to nobody and are left
// out), in run then case order.
func (s *Store) AgentScores(ctx context.Context) (map[string][]float64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.agent_id, sc.value FROM scores sc JOIN eval_runs r ON r.id = sc.run_id
		WHERE r.agent_id <> '' ORDER BY r.started_at, r.rowid, sc.seq`)
	if err != nil {
		return nil, fmt.Errorf("agent scores: %w", err)
	}
	defer rows.Close()
	out := map[string][]float64{}
	for rows.Next() {
		var agent string
		var v float64
		if err := rows.Scan(&agent, &v); err != nil {
			return nil, fmt.Errorf("agent scores: %w", err)
		}
		out[agent] = append(out[agent], v)
	}
	return out, rows.Err()
}
