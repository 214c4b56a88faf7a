package grading

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/verdryx/verdryx/grading/llm"
)

// BenchmarkRunnerStub grades 500 exact/regex cases with the stub model: the
// runner's own overhead per case, without any model latency.
func BenchmarkRunnerStub(b *testing.B) {
	var cases []string
	for i := range 500 {
		if i%2 == 0 {
			cases = append(cases, fmt.Sprintf(`{"id":"c%d","prompt":"p%d","expected":"p%d"}`, i, i, i))
		} else {
			cases = append(cases, fmt.Sprintf(`{"id":"c%d","prompt":"p%d","expected":"^p\\d+$","grader":"regex"}`, i, i))
		}
	}
	set, err := ParseEvalSet([]byte(`{"id":"s","cases":[`+strings.Join(cases, ",")+`]}`), "")
	if err != nil {
		b.Fatal(err)
	}
	r := &Runner{Model: &llm.Stub{}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.RunWithID(context.Background(), set, "", ""); err != nil {
			b.Fatal(err)
		}
	}
}
