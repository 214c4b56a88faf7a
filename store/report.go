package store

import (
	"context"
	"fmt"
	"time"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
)

// Baselines lists every baseline, oldest first (by created_at, then id).
// It only reads.
func (s *Store) Baselines(ctx context.Context) ([]drift.Baseline, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, eval_run_id, mean_score, created_at, label FROM baselines
		ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list baselines: %w", err)
	}
	defer rows.Close()
	var out []drift.Baseline
	for rows.Next() {
		b, err := scanBaseline(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("list baselines: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list baselines: %w", err)
	}
	return out, nil
}

// RunsSince loads every run started at or after since (the zero time means
// all runs) with all its scores, graded and unmeasured, in case order. Runs
// come oldest first (started_at, then insertion order). Decoding checks is
// most of the cost, so they are decoded only for the checksFor most recent
// runs of each eval set and model (checksFor < 0: every run); the scores of
// older runs have nil Checks. It reads the whole selection in two queries,
// so it suits reports over many runs; it only reads.
func (s *Store) RunsSince(ctx context.Context, since time.Time, checksFor int) ([]grading.Run, error) {
	from := ""
	if !since.IsZero() {
		from = formatTime(since)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+runColumns+` FROM eval_runs
		WHERE started_at >= ? ORDER BY started_at, rowid`, from)
	if err != nil {
		return nil, fmt.Errorf("runs since %q: %w", from, err)
	}
	var out []grading.Run
	index := map[string]int{}
	for rows.Next() {
		run, err := scanRun(rows.Scan)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("runs since %q: %w", from, err)
		}
		index[run.ID] = len(out)
		out = append(out, run)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs since %q: %w", from, err)
	}
	if len(out) == 0 {
		return out, nil
	}
	wantChecks := make([]bool, len(out))
	seen := map[[2]string]int{}
	for i := len(out) - 1; i >= 0; i-- {
		k := [2]string{out[i].EvalSetID, out[i].Model}
		wantChecks[i] = checksFor < 0 || seen[k] < checksFor
		seen[k]++
	}
	where := ""
	args := []any{}
	if from != "" {
		where = "WHERE run_id IN (SELECT id FROM eval_runs WHERE started_at >= ?1)"
		args = []any{from}
	}
	srows, err := s.db.QueryContext(ctx, fmt.Sprintf(caseColumns, where), args...)
	if err != nil {
		return nil, fmt.Errorf("runs since %q: scores: %w", from, err)
	}
	defer srows.Close()
	want := func(runID string) bool { i, ok := index[runID]; return ok && wantChecks[i] }
	for srows.Next() {
		runID, sc, err := scanCase(srows.Scan, want)
		if err != nil {
			return nil, fmt.Errorf("runs since %q: %w", from, err)
		}
		i, ok := index[runID]
		if !ok { // a run inserted between the two queries
			continue
		}
		out[i].Scores = append(out[i].Scores, sc)
	}
	if err := srows.Err(); err != nil {
		return nil, fmt.Errorf("runs since %q: scores: %w", from, err)
	}
	return out, nil
}
