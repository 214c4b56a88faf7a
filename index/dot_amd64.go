package index

import "golang.org/x/sys/cpu"

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func sumAVX(a *float32, n int) float32

// simdDot reports whether this CPU runs the AVX2+FMA dot kernel.
func simdDot() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// kernel returns the dot product used by every search path of an Index:
// the AVX2+FMA assembly kernel where the CPU has it, else the portable one.
// Both handle any length; they round differently, so an Index fixes one
// kernel at construction and single and batched searches share it.
func kernel() func(a, b []float32) float32 {
	if simdDot() {
		return dotSIMD
	}
	return dotGeneric
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
