package index

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKernelsAgree checks the selected kernel (assembly where the CPU has
// AVX2+FMA) against a float64 reference for every length up to 80, which
// covers the 32-, 8- and 1-wide loops and their tails.
func TestKernelsAgree(t *testing.T) {
	t.Logf("simd kernel: %v", simdDot())
	rng := rand.New(rand.NewPCG(3, 4))
	k := kernel()
	for n := 0; n <= 80; n++ {
		a, b := make([]float32, n), make([]float32, n+3) // b may be longer
		var want, wantSum float64
		for i := range a {
			a[i], b[i] = rng.Float32()-0.5, rng.Float32()-0.5
			want += float64(a[i]) * float64(b[i])
			wantSum += float64(a[i])
		}
		tol := 1e-5 * math.Max(1, math.Sqrt(float64(n)))
		assert.InDelta(t, want, float64(k(a, b)), tol, "dot n=%d", n)
		assert.InDelta(t, want, float64(dotGeneric(a, b)), tol, "generic dot n=%d", n)
		assert.InDelta(t, wantSum, float64(sum(a)), tol, "sum n=%d", n)
	}
}
