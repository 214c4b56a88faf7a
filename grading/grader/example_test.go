package grader_test

import (
	"fmt"

	"github.com/verdryx/verdryx/grading/grader"
)

func ExampleGradeToolTrace() {
	exact, _ := grader.GradeToolTrace([]string{"lookup_order", "issue_refund"}, []string{"lookup_order", "issue_refund"})
	swapped, _ := grader.GradeToolTrace([]string{"lookup_order", "issue_refund"}, []string{"issue_refund", "lookup_order"})
	none, _ := grader.GradeToolTrace([]string{}, nil)
	fmt.Printf("exact %.2f, swapped %.2f, correctly none %.2f\n", exact, swapped, none)
	// Output: exact 1.00, swapped 0.50, correctly none 1.00
}

func ExampleGradeOutcome() {
	for _, tag := range []string{"case_resolved", "escalated", "abandoned", "lost_in_space"} {
		v, _ := grader.GradeOutcome(nil, tag)
		fmt.Printf("%s %.1f\n", tag, v)
	}
	// Output:
	// case_resolved 1.0
	// escalated 0.5
	// abandoned 0.0
	// lost_in_space 0.0
}
