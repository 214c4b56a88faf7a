package grading_test

import (
	"context"
	"fmt"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/llm"
)

func ExampleRunner_RunWithID() {
	set, err := grading.ParseEvalSet([]byte(`{"id":"demo","cases":[
		{"id":"echo","prompt":"hello","expected":"hello"},
		{"id":"polite","prompt":"so sorry","expected":"(?i)sorry","grader":"regex"},
		{"id":"outcome","prompt":"escalated","grader":"outcome_tag"}]}`), "")
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := (&grading.Runner{Model: &llm.Stub{}}).RunWithID(context.Background(), set, "", "")
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
