package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The store's side of the fleet's quality log (package qualitylog,
// docs/formats.md "Quality log"): every run and baseline committed here is
// listed as not yet on the log (quality_records.seq NULL) in the same
// transaction, exported as a LogRecord to be published, and every record
// read from the log is applied once, in log order (ApplyLog), so every
// store of the fleet holds the same runs and baselines.

// Kinds of log record.
const (
	KindRun      = "run"
	KindBaseline = "baseline"
)

// LogRecord is a run or a baseline as the quality log carries it: the
// rows the store holds of it, table by table, each row an object of column
// name to value (TEXT as a string, INTEGER and REAL as a number, NULL as
// null), without the AUTOINCREMENT id of scores and unanswered rows. A run
// has one eval_runs row and its scores and unanswered rows (in insertion
// order); a baseline has one baselines row.
type LogRecord struct {
	Kind string           `json:"kind"`
	ID   string           `json:"id"`
	Rows map[string][]Row `json:"rows"`
}

// Row is one table row of a LogRecord.
type Row map[string]any

// recordTables are the tables of each kind of record, in insertion order,
// and the column naming the record's id.
func recordTables(kind string) (tables []string, idCol string, ok bool) {
	switch kind {
	case KindRun:
		return []string{"eval_runs", "scores", "unanswered"}, "id", true
	case KindBaseline:
		return []string{"baselines"}, "id", true
	}
	return nil, "", false
}

// notLogged lists a run or baseline committed in tx as not yet on the log.
func notLogged(ctx context.Context, tx *sql.Tx, kind, id string) error {
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO quality_records (id, kind) VALUES (?, ?)`, id, kind); err != nil {
		return fmt.Errorf("list %s %s for the quality log: %w", kind, id, err)
	}
	return nil
}

// labelOrder is the FROM tail (after "FROM baselines b ") selecting the
// newest baseline that where admits: the baselines not yet on the log
// first (committed here, they come after everything applied), then the
// latest in the log, then the latest created (as the Python verdryx
// orders them). first, when given, orders before all that.
func (s *Store) labelOrder(where string, first ...string) string {
	order := append(slices.Clone(first), "b.created_at DESC", "b.rowid DESC")
	join := "LEFT JOIN quality_records q ON q.id = b.id "
	order = append(append(slices.Clone(first), "q.seq IS NULL DESC", "q.seq DESC"), order[len(first):]...)
	return join + where + " ORDER BY " + strings.Join(order, ", ") + " LIMIT 1"
}

// ExportRecord reads the record of a stored run or baseline (kind
// KindRun or KindBaseline); a missing one is ErrNotFound.
func (s *Store) ExportRecord(ctx context.Context, kind, id string) (LogRecord, error) {
	tables, idCol, ok := recordTables(kind)
	if !ok {
		return LogRecord{}, fmt.Errorf("export %q: %w: unknown kind", id, ErrLogRecord)
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return LogRecord{}, fmt.Errorf("export %s %s: %w", kind, id, err)
	}
	defer tx.Rollback()
	rec := LogRecord{Kind: kind, ID: id, Rows: map[string][]Row{}}
	for i, t := range tables {
		col, order := idCol, ""
		if i > 0 {
			col, order = "run_id", " ORDER BY id"
		}
		rows, err := readRows(ctx, tx, fmt.Sprintf("SELECT * FROM %s WHERE %s = ?%s", t, col, order), id)
		if err != nil {
			return LogRecord{}, fmt.Errorf("export %s %s: %s: %w", kind, id, t, err)
		}
		if i == 0 && len(rows) == 0 {
			return LogRecord{}, fmt.Errorf("%s %q: %w", kind, id, ErrNotFound)
		}
		if i > 0 {
			for _, r := range rows {
				delete(r, "id") // AUTOINCREMENT: each store numbers its own
			}
		}
		if len(rows) > 0 {
			rec.Rows[t] = rows
		}
	}
	return rec, nil
}

// readRows reads every row of query as a Row.
func readRows(ctx context.Context, q querier, query string, args ...any) ([]Row, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []Row
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := Row{}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			r[c] = vals[i]
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DecodeLogRecord reads a record as the log carries it (JSON), keeping
// integers and reals apart as SQLite holds them.
func DecodeLogRecord(data []byte) (LogRecord, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var rec LogRecord
	if err := d.Decode(&rec); err != nil {
		return LogRecord{}, fmt.Errorf("%w: %w", ErrLogRecord, err)
	}
	tables, idCol, ok := recordTables(rec.Kind)
	if !ok {
		return LogRecord{}, fmt.Errorf("%w: kind %q (want %s or %s)", ErrLogRecord, rec.Kind, KindRun, KindBaseline)
	}
	if rec.ID == "" {
		return LogRecord{}, fmt.Errorf("%w: %s record without an id", ErrLogRecord, rec.Kind)
	}
	for t, rows := range rec.Rows {
		if !slices.Contains(tables, t) {
			return LogRecord{}, fmt.Errorf("%w: %s %s: table %q is not one of a %s's (%s)", ErrLogRecord, rec.Kind, rec.ID, t, rec.Kind, strings.Join(tables, ", "))
		}
		for _, r := range rows {
			for c, v := range r {
				if n, ok := v.(json.Number); ok {
					if i, err := n.Int64(); err == nil && !strings.ContainsAny(string(n), ".eE") {
						r[c] = i
					} else if f, err := n.Float64(); err == nil {
						r[c] = f
					} else {
						return LogRecord{}, fmt.Errorf("%w: %s %s: %s.%s: %w", ErrLogRecord, rec.Kind, rec.ID, t, c, err)
					}
				}
			}
		}
	}
	if main := rec.Rows[tables[0]]; len(main) != 1 || main[0][idCol] != rec.ID {
		return LogRecord{}, fmt.Errorf("%w: %s %s: want one %s row with id %q", ErrLogRecord, rec.Kind, rec.ID, tables[0], rec.ID)
	}
	return rec, nil
}

// Applied is what ApplyLog did with one record.
type Applied string

// ApplyLog outcomes.
const (
	// AppliedNew: the record's rows were inserted.
	AppliedNew Applied = "new"
	// AppliedPresent: the store held the run or baseline already (its
	// own, committed here, or an earlier record of the same id): nothing
	// inserted, its log place noted.
	AppliedPresent Applied = "present"
	// AppliedOrphan: a baseline whose run the store does not hold (the
	// log pruned it, or it was never logged): not inserted.
	AppliedOrphan Applied = "orphan"
	// AppliedBefore: seq is at or before the store's position: nothing done.
	AppliedBefore Applied = "already-applied"
)

// ApplyLog applies the record at log sequence seq, in one transaction with
// the store's new position: a record at or before the position does
// nothing (AppliedBefore), so each is applied once; a run or baseline the
// store holds already is not inserted again (AppliedPresent). A sequence
// past the position plus one counts the records between as missed (the log
// pruned them before this store read them). last is the log's last
// sequence as known (0: unknown), kept for LogState.
func (s *Store) ApplyLog(ctx context.Context, seq, last uint64, rec LogRecord, now time.Time) (_ Applied, err error) {
	tables, idCol, ok := recordTables(rec.Kind)
	if !ok || seq == 0 {
		return "", fmt.Errorf("apply log record %d: %w: kind %q", seq, ErrLogRecord, rec.Kind)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("apply log record %d: %w", seq, err)
	}
	defer tx.Rollback()
	var applied uint64
	if err := tx.QueryRowContext(ctx, `SELECT applied_seq FROM quality_log WHERE id = 1`).Scan(&applied); err != nil {
		return "", fmt.Errorf("apply log record %d: read position: %w", seq, err)
	}
	if seq <= applied {
		return AppliedBefore, nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE %s = ?`, tables[0], idCol), rec.ID).Scan(&n); err != nil {
		return "", fmt.Errorf("apply log record %d: %w", seq, err)
	}
	what := AppliedPresent
	if n == 0 {
		what = AppliedNew
		if rec.Kind == KindBaseline {
			runID, _ := rec.Rows["baselines"][0]["eval_run_id"].(string)
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM eval_runs WHERE id = ?`, runID).Scan(&n); err != nil {
				return "", fmt.Errorf("apply log record %d: %w", seq, err)
			}
			if n == 0 {
				what = AppliedOrphan
			}
		}
	}
	if what == AppliedNew {
		for _, t := range tables {
			if err := insertRows(ctx, tx, t, rec.Rows[t]); err != nil {
				return "", fmt.Errorf("apply log record %d (%s %s): %w", seq, rec.Kind, rec.ID, err)
			}
		}
	}
	if what != AppliedOrphan {
		if _, err := tx.ExecContext(ctx, `INSERT INTO quality_records (id, kind, seq) VALUES (?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET seq = COALESCE(seq, excluded.seq)`, rec.ID, rec.Kind, seq); err != nil {
			return "", fmt.Errorf("apply log record %d: %w", seq, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE quality_log SET applied_seq = ?1, missed = missed + ?2,
		last_seq = max(last_seq, ?1, ?3), checked_at = ?4 WHERE id = 1`, seq, seq-applied-1, last, formatTime(now)); err != nil {
		return "", fmt.Errorf("apply log record %d: %w", seq, err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("apply log record %d: commit: %w", seq, err)
	}
	return what, nil
}

// insertRows inserts rows into table, each with the columns it names; a
// column the table does not have is ErrLogRecord.
func insertRows(ctx context.Context, tx *sql.Tx, table string, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	have, err := columns(ctx, tx, table)
	if err != nil {
		return err
	}
	for _, r := range rows {
		cols := make([]string, 0, len(r))
		for c := range r {
			if !slices.Contains(have, c) || (c == "id" && table != "eval_runs" && table != "baselines") {
				return fmt.Errorf("%w: %s has no column %q (a newer verdryx wrote the record: upgrade this one)", ErrLogRecord, table, c)
			}
			cols = append(cols, c)
		}
		slices.Sort(cols)
		args := make([]any, len(cols))
		for i, c := range cols {
			args[i] = r[c]
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("%s: %w", table, err)
		}
	}
	return nil
}

// LogState is how far a store has applied the quality log.
type LogState struct {
	// Known is false for a store that knows no log position (schema older
	// than 3, read as it is).
	Known bool `json:"known"`
	// Applied is the last log sequence applied (0: none).
	Applied uint64 `json:"applied_seq"`
	// Last is the log's last sequence when last looked (ApplyLog,
	// NoteLogEnd); CheckedAt is when (zero: never).
	Last      uint64    `json:"last_seq"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// Missed counts records the log pruned before this store read them.
	Missed uint64 `json:"missed"`
	// Pending counts runs and baselines committed here and not yet read
	// back from the log.
	Pending int `json:"pending"`
}

// Behind is how many log records the store had not applied when it last
// looked.
func (l LogState) Behind() uint64 {
	if l.Last > l.Applied {
		return l.Last - l.Applied
	}
	return 0
}

// LogState reads the store's place in the quality log. It only reads.
func (s *Store) LogState(ctx context.Context) (LogState, error) {
	var l LogState
	var checked string
	if err := s.db.QueryRowContext(ctx, `SELECT applied_seq, last_seq, missed, checked_at,
		(SELECT COUNT(*) FROM quality_records WHERE seq IS NULL) FROM quality_log WHERE id = 1`).Scan(&l.Applied, &l.Last, &l.Missed, &checked, &l.Pending); err != nil {
		return LogState{}, fmt.Errorf("read the quality log position: %w", err)
	}
	l.Known = true
	if checked != "" {
		t, err := parseTime(checked)
		if err != nil {
			return LogState{}, fmt.Errorf("read the quality log position: checked_at: %w", err)
		}
		l.CheckedAt = t
	}
	return l, nil
}

// NoteLogEnd records the log's last sequence as seen at now (LogState.Last).
func (s *Store) NoteLogEnd(ctx context.Context, last uint64, now time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE quality_log SET last_seq = max(last_seq, ?), checked_at = ? WHERE id = 1`, last, formatTime(now)); err != nil {
		return fmt.Errorf("note the quality log's end: %w", err)
	}
	return nil
}

// Pending lists the runs and baselines committed here and not yet read
// back from the log, in commit order (a baseline after its run): kind and
// id of each.
func (s *Store) Pending(ctx context.Context) ([][2]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT kind, id FROM quality_records WHERE seq IS NULL ORDER BY rowid`)
	if err != nil {
		return nil, fmt.Errorf("list records not yet on the quality log: %w", err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			return nil, fmt.Errorf("list records not yet on the quality log: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// SkipLog moves the store's position past seq without applying anything:
// the record there is not one a verdryx store can ever apply (it does not
// decode as a log record). A seq at or before the position does nothing.
func (s *Store) SkipLog(ctx context.Context, seq, last uint64, now time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE quality_log SET missed = missed + ?1 - applied_seq - 1, applied_seq = ?1,
		last_seq = max(last_seq, ?1, ?2), checked_at = ?3 WHERE id = 1 AND applied_seq < ?1`, seq, last, formatTime(now)); err != nil {
		return fmt.Errorf("pass over log record %d: %w", seq, err)
	}
	return nil
}
