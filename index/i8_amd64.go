package index

import "golang.org/x/sys/cpu"

//go:noescape
func dotsVNNI(rows *int8, stride, nrows int, qu *uint8, dlen int, out *int32)

//go:noescape
func dotsAVX512BW(rows *int8, stride, nrows int, q16 *int16, dlen int, out *int32)

//go:noescape
func dotsAVX2(rows *int8, stride, nrows int, q16 *int16, dlen int, out *int32)

// i8Kernels returns the int8 kernels this CPU runs, best first; the last
// is always the portable one.
func i8Kernels() []i8Kernel {
	var ks []i8Kernel
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI {
		ks = append(ks, i8Kernel{name: "avx512-vnni", id: i8VNNI})
	}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW {
		ks = append(ks, i8Kernel{name: "avx512bw", id: i8AVX512BW})
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, i8Kernel{name: "avx2", id: i8AVX2})
	}
	return append(ks, i8Kernel{name: "portable", id: i8Portable})
}

// dots sets out[i] to the exact dot product of row i of rows (len(q.codes)
// codes per row) with q's codes. The assembly kernels take the first d&^63
// codes of each row; the remaining ones are added in Go.
func (k i8Kernel) dots(rows []int8, q *query, out []int32) {
	d := len(q.codes)
	main := d &^ 63
	if k.id == i8Portable || len(out) == 0 || main == 0 {
		dotsGeneric(rows, q, out)
		return
	}
	rows = rows[:len(out)*d]
	switch k.id {
	case i8VNNI:
		dotsVNNI(&rows[0], d, len(out), &q.u8[0], main, &out[0])
	case i8AVX512BW:
		dotsAVX512BW(&rows[0], d, len(out), &q.i16[0], main, &out[0])
	default:
		dotsAVX2(&rows[0], d, len(out), &q.i16[0], main, &out[0])
	}
	if main < d {
		tail := q.i16[main:]
		for i := range out {
			row := rows[i*d+main : (i+1)*d]
			var s int32
			for j, c := range row {
				s += int32(c) * int32(tail[j])
			}
			out[i] += s
		}
	}
}
