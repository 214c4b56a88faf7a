package grading

import (
	"time"

	"github.com/verdryx/verdryx/grading/grader"
)

// Score is the one result shape of every grader.
//
// A graded case has Unmeasured == "" and Value in [0, 1]. A case that could
// not be graded (the model or judge failed, the judge's answer did not
// parse) has Unmeasured set to the reason and Value 0, and is left out of
// every mean: unmeasured is never zero.
type Score struct {
	CaseID string  `json:"case_id"`
	Grader string  `json:"grader"`
	Value  float64 `json:"value"`
	// Tokens and CostUSD add the model call and, for llm_judge, the judge
	// call. CostUSD is 0 for a stub or an unpriced model (the run's
	// provenance lists unpriced models).
	Tokens  int64          `json:"tokens"`
	CostUSD float64        `json:"cost_usd"`
	Checks  []grader.Check `json:"checks,omitempty"`
	// Duration is the wall time of the case: model call plus grading.
	Duration   time.Duration `json:"duration_ns"`
	Output     string        `json:"output,omitempty"`
	Unmeasured string        `json:"unmeasured,omitempty"`
	// Typed is typryx's verdict on a typed case that was asked; nil for
	// every other case.
	Typed *TypedVerdict `json:"typed,omitempty"`
}

// Graded reports whether the case was graded.
func (s Score) Graded() bool { return s.Unmeasured == "" }

// Unanswered reports whether typryx answered the case unanswered: the
// case is unmeasured, counted apart with typryx's answer id and reason.
func (s Score) Unanswered() bool { return s.Typed != nil && s.Typed.Unanswered }

// Failing returns the names of the checks that failed.
func (s Score) Failing() []string {
	var out []string
	for _, c := range s.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}
