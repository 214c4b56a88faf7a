package grading_test

import (
	"context"
	"fmt"

	"github.com/verdryx/verdryx/grading"
)

func ExampleGradeToolTrace() {
	exact, _ := grading.GradeToolTrace([]string{"lookup_order", "issue_refund"}, []string{"lookup_order", "issue_refund"})
	swapped, _ := grading.GradeToolTrace([]string{"lookup_order", "issue_refund"}, []string{"issue_refund", "lookup_order"})
	none, _ := grading.GradeToolTrace([]string{}, nil)
	fmt.Printf("exact %.2f, swapped %.2f, correctly none %.2f\n", exact, swapped, none)
	// Output: exact 1.00, swapped 0.50, correctly none 1.00
}

func ExampleGradeOutcome() {
	for _, tag := range []string{"case_resolved", "escalated", "abandoned", "lost_in_space"} {
		v, _ := grading.GradeOutcome(nil, tag)
		fmt.Printf("%s %.1f\n", tag, v)
	}
	// Output:
	// case_resolved 1.0
	// escalated 0.5
	// abandoned 0.0
	// lost_in_space 0.0
}

func ExampleRunner_Run() {
	set, err := grading.ParseEvalSet([]byte(`{"id":"demo","cases":[
		{"id":"echo","prompt":"hello","expected":"hello"},
		{"id":"polite","prompt":"so sorry","expected":"(?i)sorry","grader":"regex"},
		{"id":"outcome","prompt":"escalated","grader":"outcome_tag"}]}`), "")
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := (&grading.Runner{Model: &grading.Stub{}}).Run(context.Background(), set, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range run.Scores {
		fmt.Printf("%-8s %-12s %.2f\n", s.CaseID, s.Grader, s.Value)
	}
	mean, ok := run.Mean()
	fmt.Printf("mean %.3f measured=%v\n", mean, ok)
	// Output:
	// echo     exact        1.00
	// polite   regex        1.00
	// outcome  outcome_tag  0.50
	// mean 0.833 measured=true
}

func ExampleComputeDrift() {
	mk := func(id string, vals ...float64) grading.Run {
		r := grading.Run{ID: id, EvalSetID: "demo", EvalSetDigest: "sha256:d", Model: "stub"}
		for i, v := range vals {
			r.Scores = append(r.Scores, grading.Score{CaseID: fmt.Sprint("c", i), Value: v})
		}
		return r
	}
	base := mk("run-1", 1, 1, 1, 1, 0.5, 1, 1, 1)
	bl := grading.Baseline{ID: "bl-1", RunID: "run-1", MeanScore: 0.9375}
	window := []grading.Run{mk("run-3", 1, 0, 1, 0, 0.5, 1, 0, 1), mk("run-2", 1, 0, 1, 0, 0.5, 1, 0, 1)}
	rep, err := grading.ComputeDrift(bl, base, window, grading.DriftOptions{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("mean %.4f delta %+.4f verdict %s, ci_high below 0: %v\n", rep.MeanScore, rep.Delta, rep.Verdict, *rep.CIHigh < 0)
	// Output: mean 0.5625 delta -0.3750 verdict regressed, ci_high below 0: true
}
