//go:build !amd64

package index

// i8Kernels returns the portable int8 kernel, the only one on this
// architecture.
func i8Kernels() []i8Kernel { return []i8Kernel{{name: "portable", id: i8Portable}} }

// dots sets out[i] to the exact dot product of row i of rows (len(q.codes)
// codes per row) with q's codes.
func (k i8Kernel) dots(rows []int8, q *query, out []int32) { dotsGeneric(rows, q, out) }
