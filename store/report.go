package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
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
		var b drift.Baseline
		var created string
		if err := rows.Scan(&b.ID, &b.RunID, &b.MeanScore, &created, &b.Label); err != nil {
			return nil, fmt.Errorf("list baselines: %w", err)
		}
		if b.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("list baselines: baseline %s created_at: %w", b.ID, err)
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
	rows, err := s.db.QueryContext(ctx, `SELECT id, eval_set_id, eval_set_digest, agent_id, model, judge_id,
		verdryx_version, request_id, started_at, finished_at, provenance FROM eval_runs
		WHERE started_at >= ? ORDER BY started_at, rowid`, from)
	if err != nil {
		return nil, fmt.Errorf("runs since %q: %w", from, err)
	}
	var out []grading.Run
	index := map[string]int{}
	for rows.Next() {
		var run grading.Run
		var started, finished, prov string
		if err := rows.Scan(&run.ID, &run.EvalSetID, &run.EvalSetDigest, &run.AgentID, &run.Model, &run.Judge,
			&run.Version, &run.RequestID, &started, &finished, &prov); err != nil {
			rows.Close()
			return nil, fmt.Errorf("runs since %q: %w", from, err)
		}
		if run.StartedAt, err = parseTime(started); err != nil {
			rows.Close()
			return nil, fmt.Errorf("runs since %q: run %s started_at: %w", from, run.ID, err)
		}
		if run.FinishedAt, err = parseTime(finished); err != nil {
			rows.Close()
			return nil, fmt.Errorf("runs since %q: run %s finished_at: %w", from, run.ID, err)
		}
		if err := json.Unmarshal([]byte(prov), &run.Provenance); err != nil {
			rows.Close()
			return nil, fmt.Errorf("runs since %q: run %s provenance: %w", from, run.ID, err)
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
	seqs := make([][]int, len(out))
	const cols = `run_id, seq, case_id, grader, %s, tokens, cost_usd, duration_ns, checks, output, typed`
	q := `SELECT ` + fmt.Sprintf(cols, "value, ''") + ` FROM scores UNION ALL SELECT ` + fmt.Sprintf(cols, "0, reason") + ` FROM unmeasured`
	args := []any{}
	if from != "" {
		q = `SELECT ` + fmt.Sprintf(cols, "value, ''") + ` FROM scores WHERE run_id IN (SELECT id FROM eval_runs WHERE started_at >= ?)
			UNION ALL SELECT ` + fmt.Sprintf(cols, "0, reason") + ` FROM unmeasured WHERE run_id IN (SELECT id FROM eval_runs WHERE started_at >= ?)`
		args = []any{from, from}
	}
	srows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("runs since %q: scores: %w", from, err)
	}
	defer srows.Close()
	for srows.Next() {
		var runID, checks, typed string
		var sc grading.Score
		var seq int
		var dur int64
		if err := srows.Scan(&runID, &seq, &sc.CaseID, &sc.Grader, &sc.Value, &sc.Unmeasured, &sc.Tokens, &sc.CostUSD,
			&dur, &checks, &sc.Output, &typed); err != nil {
			return nil, fmt.Errorf("runs since %q: scores: %w", from, err)
		}
		i, ok := index[runID]
		if !ok { // a run inserted between the two queries
			continue
		}
		sc.Duration = time.Duration(dur)
		if wantChecks[i] && checks != "null" && checks != "[]" {
			if err := json.Unmarshal([]byte(checks), &sc.Checks); err != nil {
				return nil, fmt.Errorf("runs since %q: run %s case %s checks: %w", from, runID, sc.CaseID, err)
			}
		}
		if typed != "" {
			sc.Typed = &grading.TypedVerdict{}
			if err := json.Unmarshal([]byte(typed), sc.Typed); err != nil {
				return nil, fmt.Errorf("runs since %q: run %s case %s typed verdict: %w", from, runID, sc.CaseID, err)
			}
		}
		out[i].Scores = append(out[i].Scores, sc)
		seqs[i] = append(seqs[i], seq)
	}
	if err := srows.Err(); err != nil {
		return nil, fmt.Errorf("runs since %q: scores: %w", from, err)
	}
	for i := range out {
		sortBySeq(out[i].Scores, seqs[i])
	}
	return out, nil
}

// sortBySeq orders scores by their seq (the case order of the run).
func sortBySeq(scores []grading.Score, seqs []int) {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return seqs[idx[a]] < seqs[idx[b]] })
	sorted := make([]grading.Score, len(scores))
	for i, j := range idx {
		sorted[i] = scores[j]
	}
	copy(scores, sorted)
}
