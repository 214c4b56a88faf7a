package grading

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkComputeDrift: a 200-case baseline against a 3-run window (600
// pooled scores), 2000 resamples for the unpaired CI, the paired bootstrap
// and the sign-flip test: the size of a large nightly suite.
func BenchmarkComputeDrift(b *testing.B) {
	base := mkRun("base", "d", spread(200))
	w := spread(200)
	for i := 0; i < 50; i++ {
		w[i] /= 2
	}
	window := []Run{mkRun("a", "d", w), mkRun("b", "d", w), mkRun("c", "d", w)}
	bl := baselineOf(base)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ComputeDrift(bl, base, window, DriftOptions{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

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
	r := &Runner{Model: &Stub{}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Run(context.Background(), set, ""); err != nil {
			b.Fatal(err)
		}
	}
}
