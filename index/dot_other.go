//go:build !amd64

package index

func simdDot() bool { return false }

// kernel returns the portable dot products on this architecture.
func kernel() kernels { return genericKernels() }

func sum(a []float32) float32 { return sumGeneric(a) }
