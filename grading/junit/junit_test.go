package junit

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
)

func TestWriteJUnit(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := grading.RunSummary{Cases: 4, Run: grading.Run{ID: "run-1", EvalSetID: "set", EvalSetDigest: "sha256:ab", Model: "stub",
		StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond),
		Scores: []grading.Score{
			{CaseID: "pass", Grader: "exact", Value: 1, Output: "hi", Duration: 2 * time.Millisecond},
			{CaseID: "partial", Grader: "rubric", Value: 0.5, Output: "ha", Checks: []grader.Check{{Name: "a", OK: true}, {Name: "b", Detail: "missing b"}}},
			{CaseID: "fail", Grader: "exact", Value: 0, Checks: []grader.Check{{Name: "exact", Detail: `want "x"`}}},
			{CaseID: "lost", Grader: "llm_judge", Unmeasured: "judge: HTTP 500"},
		}}}
	for _, tc := range []struct {
		passMark          float64
		failures, skipped int
	}{{1, 2, 1}, {0.5, 1, 1}, {0, 0, 1}} {
		var b bytes.Buffer
		require.NoError(t, Write(&b, r, tc.passMark))
		require.True(t, strings.HasPrefix(b.String(), xml.Header), "the XML header first")
		var s Suite
		require.NoError(t, xml.Unmarshal(b.Bytes(), &s))
		assert.Equal(t, tc.failures, s.Failures, "pass mark %v", tc.passMark)
		assert.Equal(t, tc.skipped, s.Skipped)
		assert.Equal(t, 4, s.Tests)
		assert.Equal(t, "1.500", s.Time)
		assert.Equal(t, []Prop{{"run_id", "run-1"}, {"model", "stub"}, {"eval_set_digest", "sha256:ab"}}, s.Props)
		require.Len(t, s.Cases, 4)
		assert.Equal(t, "set.exact", s.Cases[0].Classname)
		assert.Equal(t, "0.002", s.Cases[0].Time)
		assert.Equal(t, "hi", s.Cases[0].SystemOut)
		assert.Nil(t, s.Cases[0].Failure)
		require.NotNil(t, s.Cases[3].Skipped)
		assert.Equal(t, "unmeasured: judge: HTTP 500", s.Cases[3].Skipped.Message)
		if tc.passMark == 1 {
			require.NotNil(t, s.Cases[1].Failure)
			assert.Equal(t, "score 0.500 under 1.000; failed: b", s.Cases[1].Failure.Message)
			assert.Equal(t, "b: missing b\n", s.Cases[1].Failure.Body, "only failed checks, with their detail")
		}
	}
}
