package chaos

import (
	"github.com/verdryx/verdryx/calls"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome"
)

func TestGenerateTracesHasEqualStepsAndExactRows(t *testing.T) {
	dir := t.TempDir()
	ts, err := generateTraces(dir, 3000, 5)
	require.NoError(t, err)
	assert.EqualValues(t, 3000, ts.rows)
	assert.Greater(t, ts.segments, 2)
	assert.Equal(t, 20, ts.equalStepRows)
	counts, n, err := directCalls(dir)
	require.NoError(t, err)
	assert.EqualValues(t, 3000, n)
	total := 0
	for _, c := range counts {
		total += c
	}
	assert.Equal(t, 3000, total)
}

func TestCompareReportsNamesEachField(t *testing.T) {
	build := func(cl ...calls.Call) *outcome.Report {
		r, err := outcome.NewReducer(outcome.Options{})
		require.NoError(t, err)
		for _, c := range cl {
			r.Add(c)
		}
		return r.Report()
	}
	blocked := calls.Call{RunID: "r1", HasRunID: true, Step: 1, HasStep: true, Decision: "budget_exceeded", CostMicroUSD: 400}
	retry := calls.Call{RunID: "r1", HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: 150, Outcome: "case_resolved"}
	direct := build(blocked, retry)
	assert.Empty(t, compareReports(direct, build(blocked, retry)))
	diffs := compareReports(direct, build(blocked))
	assert.Contains(t, diffs, "case_resolved runs: direct 1, store 0")
	assert.Contains(t, diffs, "overall calls: direct 2, store 1")
	assert.Contains(t, diffs, "resolved_runs: direct 1, store 0")
	assert.NotEqual(t, fingerprint(blocked), fingerprint(retry))
}
