package grading

import (
	"encoding/json"
	"time"

	"github.com/verdryx/verdryx/grading/grader"
)

// Score is the one result shape of every grader.
//
// A graded case has Unmeasured == "" and Value in [0, 1]. A case that could
// not be graded (the model or judge failed, the judge's answer did not
// parse) has Reason set to a short code (Reason* below, llm.ReasonCostLimit,
// or typryx's own reason), Unmeasured to what happened, and no value: it
// is left out of every mean, and its JSON has "value": null. Unmeasured is
// never zero.
type Score struct {
	CaseID string `json:"case_id"`
	Grader string `json:"grader"`
	// Value is the score in [0, 1]; meaningless (0) when unmeasured.
	Value float64 `json:"value"`
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
	Reason     string        `json:"reason,omitempty"`
	// Typed is typryx's verdict on a typed case that was asked; nil for
	// every other case.
	Typed *TypedVerdict `json:"typed,omitempty"`
}

// Reasons a case is unmeasured (Score.Reason), beside llm.ReasonCostLimit
// and typryx's reasons for an unanswered typed case.
const (
	ReasonModelError    = "model_error"     // the model's call failed
	ReasonJudgeError    = "judge_error"     // the judge's call failed or its answer did not parse
	ReasonRAGError      = "rag_error"       // the rag pipeline failed to answer
	ReasonNoRAGPipeline = "no_rag_pipeline" // no rag pipeline for the model
	ReasonNoJudge       = "no_judge"        // no judge configured
	ReasonTypedDisabled = "typed_disabled"  // typryx not enabled
	ReasonUnanswered    = "unanswered"      // typryx answered unanswered with no reason
	ReasonUnmeasured    = "unmeasured"      // a reason not recorded
	// ReasonLostInCrash: an earlier attempt of the run made the case's
	// paid calls (their cost is counted) and died before recording its
	// answer.
	ReasonLostInCrash = "lost_in_crash"
)

// MarshalJSON writes the score with "value": null when it is unmeasured:
// a reader summing values never adds a zero the run did not score.
func (s Score) MarshalJSON() ([]byte, error) {
	type plain Score
	v := struct {
		plain
		Value *float64 `json:"value"`
	}{plain: plain(s)}
	if s.Graded() {
		v.Value = &s.Value
	}
	return json.Marshal(v)
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
