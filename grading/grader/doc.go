// Package grader holds the individual graders of an eval case, each
// returning a value in [0, 1] and the named Checks behind it: GradeExact,
// GradeRegex, GradeOutcome (with DefaultOutcomeScores) and GradeToolTrace,
// which are pure functions, and Judge, the llm_judge grader that asks a
// grading/llm Model to score an output against a rubric.
//
// The runner that picks a grader per case is grading.Runner; the rag and
// typed graders live with it, since they need the eval set's golden cases
// and the typryx template resolved for the run.
package grader
