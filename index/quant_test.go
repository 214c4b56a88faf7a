package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestI8KernelsAgree checks every int8 kernel this CPU runs against an
// int64 reference at every dimension up to 200 (the 128- and 64-code steps
// and the Go tail), at 1536, with extreme codes, over blocks of rows.
func TestI8KernelsAgree(t *testing.T) {
	ks := i8Kernels()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.name
	}
	t.Logf("int8 kernels on this CPU: %v", names)
	rng := rand.New(rand.NewPCG(5, 6))
	dims := []int{1536}
	for d := 1; d <= 200; d++ {
		dims = append(dims, d)
	}
	for _, d := range dims {
		const rows = 7
		codes := make([]int8, rows*d)
		q := make([]float32, d)
		for i := range codes {
			switch rng.IntN(4) {
			case 0:
				codes[i] = 127
			case 1:
				codes[i] = -127
			default:
				codes[i] = int8(rng.IntN(255) - 127)
			}
		}
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		q[rng.IntN(d)] = 100 // some codes at +-127
		qq := newQuery(q)
		want := make([]int32, rows)
		for i := range want {
			var s int64
			for j := range d {
				s += int64(codes[i*d+j]) * int64(qq.codes[j])
			}
			want[i] = int32(s)
		}
		for _, k := range ks {
			got := make([]int32, rows)
			k.dots(codes, qq, got)
			require.Equal(t, want, got, "kernel %s d=%d", k.name, d)
			k.dots(codes[d:2*d], qq, got[:1]) // one row
			require.Equal(t, want[1], got[0], "kernel %s d=%d one row", k.name, d)
		}
	}
}

// kernelFamilies returns the index's own kernels and, when they differ,
// the portable ones, each with every int8 kernel of this CPU.
func kernelFamilies() []kernels {
	var out []kernels
	for _, f := range []kernels{kernel(), genericKernels()} {
		for _, k := range i8Kernels() {
			f.i8 = k
			out = append(out, f)
		}
		if !simdDot() {
			break
		}
	}
	return out
}

// TestIntervalsHoldExactScores checks the first pass's promise directly:
// every row's interval holds the clipped float32 score the rerank kernel
// computes, for both float32 kernel families, on rows built to be hard.
func TestIntervalsHoldExactScores(t *testing.T) {
	for _, m := range adversarialMatrices(t) {
		for _, ks := range kernelFamilies() {
			x := m.idx
			x.kernels = ks
			for qi, q := range m.queries {
				nq, err := Normalize(q)
				require.NoError(t, err)
				qq := newQuery(nq)
				bd := newBounds(qq, x.red.norm, x.dims)
				dots := make([]int32, x.Len())
				x.i8.dots(x.red.codes, qq, dots)
				for r := range x.Len() {
					lo, hi := bd.interval(x.red.scales[r], x.red.errs[r], dots[r])
					s := float64(min(max(x.dot(nq, x.data[r*x.dims:(r+1)*x.dims]), -1), 1))
					if s < lo || s > hi {
						t.Fatalf("%s query %d row %d: score %v outside [%v, %v] (f32 %s)", m.name, qi, r, s, lo, hi, ks.f32Name)
					}
				}
			}
		}
	}
}

// TestReducedSearchEqualsExactScan is the differential test: the int8 pass
// plus rerank returns exactly what scoring every row in float32 returns
// (rows, ids, order and similarities bit for bit), for random and
// adversarial matrices, every k regime, every kernel.
func TestReducedSearchEqualsExactScan(t *testing.T) {
	for _, m := range adversarialMatrices(t) {
		for _, ks := range kernelFamilies() {
			x := m.idx
			x.kernels = ks
			for qi, q := range m.queries {
				for _, k := range []int{1, 2, 5, x.Len()} {
					want := bruteForce(x, q, k)
					got, st, err := x.SearchStats(q, k)
					require.NoError(t, err)
					require.Equal(t, want, got, "%s query %d k=%d f32 %s i8 %s", m.name, qi, k, ks.f32Name, ks.i8.name)
					single, err := x.Search(q, k)
					require.NoError(t, err)
					require.Equal(t, want, single)
					assert.GreaterOrEqual(t, st, min(k, x.Len()))
				}
			}
		}
	}
}

// TestReducedPassPrunes checks that the first pass rules rows out: on
// random rows a top-2 query reranks a small fraction of them (a bound that
// were infinite or ignored would rerank all).
func TestReducedPassPrunes(t *testing.T) {
	x := randomIndex(t, 20000, 256, 9)
	for _, q := range randomQueries(5, 256, 10) {
		hits, st, err := x.SearchStats(q, 2)
		require.NoError(t, err)
		require.Equal(t, bruteForce(x, q, 2), hits)
		assert.Less(t, st, x.Len()/20, "reranked %d of %d", st, x.Len())
	}
}

type testMatrix struct {
	name    string
	idx     *Index
	queries [][]float32
}

func buildRows(t testing.TB, rows [][]float32, ids []string) *Index {
	t.Helper()
	if ids == nil {
		ids = make([]string, len(rows))
		for i := range ids {
			ids[i] = fmt.Sprintf("id%05d", i)
		}
	}
	x, err := New(ids, rows)
	require.NoError(t, err)
	require.NotNil(t, x.red)
	return x
}

// adversarialMatrices are small matrices built to break a loose bound or a
// wrong tie order: exact duplicates under shuffled ids, near-ties a few
// ulps apart, rows differing in one tiny component, huge and tiny
// magnitudes, one-hot and mostly-subnormal rows, queries equal or opposite
// to rows, dimensions around the kernels' 64-code step.
func adversarialMatrices(t testing.TB) []testMatrix {
	rng := rand.New(rand.NewPCG(77, 78))
	gauss := func(d int, scale float64) []float32 {
		v := make([]float32, d)
		for j := range v {
			v[j] = float32(rng.NormFloat64() * scale)
		}
		return v
	}
	var out []testMatrix
	for _, d := range []int{1, 3, 63, 64, 65, 130, 384} {
		// Random rows.
		var rows [][]float32
		for range 300 {
			rows = append(rows, gauss(d, 1))
		}
		qs := [][]float32{gauss(d, 1), rows[17], neg(rows[5])}
		out = append(out, testMatrix{"random d=" + strconv.Itoa(d), buildRows(t, rows, nil), qs})

		// Duplicates: 20 copies each of 10 rows, ids shuffled so that the
		// tie order is not the row order.
		rows = nil
		base := make([][]float32, 10)
		for i := range base {
			base[i] = gauss(d, 1)
		}
		for i := range 200 {
			rows = append(rows, append([]float32(nil), base[i%10]...))
		}
		ids := make([]string, len(rows))
		for i, p := range rng.Perm(len(rows)) {
			ids[i] = fmt.Sprintf("dup%04d", p)
		}
		out = append(out, testMatrix{"duplicates d=" + strconv.Itoa(d), buildRows(t, rows, ids), [][]float32{base[3], gauss(d, 1)}})

		// Near-ties: one row perturbed by a few ulps in one component, and
		// scaled copies (equal after normalisation up to rounding).
		rows = nil
		b := gauss(d, 1)
		for i := range 100 {
			v := append([]float32(nil), b...)
			j := i % d
			for range i % 5 {
				v[j] = math.Nextafter32(v[j], float32(math.Inf(1)))
			}
			if i%7 == 0 {
				for jj := range v {
					v[jj] *= float32(i + 1)
				}
			}
			rows = append(rows, v)
		}
		out = append(out, testMatrix{"near-ties d=" + strconv.Itoa(d), buildRows(t, rows, nil), [][]float32{b, gauss(d, 1), neg(b)}})

		// Magnitudes: huge and tiny rows, one-hot rows, a dominant
		// component over subnormal ones, rows of equal components.
		rows = nil
		for i := range 60 {
			var v []float32
			switch i % 6 {
			case 0:
				v = gauss(d, 1e30)
			case 1:
				v = gauss(d, 1e-30)
			case 2:
				v = make([]float32, d)
				v[i%d] = 1
			case 3:
				v = gauss(d, 1e-42) // subnormal float32 components
				v[i%d] = 1
			case 4:
				v = make([]float32, d)
				for j := range v {
					v[j] = 3e38
				}
			default:
				v = gauss(d, 1)
				v[i%d] = 1e20
			}
			if allZero(v) {
				v[0] = 1
			}
			rows = append(rows, v)
		}
		qs = [][]float32{gauss(d, 1), rows[3], rows[4], gauss(d, 1e-35)}
		if allZero(qs[3]) {
			qs[3][0] = 1e-35
		}
		out = append(out, testMatrix{"magnitudes d=" + strconv.Itoa(d), buildRows(t, rows, nil), qs})
	}
	return out
}

func neg(v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = -x
	}
	return out
}

func allZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// TestReducedRejectsZeroVectors: a zero row or query never reaches the
// int8 pass; both are refused as they always were.
func TestReducedRejectsZeroVectors(t *testing.T) {
	_, err := New([]string{"a", "b"}, [][]float32{{1, 0}, {0, 0}})
	require.ErrorIs(t, err, ErrZeroVector)
	x := buildRows(t, [][]float32{{1, 0}, {0, 1}}, nil)
	_, _, err = x.SearchStats([]float32{0, 0}, 1)
	require.ErrorIs(t, err, ErrZeroVector)
}

// FuzzReducedSearch builds a matrix and a query from the fuzzer's bytes,
// each component a sign, a 7-bit mantissa and an exponent among a few that
// span subnormal to huge, and requires the int8 pass plus rerank to equal
// the float32 scan of every row.
func FuzzReducedSearch(f *testing.F) {
	f.Add([]byte{3, 4, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
	f.Add([]byte{64, 10, 1, 0xff, 0xfe, 0x80, 0x7f, 0x01, 0x02, 0x03})
	f.Add([]byte{1, 5, 5, 9, 9, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		d, n, k := 1+int(b[0])%80, 1+int(b[1])%40, 1+int(b[2])%8
		src := b[3:]
		exps := [...]float64{-140, -126, -60, -20, -1, 0, 1, 20, 60, 120}
		pos := 0
		val := func() float32 {
			if len(src) == 0 {
				return 0
			}
			c := src[pos%len(src)]
			e := src[(pos+1)%len(src)]
			pos += 2
			m := float64(c&0x7f) / 128
			if c&0x80 != 0 {
				m = -m
			}
			return float32(m * math.Exp2(exps[int(e)%len(exps)]))
		}
		var rows [][]float32
		var ids []string
		for i := range n {
			v := make([]float32, d)
			for j := range v {
				v[j] = val()
			}
			if allZero(v) {
				continue
			}
			rows = append(rows, v)
			ids = append(ids, fmt.Sprintf("%03d", (i*37)%101)) // ids out of row order
		}
		q := make([]float32, d)
		for j := range q {
			q[j] = val()
		}
		if len(rows) == 0 || allZero(q) {
			return
		}
		x, err := New(ids, rows)
		if err != nil { // a row whose float64 norm rounds to a non-unit float32 row is still valid; only zero rows fail
			t.Skip(err)
		}
		for _, ks := range kernelFamilies() {
			x.kernels = ks
			got, _, err := x.SearchStats(q, k)
			require.NoError(t, err)
			require.Equal(t, bruteForce(x, q, k), got, "f32 %s i8 %s", ks.f32Name, ks.i8.name)
		}
	})
}
