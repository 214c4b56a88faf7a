package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// The store is the Python verdryx's schema with verdryx's added (docs/formats.md):
// its four tables exactly as the Python verdryx creates them, so the
// stack's console and a Python verdryx sharing the file read and write
// them as before, each with verdryx's columns appended (every one with a
// default, so the Python verdryx's inserts still work), and verdryx's own
// tables beside them. PRAGMA user_version stays 1, the version the Python
// verdryx checks; verdryx's own schema version is in the verdryx_schema
// table. A fresh file and a migrated Python store are built by the same
// steps (upgrade), so they cannot differ.

// userVersion is the PRAGMA user_version of the Python verdryx's schema,
// kept so the Python verdryx still opens the file.
const userVersion = 1

// schemaVersion is verdryx's own schema version, in verdryx_schema: 3,
// the first released (1 and 2 were development versions no release
// wrote; a file of either is refused, nothing touched).
const schemaVersion = 3

// pythonDDL is the Python verdryx's schema, both generations (the second
// added unanswered without a version bump), verbatim in its shape.
const pythonDDL = `
CREATE TABLE IF NOT EXISTS eval_runs (
    id            TEXT PRIMARY KEY,
    model         TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    finished_at   TEXT
);
CREATE TABLE IF NOT EXISTS scores (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT NOT NULL REFERENCES eval_runs(id),
    case_id       TEXT NOT NULL,
    value         REAL NOT NULL,
    tokens        INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL NOT NULL DEFAULT 0.0
);
CREATE INDEX IF NOT EXISTS idx_scores_run_id ON scores(run_id);
CREATE TABLE IF NOT EXISTS baselines (
    id            TEXT PRIMARY KEY,
    eval_run_id   TEXT NOT NULL REFERENCES eval_runs(id),
    mean_score    REAL NOT NULL,
    created_at    TEXT NOT NULL,
    label         TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS unanswered (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT NOT NULL REFERENCES eval_runs(id),
    case_id       TEXT NOT NULL,
    answer_id     TEXT NOT NULL,
    reason        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_unanswered_run_id ON unanswered(run_id);
`

// pythonColumns are the columns of the Python verdryx's tables, in order.
func pythonColumns() map[string][]string {
	return map[string][]string{
		"eval_runs":  {"id", "model", "started_at", "finished_at"},
		"scores":     {"id", "run_id", "case_id", "value", "tokens", "cost_usd"},
		"baselines":  {"id", "eval_run_id", "mean_score", "created_at", "label"},
		"unanswered": {"id", "run_id", "case_id", "answer_id", "reason"},
	}
}

// addedColumn is a column verdryx appends to a Python table, since
// verdryx schema version since.
type addedColumn struct {
	table, name, decl string
}

// addedColumns are verdryx's columns on the Python tables, in the order
// they are appended. A row the Python verdryx inserts gets the defaults:
// no eval set (its drift window pools by model, as the Python verdryx's
// did), no provenance, seq NULL (its case order is its id).
//
//   - eval_runs: the eval set and its digest, the agent, the judge that
//     graded llm_judge cases, the build, the eval request, the provenance
//     (JSON), the settings that changed the run's scores (JSON of
//     grading.Settings; empty when not recorded) and the model comparison
//     that graded the run (empty for none).
//   - scores (measured cases only) and unanswered (every case the run could
//     not measure; reason is a short code, detail says why): the case's
//     position in the set (seq), grader, duration, checks (JSON), the
//     graded output, typryx's verdict (JSON).
func addedColumns() []addedColumn {
	var out []addedColumn
	for _, c := range [][2]string{
		{"eval_set_id", "TEXT NOT NULL DEFAULT ''"},
		{"eval_set_digest", "TEXT NOT NULL DEFAULT ''"},
		{"agent_id", "TEXT NOT NULL DEFAULT ''"},
		{"judge_id", "TEXT NOT NULL DEFAULT ''"},
		{"verdryx_version", "TEXT NOT NULL DEFAULT ''"},
		{"request_id", "TEXT NOT NULL DEFAULT ''"},
		{"provenance", "TEXT NOT NULL DEFAULT ''"},
	} {
		out = append(out, addedColumn{"eval_runs", c[0], c[1]})
	}
	caseCols := [][2]string{
		{"seq", "INTEGER"},
		{"grader", "TEXT NOT NULL DEFAULT ''"},
		{"duration_ns", "INTEGER NOT NULL DEFAULT 0"},
		{"checks", "TEXT NOT NULL DEFAULT ''"},
		{"output", "TEXT NOT NULL DEFAULT ''"},
		{"typed", "TEXT NOT NULL DEFAULT ''"},
	}
	for _, c := range caseCols {
		out = append(out, addedColumn{"scores", c[0], c[1]})
	}
	for _, c := range append([][2]string{
		{"tokens", "INTEGER NOT NULL DEFAULT 0"},
		{"cost_usd", "REAL NOT NULL DEFAULT 0.0"},
		{"detail", "TEXT NOT NULL DEFAULT ''"},
	}, caseCols...) {
		out = append(out, addedColumn{"unanswered", c[0], c[1]})
	}
	out = append(out, addedColumn{"eval_runs", "settings", "TEXT NOT NULL DEFAULT ''"})
	out = append(out, addedColumn{"eval_runs", "comparison_id", "TEXT NOT NULL DEFAULT ''"})
	return out
}

// ownDDL is verdryx's tables and indexes beside the Python ones: the drift
// window's and the agent's indexes, baselines by label (a label names the
// newest baseline that carries it, as labels may repeat in the Python
// verdryx's stores), the eval requests (claimed with their run id before
// grading starts, committed with their run, counting the result's events
// already emitted), and verdryx's schema version.
const ownDDL = `
CREATE INDEX IF NOT EXISTS eval_runs_window ON eval_runs (eval_set_id, model, started_at);
CREATE INDEX IF NOT EXISTS eval_runs_model ON eval_runs (model, started_at);
CREATE INDEX IF NOT EXISTS eval_runs_agent ON eval_runs (agent_id);
CREATE INDEX IF NOT EXISTS baselines_label ON baselines (label, created_at);
CREATE INDEX IF NOT EXISTS baselines_run ON baselines (eval_run_id);
CREATE TABLE IF NOT EXISTS eval_requests (
	request_id TEXT PRIMARY KEY,
	result     TEXT NOT NULL,
	done_at    TEXT NOT NULL,
	run_id     TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL DEFAULT 'done',
	emitted    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS verdryx_schema (version INTEGER NOT NULL);
`

// logDDL (schema 3) is the store's place in the fleet's quality log
// (docs/formats.md): quality_log's one row is how far the store has
// applied the log (applied_seq, in the same transaction as the rows each
// record brought), the log's last sequence when last looked (last_seq)
// and how many records the log had pruned before this store read them
// (missed); quality_records names every run and baseline the store knows
// the log place of: seq is its log sequence, NULL while it is only in this
// store (committed here, not yet read back from the log). Upgrading a
// store lists its runs, then its baselines, as not yet on the log, so a
// worker offers them to the fleet.
const logDDL = `
CREATE TABLE IF NOT EXISTS quality_log (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	applied_seq INTEGER NOT NULL DEFAULT 0,
	last_seq    INTEGER NOT NULL DEFAULT 0,
	missed      INTEGER NOT NULL DEFAULT 0,
	checked_at  TEXT NOT NULL DEFAULT ''
);
INSERT OR IGNORE INTO quality_log (id) VALUES (1);
CREATE TABLE IF NOT EXISTS quality_records (
	id   TEXT PRIMARY KEY,
	kind TEXT NOT NULL,
	seq  INTEGER
);
CREATE INDEX IF NOT EXISTS quality_records_pending ON quality_records (seq) WHERE seq IS NULL;
INSERT OR IGNORE INTO quality_records (id, kind) SELECT id, 'run' FROM eval_runs ORDER BY started_at, rowid;
INSERT OR IGNORE INTO quality_records (id, kind) SELECT id, 'baseline' FROM baselines ORDER BY created_at, rowid;
`

// Kind is what a file holds, as Inspect reads it.
type Kind string

// Kinds of file.
const (
	// KindEmpty: no tables (a new or empty file); opening for writing
	// creates the schema.
	KindEmpty Kind = "empty"
	// KindCurrent: this build's schema; opened as it is.
	KindCurrent Kind = "verdryx"
	// KindPython: a store the Python verdryx wrote; opening for writing
	// migrates it in place after a copy.
	KindPython Kind = "python"
	// KindUnknown: anything else; refused, nothing touched.
	KindUnknown Kind = "unknown"
)

// Shape is what Inspect found in a file.
type Shape struct {
	Kind Kind `json:"kind"`
	// UserVersion is PRAGMA user_version.
	UserVersion int `json:"user_version"`
	// Version is verdryx_schema's version (KindCurrent and a newer
	// verdryx's store), 0 otherwise.
	Version int `json:"verdryx_schema,omitempty"`
	// Tables are the file's tables, sorted (SQLite's own left out).
	Tables []string `json:"tables"`
	// Unanswered is false for a Python store of the first generation
	// (before the unanswered table).
	Unanswered bool `json:"unanswered_table"`
	// Problem says why a KindUnknown file is refused; Newer is set when
	// a newer build (or a newer Python verdryx) wrote it.
	Problem string `json:"problem,omitempty"`
	Newer   bool   `json:"newer,omitempty"`
	// Rows counts the rows of the Python verdryx's tables present (a
	// Python verdryx's store and this build's).
	Rows map[string]int `json:"rows,omitempty"`
}

// querier is what Inspect reads with: a *sql.DB, *sql.Conn or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// inspect reads what a file holds. It only reads.
func inspect(ctx context.Context, q querier) (Shape, error) {
	var sh Shape
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&sh.UserVersion); err != nil {
		return Shape{}, fmt.Errorf("read user_version: %w", err)
	}
	tables, err := queryStrings(ctx, q, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return Shape{}, fmt.Errorf("list tables: %w", err)
	}
	sh.Tables = tables
	sh.Unanswered = slices.Contains(tables, "unanswered")
	has := func(t string) bool { return slices.Contains(tables, t) }
	unknown := func(format string, args ...any) (Shape, error) {
		sh.Kind, sh.Problem = KindUnknown, fmt.Sprintf(format, args...)
		return sh, nil
	}
	switch {
	case len(tables) == 0 && sh.UserVersion == 0:
		sh.Kind = KindEmpty
		return sh, nil
	case len(tables) == 0:
		return unknown("user_version %d and no tables", sh.UserVersion)
	case sh.UserVersion > userVersion:
		sh.Newer = true
		return unknown("user_version %d is newer than any verdryx schema this build reads (%d)", sh.UserVersion, userVersion)
	case has("unmeasured"):
		return unknown("a store of an unreleased verdryx build (it has an unmeasured table): move it aside")
	}
	if has("verdryx_schema") {
		if err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM verdryx_schema").Scan(&sh.Version); err != nil {
			return Shape{}, fmt.Errorf("read verdryx_schema: %w", err)
		}
		switch {
		case sh.Version > schemaVersion:
			sh.Newer = true
			return unknown("verdryx schema %d, newer than this build's (%d): use a newer verdryx", sh.Version, schemaVersion)
		case sh.Version < schemaVersion:
			return unknown("verdryx schema %d, which no release wrote (an unreleased build's): move it aside", sh.Version)
		}
		for _, t := range []string{"eval_requests", "quality_log", "quality_records"} {
			if !has(t) {
				return unknown("verdryx schema %d without its table %s (an unreleased build's): move it aside", sh.Version, t)
			}
		}
		if p, err := missingColumns(ctx, q, true); err != nil || p != "" {
			if err != nil {
				return Shape{}, err
			}
			return unknown("verdryx schema %d, but %s", sh.Version, p)
		}
		sh.Kind = KindCurrent
		return sh, nil
	}
	for _, t := range tables {
		if _, ok := pythonColumns()[t]; !ok {
			return unknown("table %s is neither the Python verdryx's nor verdryx's", t)
		}
	}
	for _, t := range []string{"eval_runs", "scores", "baselines"} {
		if !has(t) {
			return unknown("the Python verdryx's table %s is missing", t)
		}
	}
	if p, err := missingColumns(ctx, q, false); err != nil || p != "" {
		if err != nil {
			return Shape{}, err
		}
		return unknown("not the Python verdryx's schema: %s", p)
	}
	sh.Kind = KindPython
	return sh, nil
}

// missingColumns compares the columns of the Python tables present with
// the Python verdryx's (exactly those) or, withAdded, this build's (those
// and verdryx's added, in order), and says what differs ("" when nothing
// does).
func missingColumns(ctx context.Context, q querier, withAdded bool) (string, error) {
	for t, want := range pythonColumns() {
		have, err := columns(ctx, q, t)
		if err != nil {
			return "", err
		}
		if len(have) == 0 && !withAdded {
			continue // the first generation has no unanswered
		}
		want = slices.Clone(want)
		if withAdded {
			for _, c := range addedColumns() {
				if c.table == t {
					want = append(want, c.name)
				}
			}
		}
		if !slices.Equal(have, want) {
			return fmt.Sprintf("table %s has columns (%s), want (%s)", t, strings.Join(have, ", "), strings.Join(want, ", ")), nil
		}
	}
	return "", nil
}

// columns lists a table's columns in order (none when it does not exist).
func columns(ctx context.Context, q querier, table string) ([]string, error) {
	cols, err := queryStrings(ctx, q, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	return cols, nil
}

func queryStrings(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// upgrade brings an empty file or a Python verdryx's store to this
// build's schema inside tx: the Python tables that
// are missing, verdryx's columns on them (those a file lacks, each with
// its default), verdryx's tables and indexes, the versions. It touches no
// row.
func upgrade(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, pythonDDL); err != nil {
		return fmt.Errorf("create the Python verdryx's tables: %w", err)
	}
	for _, c := range addedColumns() {
		have, err := columns(ctx, tx, c.table)
		if err != nil {
			return err
		}
		if slices.Contains(have, c.name) {
			continue
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", c.table, c.name, c.decl)); err != nil {
			return fmt.Errorf("add column %s.%s: %w", c.table, c.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, ownDDL); err != nil {
		return fmt.Errorf("create verdryx's tables: %w", err)
	}
	if _, err := tx.ExecContext(ctx, logDDL); err != nil {
		return fmt.Errorf("create the quality log's tables: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM verdryx_schema"); err != nil {
		return fmt.Errorf("stamp verdryx_schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO verdryx_schema (version) VALUES (?)", schemaVersion); err != nil {
		return fmt.Errorf("stamp verdryx_schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", userVersion)); err != nil {
		return fmt.Errorf("stamp user_version: %w", err)
	}
	return nil
}

// errShape is a refused file: its kind and problem name what was found.
func errShape(sh Shape) error {
	if sh.Newer {
		return fmt.Errorf("%w: %s; nothing was changed", ErrSchemaVersion, sh.Problem)
	}
	return fmt.Errorf("%w: %s; nothing was changed", ErrUnknownShape, sh.Problem)
}

// Inspect reads what the file at path holds without changing it (a
// read-only open): verdryx store check prints it. A missing file is an
// error.
func Inspect(ctx context.Context, path string) (Shape, error) {
	if _, err := os.Stat(path); err != nil {
		return Shape{}, fmt.Errorf("inspect store %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(path, true, 5*time.Second))
	if err != nil {
		return Shape{}, fmt.Errorf("inspect store %s: %w", path, err)
	}
	defer db.Close()
	sh, err := (&Store{db: db}).inspectSnapshot(ctx)
	if err != nil {
		return Shape{}, fmt.Errorf("inspect store %s: %w", path, err)
	}
	if sh.Kind == KindPython || sh.Kind == KindCurrent {
		sh.Rows = map[string]int{}
		for _, t := range sh.Tables {
			if _, ok := pythonColumns()[t]; !ok {
				continue
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t).Scan(&n); err != nil {
				return Shape{}, fmt.Errorf("inspect store %s: count %s: %w", path, t, err)
			}
			sh.Rows[t] = n
		}
	}
	return sh, nil
}
