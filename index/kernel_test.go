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
	k := kernel().dot
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

		// The four-query kernel equals four one-query calls bit for bit.
		var qs [4][]float32
		for i := range qs {
			qs[i] = make([]float32, n)
			for j := range qs[i] {
				qs[i][j] = rng.Float32() - 0.5
			}
		}
		for _, ks := range []kernels{kernel(), genericKernels()} {
			var out [4]float32
			ks.dot4(a, &qs, &out)
			for i := range qs {
				assert.Equal(t, ks.dot(qs[i], a), out[i], "dot4 n=%d query %d", n, i)
			}
		}
	}
}
