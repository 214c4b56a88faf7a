package index

import (
	"fmt"
	"math"
)

// Sentinel errors, matched with errors.Is.
// normalizeInto validates src and writes its L2-normalised copy into dst
// (len(dst) == len(src)). The norm is accumulated in float64 so finite
// float32 inputs can neither overflow nor underflow it.
func normalizeInto(dst, src []float32) error {
	var sum float64
	for i, x := range src {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w at component %d: %v", ErrNonFinite, i, x)
		}
		sum += f * f
	}
	if sum == 0 {
		return ErrZeroVector
	}
	norm := math.Sqrt(sum)
	for i, x := range src {
		dst[i] = float32(float64(x) / norm)
	}
	return nil
}

// Normalize returns the L2-normalised float32 copy of v. It rejects empty,
// non-finite and zero vectors.
func Normalize(v []float32) ([]float32, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: empty vector", ErrDimension)
	}
	out := make([]float32, len(v))
	if err := normalizeInto(out, v); err != nil {
		return nil, err
	}
	return out, nil
}

// dotGeneric returns the dot product of a and b (len(b) >= len(a)) with
// eight interleaved float32 accumulators: the portable kernel.
func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// kernels are the dot products of one family: dot(q, row) scores one query,
// dot4 scores one row against four queries with results identical to four
// dot calls; i8 is the int8 kernel of the first pass, which is exact and so
// free to differ from the float32 family.
type kernels struct {
	f32Name string
	dot     func(a, b []float32) float32
	dot4    func(row []float32, q *[4][]float32, out *[4]float32)
	i8      i8Kernel
}

func genericKernels() kernels {
	return kernels{f32Name: "portable", i8: i8Kernels()[0], dot: dotGeneric, dot4: func(row []float32, q *[4][]float32, out *[4]float32) {
		for i := range out {
			out[i] = dotGeneric(q[i], row)
		}
	}}
}
