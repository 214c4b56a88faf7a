package index

import "golang.org/x/sys/cpu"

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func dot4AVX2(row, q0, q1, q2, q3 *float32, n int, out *[4]float32)

//go:noescape
func sumAVX(a *float32, n int) float32

// simdDot reports whether this CPU runs the AVX2+FMA dot kernel.
func simdDot() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// kernel returns the dot products used by every search path of an Index:
// the AVX2+FMA assembly kernels where the CPU has them, else the portable
// ones. The two families round differently, so an Index fixes one family at
// construction; within a family the one- and four-query kernels agree bit
// for bit. The int8 kernel is the best this CPU runs (AVX-512 VNNI,
// AVX-512BW, AVX2, portable); all of them return the same integers.
func kernel() kernels {
	if simdDot() {
		return kernels{f32Name: "avx2-fma", dot: dotSIMD, dot4: dot4SIMD, i8: i8Kernels()[0]}
	}
	return genericKernels()
}

func dot4SIMD(row []float32, q *[4][]float32, out *[4]float32) {
	if len(row) == 0 {
		*out = [4]float32{}
		return
	}
	n := len(row)
	dot4AVX2(&row[0], &q[0][:n][0], &q[1][:n][0], &q[2][:n][0], &q[3][:n][0], n, out)
}

func dotSIMD(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	b = b[:len(a)]
	return dotAVX2(&a[0], &b[0], len(a))
}

// sum adds a, with AVX where available.
func sum(a []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	if cpu.X86.HasAVX {
		return sumAVX(&a[0], len(a))
	}
	return sumGeneric(a)
}
