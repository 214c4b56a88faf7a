//go:build !amd64

package index

func simdDot() bool { return false }

// kernel returns the portable dot product on this architecture.
func kernel() func(a, b []float32) float32 { return dotGeneric }

func sum(a []float32) float32 { return sumGeneric(a) }
