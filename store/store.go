// Package store is verdryx's one SQLite file (pure-Go driver, no cgo). It
// keeps eval runs with their per-case scores and baselines (SaveRun, Run,
// Runs, RecentRuns, Baselines, PutBaseline) and the worker's eval requests,
// claimed and committed exactly once (ClaimRequest, CommitRequest).
// ResolvePath resolves where the file is. Partition state is not here: its
// one persisted copy is the KV bucket (docs/architecture.md).
//
// The schema (schema.go, docs/formats.md) is the Python verdryx's with
// verdryx's added: the stack's console and a Python verdryx read and write
// the same file. Open migrates a store the Python verdryx wrote in place,
// after a copy; a file of any other shape is refused untouched. The file
// runs in WAL mode with foreign keys on and a busy timeout, and every write
// is one transaction: a crash mid-save leaves no half-saved run. A Store is
// safe for concurrent use.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/internal/ids"
)

// Errors callers test with errors.Is.
var (
	// ErrSchemaVersion: a newer build (or a newer Python verdryx) wrote
	// the file.
	ErrSchemaVersion = errors.New("store: schema version is newer than this build's")
	// ErrNeedsMigration: a read-only open of a store the Python verdryx
	// wrote; a write open (or verdryx store migrate) migrates it.
	ErrNeedsMigration = errors.New("store: written by the Python verdryx, not migrated yet")
	ErrNotFound       = errors.New("store: not found")
	ErrUnmeasured     = errors.New("store: run has no graded case")
	// ErrBadLabel: a baseline label of the shape of a baseline id.
	ErrBadLabel = errors.New("store: labels may not start with \"bl-\" (baseline ids do)")
	// ErrUnknownShape: the file is neither empty, nor this build's store,
	// nor the Python verdryx's; it is refused untouched.
	ErrUnknownShape = errors.New("store: not a verdryx store")
	// ErrAlreadyDone is returned when committing a request that is not
	// recorded as running (never claimed, or already committed).
	ErrAlreadyDone = errors.New("store: eval request is not running")
	// ErrLogRecord: a log record this store cannot apply (malformed, or
	// with columns this build's schema does not have: a newer verdryx
	// wrote it).
	ErrLogRecord = errors.New("store: log record cannot be applied")
)

// Options tune Open.
type Options struct {
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection or process; 0 means 5 s.
	BusyTimeout time.Duration
	// ReadOnly opens the file read-only (SQLite mode=ro): nothing is
	// created, migrated or written. A missing file, an empty one and a
	// Python verdryx's store not yet migrated (ErrNeedsMigration) are
	// refused.
	ReadOnly bool

	// beforeCommit, when set, runs inside the schema transaction just
	// before its commit (tests interrupt a migration there).
	beforeCommit func()
}

// Migration is what Open did to a store the Python verdryx wrote.
type Migration struct {
	// From is the file's shape before.
	From Shape `json:"from"`
	// Backup is the copy of the file made before anything changed.
	Backup string `json:"backup"`
	// Runs, Scores, Unanswered and Baselines count the rows kept.
	Runs       int `json:"runs"`
	Scores     int `json:"scores"`
	Unanswered int `json:"unanswered"`
	Baselines  int `json:"baselines"`
}

// Store is an open eval store. It is safe for concurrent use.
type Store struct {
	db       *sql.DB
	path     string
	readOnly bool
	migrated *Migration
}

// pageSize is the page size of a store file created by this build.
const pageSize = 64 << 10

// dsn is the driver's name of the file: a file: URI (so mode=ro is
// SQLite's), with the connection pragmas.
func dsn(path string, readOnly bool, busy time.Duration) string {
	uri := "file:" + strings.ReplaceAll(path, "%", "%25")
	if readOnly {
		return fmt.Sprintf("%s?mode=ro&_pragma=foreign_keys(1)&_pragma=busy_timeout(%d)", uri, busy.Milliseconds())
	}
	// A new file gets 64 KiB pages: eval runs store their scores and
	// answers as large rows, and SQLite reads an overflow chain page by
	// page (fewer, larger pages read it in fewer steps). An existing file
	// keeps its page size. The WAL is checkpointed every 64 pages (4 MiB,
	// as 1,000 pages of 4 KiB were) and truncated to 4 MiB after, so it
	// does not grow with the pages.
	return fmt.Sprintf("%s?_pragma=page_size(%d)&_pragma=wal_autocheckpoint(64)&_pragma=journal_size_limit(%d)"+
		"&_pragma=foreign_keys(1)&_pragma=busy_timeout(%d)&_txlock=immediate",
		uri, pageSize, 4<<20, busy.Milliseconds())
}

// Open opens the store at path. For writing (the default) it creates the
// file (never a directory) and the schema in an empty file, migrates a
// Python verdryx's store in place (Migration says how), and refuses any
// other shape (ErrSchemaVersion, ErrUnknownShape) leaving it untouched.
// With ReadOnly it only reads: see Options.ReadOnly.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store %s: path may not contain '?' or '#'", path)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	name := dsn(path, opts.ReadOnly, opts.BusyTimeout)
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, readOnly: opts.ReadOnly}
	if opts.ReadOnly {
		err = s.checkReadable(ctx)
	} else {
		err = s.ensureSchema(ctx, opts.beforeCommit)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// Path returns the file the store was opened at.
func (s *Store) Path() string { return s.path }

// Migrated returns what Open migrated, nil when the file was not a Python
// verdryx's store.
func (s *Store) Migrated() *Migration { return s.migrated }

// Close closes the database. A store opened for writing is then left
// checkpointed, in rollback-journal mode when no other connection has it
// open, so a read-only reader needs neither the WAL nor write access; the
// next open for writing turns WAL on again.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.readOnly {
		return err
	}
	// Busy timeout 0: when anyone else has the file open, the switch fails
	// at once and the file stays in WAL mode for them.
	settle, oerr := sql.Open("sqlite", dsn(s.path, false, 0))
	if oerr == nil {
		settle.SetMaxOpenConns(1)
		_, _ = settle.Exec("PRAGMA journal_mode=DELETE")
		settle.Close()
	}
	return err
}

// checkReadable refuses a read-only open of anything but this build's
// schema.
func (s *Store) checkReadable(ctx context.Context) error {
	sh, err := s.inspectSnapshot(ctx)
	if err != nil {
		return err
	}
	switch sh.Kind {
	case KindCurrent:
		return nil
	case KindPython:
		return fmt.Errorf("%w: the first verdryx command that writes to it (eval, baseline, serve) or verdryx store migrate migrates it in place, after a copy; read-only commands leave it as it is", ErrNeedsMigration)
	case KindEmpty:
		return fmt.Errorf("%w: the file holds no tables yet", ErrUnknownShape)
	}
	return errShape(sh)
}

// ensureSchema creates the schema in an empty file, migrates a Python
// verdryx's store after copying it (in one transaction: columns added
// with their defaults, no row touched) and refuses any other shape. The
// shape is read again inside the write transaction, so two processes
// opening one file at once migrate it once.
func (s *Store) ensureSchema(ctx context.Context, beforeCommit func()) error {
	sh, err := s.inspectSnapshot(ctx)
	if err != nil {
		return err
	}
	switch sh.Kind {
	case KindCurrent:
		return s.enableWAL(ctx)
	case KindUnknown:
		return errShape(sh)
	}
	var m *Migration
	if sh.Kind == KindPython {
		m = &Migration{From: sh}
		if m.Backup, err = s.backup(ctx); err != nil {
			return err
		}
	}
	if err := s.enableWAL(ctx); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer tx.Rollback()
	now, err := inspect(ctx, tx)
	if err != nil {
		return err
	}
	switch {
	case now.Kind == KindCurrent:
		return nil // another process did it first
	case now.Kind == KindUnknown:
		return errShape(now)
	case now.Kind == KindPython && m == nil:
		return errors.New("the file changed while it was opened (a Python verdryx's store appeared); open it again")
	}
	if err := upgrade(ctx, tx); err != nil {
		return err
	}
	if m != nil {
		for _, c := range []struct {
			n     *int
			table string
		}{{&m.Runs, "eval_runs"}, {&m.Scores, "scores"}, {&m.Unanswered, "unanswered"}, {&m.Baselines, "baselines"}} {
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+c.table).Scan(c.n); err != nil {
				return fmt.Errorf("migrate: count %s: %w", c.table, err)
			}
		}
	}
	if beforeCommit != nil {
		beforeCommit()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: commit: %w", err)
	}
	s.migrated = m
	return nil
}

// inspectSnapshot reads the file's shape in one read transaction, so its
// several queries see one state of the file, never half of a migration
// another process commits meanwhile.
func (s *Store) inspectSnapshot(ctx context.Context) (Shape, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Shape{}, fmt.Errorf("read schema: %w", err)
	}
	defer tx.Rollback()
	return inspect(ctx, tx)
}

func (s *Store) enableWAL(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err != nil {
		return fmt.Errorf("enable wal: %w", err)
	}
	return nil
}

// backup copies the file, as it is, beside it (VACUUM INTO a temporary
// name, synced, then renamed) and returns the copy's path.
func (s *Store) backup(ctx context.Context) (string, error) {
	final := fmt.Sprintf("%s.python-%s.bak", s.path, time.Now().UTC().Format("20060102T150405.000000000Z"))
	tmp := final + ".tmp"
	if _, err := s.db.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("copy before migrating: %w", err)
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("copy before migrating: %w", err)
	}
	return final, nil
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

// formatTime writes a time as the Python verdryx does
// (datetime.astimezone(UTC).isoformat()): microseconds, omitted when zero,
// and +00:00, e.g. 2026-07-17T10:00:00.123456+00:00. In one store the
// strings sort as the times do.
func formatTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05-07:00")
	}
	return t.Format("2006-01-02T15:04:05.000000-07:00")
}

// parseTime reads a stored time: RFC 3339 with any fraction and offset
// (what the Python verdryx and formatTime write).
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// parseNullTime reads a time that may be NULL (finished_at of a run the
// Python verdryx had in flight): the zero time.
func parseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseTime(s.String)
}

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

// saveRun inserts a run and its scores inside tx: the measured cases in
// scores, the unmeasured ones in unanswered with their reason code and
// detail, each with its position in the set (seq).
func saveRun(ctx context.Context, tx *sql.Tx, run grading.Run) (err error) {
	prov, err := json.Marshal(run.Provenance)
	if err != nil {
		return fmt.Errorf("save run %s: provenance: %w", run.ID, err)
	}
	settings := ""
	if run.Settings != nil {
		b, err := json.Marshal(run.Settings)
		if err != nil {
			return fmt.Errorf("save run %s: settings: %w", run.ID, err)
		}
		settings = string(b)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO eval_runs
		(id, model, started_at, finished_at, eval_set_id, eval_set_digest, agent_id, judge_id, verdryx_version, request_id, provenance, settings, comparison_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run.ID, run.Model, formatTime(run.StartedAt), formatTime(run.FinishedAt), run.EvalSetID, run.EvalSetDigest,
		run.AgentID, run.Judge, run.Version, run.RequestID, string(prov), settings, run.ComparisonID)
	if err != nil {
		return fmt.Errorf("save run %s: %w", run.ID, err)
	}
	for i, sc := range run.Scores {
		checks, merr := json.Marshal(sc.Checks)
		if merr != nil {
			return fmt.Errorf("save run %s: case %s checks: %w", run.ID, sc.CaseID, merr)
		}
		typed, answerID := "", ""
		if sc.Typed != nil {
			b, merr := json.Marshal(sc.Typed)
			if merr != nil {
				return fmt.Errorf("save run %s: case %s typed verdict: %w", run.ID, sc.CaseID, merr)
			}
			typed, answerID = string(b), sc.Typed.AnswerID
		}
		if sc.Graded() {
			if !(sc.Value >= 0 && sc.Value <= 1) {
				return fmt.Errorf("save run %s: case %s: value %v is not a score in [0, 1]", run.ID, sc.CaseID, sc.Value)
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO scores
				(run_id, case_id, value, tokens, cost_usd, seq, grader, duration_ns, checks, output, typed)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				run.ID, sc.CaseID, sc.Value, sc.Tokens, sc.CostUSD, i, sc.Grader, int64(sc.Duration), string(checks), sc.Output, typed)
		} else {
			reason := sc.Reason
			if reason == "" {
				reason = grading.ReasonUnmeasured
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO unanswered
				(run_id, case_id, answer_id, reason, tokens, cost_usd, detail, seq, grader, duration_ns, checks, output, typed)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				run.ID, sc.CaseID, answerID, reason, sc.Tokens, sc.CostUSD, sc.Unmeasured, i, sc.Grader, int64(sc.Duration), string(checks), sc.Output, typed)
		}
		if err != nil {
			return fmt.Errorf("save run %s: case %s: %w", run.ID, sc.CaseID, err)
		}
	}
	if err := notLogged(ctx, tx, KindRun, run.ID); err != nil {
		return fmt.Errorf("save run %s: %w", run.ID, err)
	}
	return nil
}

// runColumns are the columns scanRun reads, in its order.
const runColumns = `id, eval_set_id, eval_set_digest, agent_id, model, judge_id, verdryx_version, request_id, started_at, finished_at, provenance, settings, comparison_id`

// scanRun reads one eval_runs row of runColumns. A run the Python verdryx
// wrote has no eval set, no provenance, no settings, and may have no
// finish time.
func scanRun(scan func(...any) error) (grading.Run, error) {
	var run grading.Run
	var started, prov, settings string
	var finished sql.NullString
	if err := scan(&run.ID, &run.EvalSetID, &run.EvalSetDigest, &run.AgentID, &run.Model, &run.Judge,
		&run.Version, &run.RequestID, &started, &finished, &prov, &settings, &run.ComparisonID); err != nil {
		return grading.Run{}, err
	}
	if settings != "" {
		run.Settings = &grading.Settings{}
		if err := json.Unmarshal([]byte(settings), run.Settings); err != nil {
			return grading.Run{}, fmt.Errorf("run %s settings: %w", run.ID, err)
		}
	}
	var err error
	if run.StartedAt, err = parseTime(started); err != nil {
		return grading.Run{}, fmt.Errorf("run %s started_at: %w", run.ID, err)
	}
	if run.FinishedAt, err = parseNullTime(finished); err != nil {
		return grading.Run{}, fmt.Errorf("run %s finished_at: %w", run.ID, err)
	}
	if prov != "" {
		if err := json.Unmarshal([]byte(prov), &run.Provenance); err != nil {
			return grading.Run{}, fmt.Errorf("run %s provenance: %w", run.ID, err)
		}
	}
	return run, nil
}

// caseColumns selects a run's cases from scores and unanswered alike
// (%[1]s: an optional WHERE), in set order: seq, and for the Python
// verdryx's rows (seq NULL) scores before unanswered, each by id.
const caseColumns = `SELECT run_id, seq IS NULL, seq, 0 AS src, id, case_id, grader, value, '' AS reason, '' AS detail, '' AS answer_id,
		tokens, cost_usd, duration_ns, checks, output, typed FROM scores %[1]s
	UNION ALL
	SELECT run_id, seq IS NULL, seq, 1, id, case_id, grader, 0, reason, detail, answer_id,
		tokens, cost_usd, duration_ns, checks, output, typed FROM unanswered %[1]s
	ORDER BY 1, 2, 3, 4, 5`

// scanCase reads one row of caseColumns; Checks are decoded when
// decodeChecks(runID) says so (nil: always), else left nil.
func scanCase(scan func(...any) error, decodeChecks func(runID string) bool) (runID string, sc grading.Score, err error) {
	var noSeq, src, id int64
	var seq sql.NullInt64
	var dur int64
	var checks, typed, detail, answerID string
	if err := scan(&runID, &noSeq, &seq, &src, &id, &sc.CaseID, &sc.Grader, &sc.Value, &sc.Reason, &detail, &answerID,
		&sc.Tokens, &sc.CostUSD, &dur, &checks, &sc.Output, &typed); err != nil {
		return "", grading.Score{}, err
	}
	sc.Duration = time.Duration(dur)
	if src == 1 {
		sc.Value = 0
		sc.Unmeasured = detail
		if sc.Unmeasured == "" {
			sc.Unmeasured = sc.Reason
		}
	}
	if (decodeChecks == nil || decodeChecks(runID)) && checks != "" && checks != "null" && checks != "[]" {
		if err := json.Unmarshal([]byte(checks), &sc.Checks); err != nil {
			return "", grading.Score{}, fmt.Errorf("case %s checks: %w", sc.CaseID, err)
		}
	}
	switch {
	case typed != "":
		sc.Typed = &grading.TypedVerdict{}
		if err := json.Unmarshal([]byte(typed), sc.Typed); err != nil {
			return "", grading.Score{}, fmt.Errorf("case %s typed verdict: %w", sc.CaseID, err)
		}
	case src == 1 && answerID != "":
		// The Python verdryx's record of a typed case typryx left
		// unanswered: its answer id and reason.
		sc.Typed = &grading.TypedVerdict{AnswerID: answerID, Unanswered: true, Reason: sc.Reason}
		if sc.Grader == "" {
			sc.Grader = grading.GraderTyped
		}
	}
	return runID, sc, nil
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
	// Settings are the run's settings that change scores; nil when it
	// records none (see grading.Settings).
	Settings *grading.Settings `json:"settings"`
}

// Runs lists every stored run, most recent first.
func (s *Store) Runs(ctx context.Context) ([]RunInfo, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT r.id, r.eval_set_id, r.model, r.agent_id, r.started_at, r.settings,
			(SELECT COUNT(*) FROM scores WHERE run_id = r.id),
			(SELECT COUNT(*) FROM unanswered WHERE run_id = r.id),
			(SELECT AVG(value) FROM scores WHERE run_id = r.id),
			(SELECT COALESCE(SUM(cost_usd), 0) FROM scores WHERE run_id = r.id) +
			(SELECT COALESCE(SUM(cost_usd), 0) FROM unanswered WHERE run_id = r.id)
		FROM eval_runs r ORDER BY r.started_at DESC, r.rowid DESC`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []RunInfo
	for rows.Next() {
		var ri RunInfo
		var started, settings string
		var mean sql.NullFloat64
		if err := rows.Scan(&ri.ID, &ri.EvalSetID, &ri.Model, &ri.AgentID, &started, &settings, &ri.Graded, &ri.Unmeasured, &mean, &ri.CostUSD); err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		if ri.StartedAt, err = parseTime(started); err != nil {
			return nil, fmt.Errorf("list runs: run %s started_at: %w", ri.ID, err)
		}
		if mean.Valid {
			m := mean.Float64
			ri.MeanScore = &m
		}
		if settings != "" {
			ri.Settings = &grading.Settings{}
			if err := json.Unmarshal([]byte(settings), ri.Settings); err != nil {
				return nil, fmt.Errorf("list runs: run %s settings: %w", ri.ID, err)
			}
		}
		ri.Cases = ri.Graded + ri.Unmeasured
		out = append(out, ri)
	}
	return out, rows.Err()
}

// Run loads one run with every score, graded and unmeasured, in case order.
// A missing run is ErrNotFound.
func (s *Store) Run(ctx context.Context, id string) (grading.Run, error) {
	run, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM eval_runs WHERE id = ?`, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return grading.Run{}, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return grading.Run{}, fmt.Errorf("load run %s: %w", id, err)
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(caseColumns, "WHERE run_id = ?1"), id)
	if err != nil {
		return grading.Run{}, fmt.Errorf("load run %s scores: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		_, sc, err := scanCase(rows.Scan, nil)
		if err != nil {
			return grading.Run{}, fmt.Errorf("load run %s: %w", id, err)
		}
		run.Scores = append(run.Scores, sc)
	}
	if err := rows.Err(); err != nil {
		return grading.Run{}, fmt.Errorf("load run %s scores: %w", id, err)
	}
	return run, nil
}

// RecentRuns returns up to n runs of the eval set and model, most recent
// first, skipping the run ids in exclude. An evalSetID of "" (a run the
// Python verdryx wrote records no eval set) takes the model's runs of any
// set, as the Python verdryx's drift window did.
func (s *Store) RecentRuns(ctx context.Context, evalSetID, model string, n int, exclude ...string) ([]grading.Run, error) {
	return s.RecentRunsWhere(ctx, evalSetID, model, n, nil, exclude...)
}

// RecentRunsWhere is RecentRuns taking only the runs keep accepts (nil
// accepts every run): keep sees each candidate's id and settings (nil: not
// recorded), most recent first, until n are kept; a run it refuses is not
// loaded.
func (s *Store) RecentRunsWhere(ctx context.Context, evalSetID, model string, n int, keep func(id string, settings *grading.Settings) bool, exclude ...string) ([]grading.Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, settings FROM eval_runs WHERE (?1 = '' OR eval_set_id = ?1) AND model = ?2
		ORDER BY started_at DESC, rowid DESC`, evalSetID, model)
	if err != nil {
		return nil, fmt.Errorf("recent runs of %s/%s: %w", evalSetID, model, err)
	}
	var ids []string
	for rows.Next() && len(ids) < n {
		var id, settings string
		if err := rows.Scan(&id, &settings); err != nil {
			rows.Close()
			return nil, fmt.Errorf("recent runs of %s/%s: %w", evalSetID, model, err)
		}
		if slices.Contains(exclude, id) {
			continue
		}
		if keep != nil {
			var st *grading.Settings
			if settings != "" {
				st = &grading.Settings{}
				if err := json.Unmarshal([]byte(settings), st); err != nil {
					rows.Close()
					return nil, fmt.Errorf("recent runs of %s/%s: run %s settings: %w", evalSetID, model, id, err)
				}
			}
			if !keep(id, st) {
				continue
			}
		}
		ids = append(ids, id)
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

// CreateBaseline is PutBaseline for callers that need only the baseline.
func (s *Store) CreateBaseline(ctx context.Context, runID, label string, now time.Time) (drift.Baseline, error) {
	p, err := s.PutBaseline(ctx, BaselineSpec{RunID: runID, Label: label}, now)
	return p.Baseline, err
}

// BaselineSpec names the baseline PutBaseline makes.
type BaselineSpec struct {
	RunID string
	// Label, when set, names the baseline: a label names the newest
	// baseline that carries it. "" makes an unlabelled baseline.
	Label string
}

// Put is what PutBaseline did.
type Put struct {
	drift.Baseline
	// Created is false when the baseline already existed.
	Created bool `json:"created"`
	// Previous is the baseline of another run the label named before
	// (it keeps its id and label), nil when none.
	Previous *drift.Baseline `json:"previous,omitempty"`
}

// PutBaseline snapshots a stored run's mean as a baseline, idempotently:
//
//   - a label whose newest baseline is of the same run returns that
//     baseline (Created false), as does an unlabelled spec for a run that
//     already has an unlabelled baseline;
//   - otherwise a new baseline is made (Created true); a label that named
//     another run's baseline now names the new one (Previous), as the
//     Python verdryx's labels do (the stack's console labels every
//     admission of an agent alike).
//
// A run with no graded case is refused with ErrUnmeasured: a baseline of
// an unmeasured mean would be a made-up number. A label that has the shape
// of a baseline id ("bl-...") is refused: ids and labels share drift's
// --baseline. It runs in one transaction.
func (s *Store) PutBaseline(ctx context.Context, spec BaselineSpec, now time.Time) (Put, error) {
	if strings.HasPrefix(spec.Label, "bl-") {
		return Put{}, fmt.Errorf("baseline label %q: %w", spec.Label, ErrBadLabel)
	}
	run, err := s.Run(ctx, spec.RunID)
	if err != nil {
		return Put{}, err
	}
	mean, ok := run.Mean()
	if !ok {
		return Put{}, fmt.Errorf("baseline of run %s: %w (%d cases, all unmeasured)", spec.RunID, ErrUnmeasured, len(run.Scores))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Put{}, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	}
	defer tx.Rollback()
	var q *sql.Row
	if spec.Label != "" {
		q = tx.QueryRowContext(ctx, `SELECT b.id, b.eval_run_id, b.mean_score, b.created_at, b.label FROM baselines b `+s.labelOrder("WHERE b.label = ?"), spec.Label)
	} else {
		q = tx.QueryRowContext(ctx, `SELECT id, eval_run_id, mean_score, created_at, label FROM baselines
			WHERE eval_run_id = ? AND label = '' ORDER BY created_at, rowid LIMIT 1`, spec.RunID)
	}
	existing, err := scanBaseline(q.Scan)
	var p Put
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Put{}, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	case existing.RunID == spec.RunID:
		return Put{Baseline: existing}, nil
	default:
		p.Previous = &existing
	}
	p.Baseline = drift.Baseline{ID: ids.New("bl", now), RunID: spec.RunID, MeanScore: mean, CreatedAt: now.UTC().Truncate(time.Microsecond), Label: spec.Label}
	p.Created = true
	if _, err := tx.ExecContext(ctx, `INSERT INTO baselines (id, eval_run_id, mean_score, created_at, label) VALUES (?, ?, ?, ?, ?)`,
		p.ID, p.RunID, p.MeanScore, formatTime(p.CreatedAt), p.Label); err != nil {
		return Put{}, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	}
	if err := notLogged(ctx, tx, KindBaseline, p.ID); err != nil {
		return Put{}, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	}
	if err := tx.Commit(); err != nil {
		return Put{}, fmt.Errorf("baseline of run %s: %w", spec.RunID, err)
	}
	return p, nil
}

// scanBaseline reads one baselines row (id, eval_run_id, mean_score,
// created_at, label).
func scanBaseline(scan func(...any) error) (drift.Baseline, error) {
	var b drift.Baseline
	var created string
	if err := scan(&b.ID, &b.RunID, &b.MeanScore, &created, &b.Label); err != nil {
		return drift.Baseline{}, err
	}
	var err error
	if b.CreatedAt, err = parseTime(created); err != nil {
		return drift.Baseline{}, fmt.Errorf("baseline %s created_at: %w", b.ID, err)
	}
	return b, nil
}

// Baseline loads a baseline by id, else the newest baseline with that
// label (labelOrder: the latest in the quality log); neither is
// ErrNotFound. An id wins over an equal label.
func (s *Store) Baseline(ctx context.Context, idOrLabel string) (drift.Baseline, error) {
	b, err := scanBaseline(s.db.QueryRowContext(ctx, `SELECT b.id, b.eval_run_id, b.mean_score, b.created_at, b.label FROM baselines b `+
		s.labelOrder("WHERE b.id = ?1 OR (b.label = ?1 AND b.label <> '')", "b.id = ?1 DESC"), idOrLabel).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return drift.Baseline{}, fmt.Errorf("baseline %q (no baseline has this id or label; verdryx baselines lists them): %w", idOrLabel, ErrNotFound)
	}
	if err != nil {
		return drift.Baseline{}, fmt.Errorf("load baseline %s: %w", idOrLabel, err)
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
		(SELECT COUNT(*) FROM scores WHERE run_id = b.eval_run_id) + (SELECT COUNT(*) FROM unanswered WHERE run_id = b.eval_run_id)
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
		WHERE r.agent_id <> '' ORDER BY r.started_at, r.rowid, sc.id`)
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
