package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/verdryx/verdryx/grading"
)

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

// CommitResult marks a running request done with its result and id (a
// comparison's: its runs are saved as they are graded), saving no run. A
// request not recorded as running is left as it is (ErrAlreadyDone).
func (s *Store) CommitResult(ctx context.Context, requestID, id string, result []byte, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE eval_requests SET state = ?, result = ?, done_at = ?, run_id = ?
		WHERE request_id = ? AND state = ?`, RequestDone, string(result), formatTime(now), id, requestID, RequestRunning)
	if err != nil {
		return fmt.Errorf("commit eval request %s: %w", requestID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("commit eval request %s: %w", requestID, ErrAlreadyDone)
	}
	return nil
}

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
