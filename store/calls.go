package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"time"

	"github.com/verdryx/verdryx/grading"
)

// workerSchema is the worker's trace-call state: one row per call with a
// stable dedupe key, processed segment digests and eval request results.
// It is applied as a versioned migration step (see migrations).
const workerSchema = `
CREATE TABLE trace_calls (
	key            TEXT PRIMARY KEY,
	seq            INTEGER NOT NULL,
	ts_millis      INTEGER NOT NULL,
	run_id         TEXT NOT NULL,
	has_run_id     INTEGER NOT NULL,
	model          TEXT NOT NULL,
	decision       TEXT NOT NULL,
	input_tokens   INTEGER NOT NULL,
	output_tokens  INTEGER NOT NULL,
	cost_microusd  INTEGER NOT NULL,
	step           INTEGER NOT NULL,
	has_step       INTEGER NOT NULL,
	agent_id       TEXT NOT NULL,
	saved_microusd INTEGER NOT NULL,
	parent_run_id  TEXT NOT NULL,
	on_behalf_of   TEXT NOT NULL,
	outcome        TEXT NOT NULL,
	key_id         TEXT NOT NULL,
	unit           TEXT NOT NULL,
	tool_calls     INTEGER
) WITHOUT ROWID;
CREATE INDEX trace_calls_seq ON trace_calls (seq);

CREATE TABLE trace_segments (
	digest     TEXT PRIMARY KEY,
	path       TEXT NOT NULL,
	rows       INTEGER NOT NULL,
	done_at    TEXT NOT NULL
);

CREATE TABLE eval_requests (
	request_id TEXT PRIMARY KEY,
	result     TEXT NOT NULL,
	done_at    TEXT NOT NULL
);
`

// TraceCall is one call record with the key it is deduplicated on (the
// identity of the call: see worker.RecordKey). Seq is the encounter order
// (the stream sequence), used when a call has no step and to break ties
// between calls that share a step.
type TraceCall struct {
	Key  string
	Seq  uint64
	Call calls.Call
}

// Segment marks a fully ingested Parquet segment by its content digest.
type Segment struct {
	Digest string
	Path   string
	Rows   int
	DoneAt time.Time
}

// AddCalls inserts calls in one transaction, ignoring keys already stored,
// and returns how many were new. When segs are given they are marked done
// in the same transaction. Either all of it is stored or none.
func (s *Store) AddCalls(ctx context.Context, cl []TraceCall, segs ...Segment) (inserted int, err error) {
	if len(cl) == 0 && len(segs) == 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("add calls: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	stmt, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO trace_calls
		(key, seq, ts_millis, run_id, has_run_id, model, decision, input_tokens, output_tokens, cost_microusd,
		 step, has_step, agent_id, saved_microusd, parent_run_id, on_behalf_of, outcome, key_id, unit, tool_calls)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, fmt.Errorf("add calls: %w", err)
	}
	defer stmt.Close()
	for _, tc := range cl {
		c := tc.Call
		var tools any
		if c.ToolCalls != nil {
			tools = int64(*c.ToolCalls)
		}
		res, err := stmt.ExecContext(ctx, tc.Key, int64(tc.Seq), c.TSMillis, c.RunID, c.HasRunID, c.Model, c.Decision,
			int64(c.InputTokens), int64(c.OutputTokens), c.CostMicroUSD, int64(c.Step), c.HasStep, c.AgentID,
			c.SavedMicroUSD, c.ParentRunID, c.OnBehalfOf, c.Outcome, c.KeyID, c.Unit, tools)
		if err != nil {
			return 0, fmt.Errorf("add call %q: %w", tc.Key, err)
		}
		n, _ := res.RowsAffected()
		inserted += int(n)
	}
	for _, sg := range segs {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO trace_segments (digest, path, rows, done_at) VALUES (?, ?, ?, ?)`,
			sg.Digest, sg.Path, sg.Rows, formatTime(sg.DoneAt)); err != nil {
			return 0, fmt.Errorf("mark segment %s: %w", sg.Path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("add calls: %w", err)
	}
	return inserted, nil
}

// CallTotals returns the sum of every stored call's cost (micro-USD) and
// tokens (input plus output).
func (s *Store) CallTotals(ctx context.Context) (costMicroUSD, tokens int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_microusd), 0), COALESCE(SUM(input_tokens), 0) + COALESCE(SUM(output_tokens), 0) FROM trace_calls`).
		Scan(&costMicroUSD, &tokens)
	if err != nil {
		return 0, 0, fmt.Errorf("call totals: %w", err)
	}
	return costMicroUSD, tokens, nil
}

// CallCount returns how many calls are stored.
func (s *Store) CallCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM trace_calls`).Scan(&n)
	return n, err
}

// EachCall calls fn for every stored call in encounter order. It stops at
// the first error fn returns.
func (s *Store) EachCall(ctx context.Context, fn func(calls.Call) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT ts_millis, run_id, has_run_id, model, decision, input_tokens, output_tokens,
		cost_microusd, step, has_step, agent_id, saved_microusd, parent_run_id, on_behalf_of, outcome, key_id, unit, tool_calls
		FROM trace_calls ORDER BY seq, key`)
	if err != nil {
		return fmt.Errorf("read calls: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c calls.Call
		var in, out, step int64
		var tools sql.NullInt64
		if err := rows.Scan(&c.TSMillis, &c.RunID, &c.HasRunID, &c.Model, &c.Decision, &in, &out, &c.CostMicroUSD, &step,
			&c.HasStep, &c.AgentID, &c.SavedMicroUSD, &c.ParentRunID, &c.OnBehalfOf, &c.Outcome, &c.KeyID, &c.Unit, &tools); err != nil {
			return fmt.Errorf("read calls: %w", err)
		}
		c.InputTokens, c.OutputTokens, c.Step = uint64(in), uint64(out), uint32(step)
		if tools.Valid {
			v := uint32(tools.Int64)
			c.ToolCalls = &v
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return rows.Err()
}

// SegmentDone reports whether a segment with this content digest was fully
// ingested.
func (s *Store) SegmentDone(ctx context.Context, digest string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM trace_segments WHERE digest = ?`, digest).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("segment %s: %w", digest, err)
	}
	return true, nil
}

// Eval request states.
const (
	RequestRunning = "running" // recorded with its run id; the run is not committed
	RequestDone    = "done"    // the run and the result are committed
)

// EvalRequest is the recorded state of an eval request.
type EvalRequest struct {
	ID    string
	RunID string
	State string
	// Result is the committed result (state done).
	Result []byte
	// Emitted counts the result's events already emitted, in order.
	Emitted int
}

// EvalRequestState returns the recorded state of an eval request, and false
// when it was never recorded.
func (s *Store) EvalRequestState(ctx context.Context, requestID string) (EvalRequest, bool, error) {
	r := EvalRequest{ID: requestID}
	var res string
	err := s.db.QueryRowContext(ctx, `SELECT run_id, state, result, emitted FROM eval_requests WHERE request_id = ?`, requestID).
		Scan(&r.RunID, &r.State, &res, &r.Emitted)
	if errors.Is(err, sql.ErrNoRows) {
		return EvalRequest{}, false, nil
	}
	if err != nil {
		return EvalRequest{}, false, fmt.Errorf("eval request %s: %w", requestID, err)
	}
	if res != "" {
		r.Result = []byte(res)
	}
	return r, true, nil
}

// ClaimRequest records an eval request with the run id it will be graded
// under, before grading starts, and returns the recorded state: the new
// claim, or the one an earlier delivery made (whose run id is then kept,
// so a request regraded after a crash still produces one run).
func (s *Store) ClaimRequest(ctx context.Context, requestID, runID string, now time.Time) (EvalRequest, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT OR IGNORE INTO eval_requests (request_id, result, done_at, run_id, state, emitted)
		VALUES (?, '', ?, ?, ?, 0)`, requestID, formatTime(now), runID, RequestRunning); err != nil {
		return EvalRequest{}, fmt.Errorf("claim eval request %s: %w", requestID, err)
	}
	r, _, err := s.EvalRequestState(ctx, requestID)
	return r, err
}

// CommitRequest saves run and the request's result in one transaction and
// marks the request done: either all of it is stored or none. A request
// already done is left as it is (ErrAlreadyDone).
func (s *Store) CommitRequest(ctx context.Context, requestID string, run grading.Run, result []byte, now time.Time) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit eval request %s: %w", requestID, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, `UPDATE eval_requests SET state = ?, result = ?, done_at = ?, run_id = ?
		WHERE request_id = ? AND state = ?`, RequestDone, string(result), formatTime(now), run.ID, requestID, RequestRunning)
	if err != nil {
		return fmt.Errorf("commit eval request %s: %w", requestID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		err = fmt.Errorf("commit eval request %s: %w", requestID, ErrAlreadyDone)
		return err
	}
	if err = saveRun(ctx, tx, run); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit eval request %s: %w", requestID, err)
	}
	return nil
}

// ErrAlreadyDone is returned when committing a request that is not
// recorded as running (never claimed, or already committed).
var ErrAlreadyDone = errors.New("store: eval request is not running")

// MarkEmitted records that the first n events of a done request were
// emitted.
func (s *Store) MarkEmitted(ctx context.Context, requestID string, n int) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE eval_requests SET emitted = max(emitted, ?) WHERE request_id = ?`, n, requestID); err != nil {
		return fmt.Errorf("eval request %s: mark %d events emitted: %w", requestID, n, err)
	}
	return nil
}

// RequestResult returns the committed result of an eval request, if any.
func (s *Store) RequestResult(ctx context.Context, requestID string) ([]byte, bool, error) {
	r, ok, err := s.EvalRequestState(ctx, requestID)
	if err != nil || !ok || r.State != RequestDone {
		return nil, false, err
	}
	return r.Result, true, nil
}
