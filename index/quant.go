package index

import (
	"math"
)

// The reduced copy.
//
// Every row r of the matrix also lives as int8 codes c (each in [-127, 127])
// with a per-row float32 scale s and a float32 bound e on the L2 norm of the
// quantisation error, e >= ||r - s*c||. A query q is quantised the same way
// (scale t, codes b, error bound f). For the exact real dot product D = r.q,
//
//	r.q - (s*c).(t*b) = r.(q - t*b) + (r - s*c).q - (r - s*c).(q - t*b)
//
// so by Cauchy-Schwarz |D - s*t*(c.b)| <= |r|*f + |q|*e + e*f. c.b is an
// integer computed exactly. The float32 score the exact kernel returns, in
// whatever order it sums and whether or not it fuses multiply-adds, differs
// from D by at most gamma_d*|r|*|q| (gamma_d = d*u/(1-d*u), u = 2^-24, each
// of the d products passes through at most d roundings; Higham, Accuracy and
// Stability of Numerical Algorithms, 3.1) plus an underflow term far below
// underflowSlack. Search widens that sum by a relative and an absolute slack
// that cover the float64 rounding of computing it, which gives every row an
// interval [lo, hi] holding its exact float32 score; clipping both ends to
// [-1, 1] keeps that true of the clipped score.

// maxReducedDims bounds the dimensions the int8 kernels accept: the VNNI
// kernel's int32 lanes sum up to dims products of at most 255*127, which
// must not overflow.
const maxReducedDims = 1 << 16

// underflowSlack bounds the absolute error gradual underflow can add to a
// float32 dot product of up to 2^24 terms (each at most 2^-150).
const underflowSlack = 1e-37

// reduced is the int8 copy of an Index's matrix. It is immutable once built.
type reduced struct {
	codes  []int8    // n*dims, row-major, each in [-127, 127]
	scales []float32 // row r is approximately scales[r]*codes[r]
	errs   []float32 // errs[r] >= ||row r - scales[r]*codes[r]||_2, exactly
	// norm bounds the L2 norm of every row from above.
	norm float64
}

// quantizeInto writes the int8 codes of v into codes (len(codes) ==
// len(v)) and returns its scale, an upper bound of the L2 norm of the
// quantisation error and an upper bound of the norm of v. The scale is the
// largest magnitude over 127, so every code is in [-127, 127]; a zero v has
// scale 0, zero codes and zero error.
func quantizeInto(codes []int8, v []float32) (scale float32, errBound float32, norm float64) {
	var m float64
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	if m == 0 {
		clear(codes)
		return 0, 0, 0
	}
	scale = float32(m / 127)
	if scale == 0 { // m below 127 times the smallest subnormal: all codes would be 0
		scale = math.SmallestNonzeroFloat32
	}
	s := float64(scale)
	var e2, n2 float64
	for j, x := range v {
		f := float64(x)
		c := math.Max(-127, math.Min(127, math.RoundToEven(f/s)))
		codes[j] = int8(c)
		d := f - s*c
		e2 += d * d
		n2 += f * f
	}
	return scale, roundUp32(errorBound(e2, len(v))), errorBound(n2, len(v))
}

// errorBound turns a float64 sum of n squares into an upper bound of its
// exact square root: the sum's relative rounding error is below n*2^-53 and
// the square root's below 2^-53, so 1e-9 relative (n < 2^24) and the
// smallest normal float64 cover both, the latter against underflow of the
// squares.
func errorBound(sumSquares float64, n int) float64 {
	return math.Sqrt(sumSquares)*(1+1e-9+float64(n)*0x1p-52) + 0x1p-1022
}

// roundUp32 returns the smallest float32 not below x (x >= 0, finite).
func roundUp32(x float64) float32 {
	f := float32(x)
	if float64(f) < x {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// dequantError bounds ||r - s*c|| for the row r a quantized index keeps,
// r[j] = float32(s*c[j]) (see Index), c in [-127, 127]: each product is
// rounded once, by at most 2^-24 of |s*c[j]| <= 127*s, or by at most 2^-150
// when it underflows, so the norm over dims components is at most
// sqrt(dims) times the larger.
func dequantError(s float32, dims int) float32 {
	per := max(0x1p-24*127*float64(s), 0x1p-150)
	return roundUp32(math.Sqrt(float64(dims)) * per * (1 + 1e-9))
}

// normBound returns an upper bound of the L2 norm of v.
func normBound(v []float32) float64 {
	var n2 float64
	for _, x := range v {
		n2 += float64(x) * float64(x)
	}
	return errorBound(n2, len(v))
}

// bytes returns the size of the reduced copy as stored.
func (red *reduced) bytes() int64 {
	return int64(len(red.codes)) + 8*int64(len(red.scales))
}

// query is a search query quantised for the int8 kernels.
type query struct {
	codes []int8  // the query's codes, in [-127, 127]
	u8    []uint8 // codes + 128, for the VNNI kernel
	i16   []int16 // the codes widened, for the AVX2 and AVX-512BW kernels
	scale float64
	err   float64 // upper bound of ||q - scale*codes||
	norm  float64 // upper bound of ||q||
}

func newQuery(q []float32) *query {
	qq := &query{codes: make([]int8, len(q)), u8: make([]uint8, len(q)), i16: make([]int16, len(q))}
	s, e, n := quantizeInto(qq.codes, q)
	for j, c := range qq.codes {
		qq.u8[j] = uint8(int(c) + 128)
		qq.i16[j] = int16(c)
	}
	qq.scale, qq.err, qq.norm = float64(s), float64(e), n
	return qq
}

// bounds turns exact integer dot products into score intervals for one
// query: radius(e) = base + e*mult bounds |float32 score - approx| for a row
// with error bound e, approx = scale(row)*qscale*dot.
type bounds struct {
	qscale float64
	base   float64
	mult   float64
}

// newBounds returns the interval arithmetic of query q against rows of
// dims components whose norms are at most rowNorm.
func newBounds(q *query, rowNorm float64, dims int) bounds {
	const u = 0x1p-24
	nu := float64(dims) * u
	gamma := nu / (1 - nu)
	base := rowNorm*q.err + gamma*rowNorm*q.norm + underflowSlack
	mult := q.norm + q.err
	// The relative slack covers the float64 rounding of base, mult,
	// the products and sums of interval (a few ulps of quantities at most
	// ~1); the absolute slack covers that of approx, whose magnitude is at
	// most about rowNorm*q.norm.
	const rel, abs = 1e-6, 1e-12
	return bounds{qscale: q.scale, base: base*(1+rel) + abs, mult: mult * (1 + rel)}
}

// interval returns the clipped bounds of the exact clipped float32 score of
// a row with scale s, error bound e and integer dot product dot.
func (b *bounds) interval(s, e float32, dot int32) (lo, hi float64) {
	approx := float64(s) * b.qscale * float64(dot)
	rad := b.base + float64(e)*b.mult
	return clip(approx - rad), clip(approx + rad)
}

func clip(x float64) float64 { return min(max(x, -1), 1) }

// i8Kernel is one implementation of the exact int8 row-by-query dot
// products; all of them return the same integers.
type i8Kernel struct {
	name string
	id   int
}

// The int8 kernel ids.
const (
	i8Portable = iota
	i8AVX2
	i8AVX512BW
	i8VNNI
)

// dotsGeneric is the portable int8 kernel: out[i] is the dot product of
// row i of rows (len(q.codes) codes per row) with q's codes.
func dotsGeneric(rows []int8, q *query, out []int32) {
	d := len(q.codes)
	qc := q.i16
	for i := range out {
		row := rows[i*d : (i+1)*d : (i+1)*d]
		var s0, s1, s2, s3 int32
		j := 0
		for ; j+4 <= d; j += 4 {
			s0 += int32(row[j]) * int32(qc[j])
			s1 += int32(row[j+1]) * int32(qc[j+1])
			s2 += int32(row[j+2]) * int32(qc[j+2])
			s3 += int32(row[j+3]) * int32(qc[j+3])
		}
		for ; j < d; j++ {
			s0 += int32(row[j]) * int32(qc[j])
		}
		out[i] = (s0 + s1) + (s2 + s3)
	}
}
