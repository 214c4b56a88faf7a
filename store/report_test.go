package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunsSinceAndBaselines(t *testing.T) {
	st, _ := openTest(t)
	ctx := context.Background()
	// Saved out of order: RunsSince returns them oldest first.
	require.NoError(t, st.SaveRun(ctx, sampleRun("r3", "", t0.Add(2*time.Hour), 1, 0.5, 0)))
	require.NoError(t, st.SaveRun(ctx, sampleRun("r1", "", t0, 1, 1)))
	require.NoError(t, st.SaveRun(ctx, sampleRun("r2", "", t0.Add(time.Hour), 0.5, 1, 1)))
	b, err := st.CreateBaseline(ctx, "r1", "v1", t0.Add(time.Minute))
	require.NoError(t, err)

	runs, err := st.RunsSince(ctx, time.Time{}, 1)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	assert.Equal(t, []string{"r1", "r2", "r3"}, []string{runs[0].ID, runs[1].ID, runs[2].ID})
	require.Len(t, runs[2].Scores, 3)
	assert.Equal(t, []string{"a", "b", "c"}, []string{runs[2].Scores[0].CaseID, runs[2].Scores[1].CaseID, runs[2].Scores[2].CaseID}, "case order")
	assert.Equal(t, 0.5, runs[2].Scores[1].Value)
	assert.NotEmpty(t, runs[2].Scores[1].Checks, "checks decoded for the most recent run")
	assert.Nil(t, runs[1].Scores[0].Checks, "older runs carry no checks with checksFor 1")
	assert.Equal(t, "sha256:d", runs[0].Provenance.EvalSetDigest)

	all, err := st.RunsSince(ctx, time.Time{}, -1)
	require.NoError(t, err)
	assert.NotEmpty(t, all[0].Scores[0].Checks, "checksFor < 0 decodes every run's checks")

	recent, err := st.RunsSince(ctx, t0.Add(30*time.Minute), -1)
	require.NoError(t, err)
	require.Len(t, recent, 2)
	assert.Equal(t, "r2", recent[0].ID)
	assert.Len(t, recent[0].Scores, 3)

	bls, err := st.Baselines(ctx)
	require.NoError(t, err)
	require.Len(t, bls, 1)
	assert.Equal(t, b.ID, bls[0].ID)
	assert.Equal(t, "r1", bls[0].RunID)
	assert.Equal(t, 1.0, bls[0].MeanScore)
}
