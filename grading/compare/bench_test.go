package compare

import (
	"fmt"
	"testing"

	"github.com/verdryx/verdryx/grading"
)

// BenchmarkCompute5Models2000Cases is the comparison's own work (table,
// intervals, paired tests with Holm, frontier, recommendation,
// disagreements) over 5 models x 2,000 cases, beside the model calls.
func BenchmarkCompute5Models2000Cases(b *testing.B) {
	runs := benchRuns(5, 2000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(runs, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRuns makes models x cases runs, model k passing about 60+8k% of the
// cases (a fixed pattern per model, so the models disagree on many).
func benchRuns(models, cases int) []grading.Run {
	runs := make([]grading.Run, models)
	for k := range runs {
		rate := 60 + 8*k
		runs[k] = synthRun(fmt.Sprintf("m%d", k), cases, 0.0001*float64(k+1), func(i int) bool { return (i*(k+7)+k)%100 < rate })
	}
	return runs
}
