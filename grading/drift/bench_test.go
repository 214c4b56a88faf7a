package drift

import (
	"testing"

	"github.com/verdryx/verdryx/grading"
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
	window := []grading.Run{mkRun("a", "d", w), mkRun("b", "d", w), mkRun("c", "d", w)}
	bl := baselineOf(base)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(bl, base, window, Options{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
