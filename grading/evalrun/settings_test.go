package evalrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
)

// fixedJudge is a judge model that answers every case with one score.
type fixedJudge struct{ id, answer string }

func (j fixedJudge) ID() string { return j.id }
func (j fixedJudge) Complete(context.Context, llm.Call) (llm.Completion, error) {
	return llm.Completion{Text: j.answer}, nil
}

func judgedSet(n int) json.RawMessage {
	var cases []string
	for i := range n {
		cases = append(cases, fmt.Sprintf(`{"id":"j%d","prompt":"p%d","grader":"llm_judge","rubric":"says hello"}`, i, i))
	}
	return json.RawMessage(`{"id":"judged","cases":[` + strings.Join(cases, ",") + `]}`)
}

// TestDriftPoolsOnlyRunsGradedAlike is the case: a baseline graded
// with one judge, later runs graded with another that scores higher, and
// the newest run, graded like the baseline, lower. Pooling the window of 3
// regardless of the judge hides the regression; drift must take only the
// runs graded like the baseline, say which it skipped and why, and pool the
// others only when told to.
func TestDriftPoolsOnlyRunsGradedAlike(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	t0 := time.Date(2026, 12, 7, 4, 46, 0, 0, time.UTC)
	grade := func(i int, judge, answer string) string {
		t.Helper()
		at := t0.Add(time.Duration(i) * time.Minute)
		res, err := evalrun.Execute(ctx, evalrun.Deps{Store: st, Version: "test", Now: func() time.Time { return at },
			Judge: &grader.Judge{Model: fixedJudge{judge, answer}}}, evalrun.Request{EvalSet: judgedSet(5)})
		require.NoError(t, err)
		require.NotNil(t, res.Run.Settings)
		require.Equal(t, judge, res.Run.Settings.Judge, "the run records its judge")
		return res.Run.ID
	}
	baseRun := grade(0, "fake:judge-x", "0.8")
	bl, err := st.CreateBaseline(ctx, baseRun, "b", t0)
	require.NoError(t, err)
	other1 := grade(1, "fake:judge-y", "1")
	other2 := grade(2, "fake:judge-y", "1")
	like := grade(3, "fake:judge-x", "0.7")

	// Default: the window of 3 holds only the run graded like the baseline.
	rep, err := evalrun.CheckDrift(ctx, st, evalrun.DriftRequest{BaselineID: bl.ID, Window: 3})
	require.NoError(t, err)
	assert.Equal(t, []string{like}, rep.WindowRunIDs)
	assert.Equal(t, drift.VerdictRegressed, rep.Verdict, "0.7 against 0.8")
	require.Len(t, rep.Skipped, 2)
	assert.Equal(t, other2, rep.Skipped[0].RunID)
	assert.Equal(t, other1, rep.Skipped[1].RunID)
	assert.Equal(t, []string{"judge fake:judge-x -> fake:judge-y"}, rep.Skipped[0].Changes)
	assert.False(t, rep.ChangedSettings)

	// Told to, it pools them and says so: the other judge's higher scores
	// hide the drop, as they did before the check.
	rep, err = evalrun.CheckDrift(ctx, st, evalrun.DriftRequest{BaselineID: bl.ID, Window: 3, AllowChangedSettings: true})
	require.NoError(t, err)
	assert.Equal(t, []string{like, other2, other1}, rep.WindowRunIDs)
	assert.Equal(t, drift.VerdictOnTrack, rep.Verdict)
	assert.True(t, rep.ChangedSettings)
	assert.Len(t, rep.SettingsChanges, 2)
	assert.Empty(t, rep.Skipped)

	// Same settings are pooled: a second run graded like the baseline.
	like2 := grade(4, "fake:judge-x", "0.9")
	rep, err = evalrun.CheckDrift(ctx, st, evalrun.DriftRequest{BaselineID: bl.ID, Window: 3})
	require.NoError(t, err)
	assert.Equal(t, []string{like2, like}, rep.WindowRunIDs)
	assert.InDelta(t, 0.8, rep.MeanScore, 1e-9)
	assert.Len(t, rep.Skipped, 2)

	// A window of nothing but runs graded otherwise is refused, naming
	// what differed.
	bl2, err := st.CreateBaseline(ctx, grade(-1, "fake:judge-z", "0.6"), "z", t0)
	require.NoError(t, err)
	_, err = evalrun.CheckDrift(ctx, st, evalrun.DriftRequest{BaselineID: bl2.ID, Window: 3})
	require.Error(t, err)
	assert.ErrorIs(t, err, grading.ErrBadRequest)
	assert.ErrorIs(t, err, drift.ErrChangedSettings)
	assert.Contains(t, err.Error(), "judge fake:judge-z -> fake:judge-x")
	assert.Contains(t, err.Error(), "--allow-changed-settings")

	// An eval request's drift check follows the same rule, and its own new
	// run graded otherwise is refused, not skipped (an older run graded
	// like the baseline would stand in for it).
	bl3, err := st.CreateBaseline(ctx, other1, "y", t0)
	require.NoError(t, err)
	_, err = evalrun.Execute(ctx, evalrun.Deps{Store: st, Version: "test", Now: func() time.Time { return t0.Add(time.Hour) },
		Judge: &grader.Judge{Model: fixedJudge{"fake:judge-x", "0.5"}}}, evalrun.Request{EvalSet: judgedSet(5), BaselineID: bl3.ID, Window: 1})
	require.Error(t, err)
	assert.ErrorIs(t, err, grading.ErrBadRequest)
	assert.ErrorIs(t, err, drift.ErrChangedSettings)
	assert.Contains(t, err.Error(), "judge fake:judge-y -> fake:judge-x")
	res, err := evalrun.Execute(ctx, evalrun.Deps{Store: st, Version: "test", Now: func() time.Time { return t0.Add(2 * time.Hour) },
		Judge: &grader.Judge{Model: fixedJudge{"fake:judge-x", "0.5"}}},
		evalrun.Request{EvalSet: judgedSet(5), BaselineID: bl3.ID, Window: 1, AllowChangedSettings: true})
	require.NoError(t, err)
	require.NotNil(t, res.Drift)
	assert.True(t, res.Drift.ChangedSettings)
	assert.Equal(t, drift.VerdictRegressed, res.Drift.Verdict)
}

// TestSemanticAndRAGSettingsRecorded: a rag set graded with and without
// the semantic checks records it, with the pipeline it was answered by; the
// two differ by the semantic judge and threshold only.
func TestSemanticAndRAGSettingsRecorded(t *testing.T) {
	ctx := context.Background()
	with, err := evalrun.Execute(ctx, evalrun.Deps{Version: "test"}, evalrun.Request{EvalSetPath: grimoirePath(t), Semantic: true})
	require.NoError(t, err)
	without, err := evalrun.Execute(ctx, evalrun.Deps{Version: "test"}, evalrun.Request{EvalSetPath: grimoirePath(t)})
	require.NoError(t, err)
	s := with.Run.Settings
	require.NotNil(t, s)
	assert.Equal(t, llm.StubID, s.SemanticJudge)
	assert.Equal(t, grader.DefaultSemanticThreshold, s.SemanticThreshold)
	assert.NotEmpty(t, s.IndexGeneration)
	assert.NotEmpty(t, s.Embedder)
	assert.Equal(t, "vector", s.Retrieval)
	assert.Positive(t, s.TopK)
	assert.Equal(t, "offline-extractive", s.Generator)
	assert.Empty(t, s.Judge, "no llm_judge case, no judge recorded")
	assert.Equal(t, []string{"semantic_judge stub -> (none)", "semantic_threshold 0.7 -> (none)"},
		grading.DiffSettings(with.Run.Settings, without.Run.Settings))
}
