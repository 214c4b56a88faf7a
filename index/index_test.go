package index

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bruteForce is the reference ranking: every row scored with the same dot
// function, clipped, fully sorted by (similarity desc, id asc).
func bruteForce(x *Index, q []float32, k int) []Hit {
	nq, _ := Normalize(q)
	all := make([]Hit, x.Len())
	for r := range all {
		s := float64(min(max(x.dot(nq, x.rowOf(r, make([]float32, x.dims))), -1), 1))
		all[r] = Hit{Row: r, ID: x.ids[r], Similarity: s, Distance: 1 - s}
	}
	slices.SortFunc(all, func(a, b Hit) int {
		if a.Similarity != b.Similarity {
			if a.Similarity > b.Similarity {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return all[:min(k, len(all))]
}

func randomIndex(t testing.TB, n, d int, seed uint64) *Index {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	b, err := NewBuilder(d, n)
	require.NoError(t, err)
	v := make([]float32, d)
	for i := range n {
		for j := range v {
			v[j] = rng.Float32() - 0.5
		}
		require.NoError(t, b.Add("r"+strconv.Itoa(i), v))
	}
	idx, err := b.Build()
	require.NoError(t, err)
	return idx
}

func randomQueries(n, d int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = make([]float32, d)
		for j := range qs[i] {
			qs[i][j] = float32(rng.NormFloat64())
		}
	}
	return qs
}

func TestSearchMatchesFullSort(t *testing.T) {
	for _, tc := range []struct {
		name string
		n, d int
		k    int
	}{
		{"small single goroutine", 300, 16, 5},
		{"parallel split", 20000, 64, 7}, // n*d >= parallelMinWork: both cores
		{"k above n", 5, 8, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx := randomIndex(t, tc.n, tc.d, 7)
			qs := randomQueries(9, tc.d, 11)
			batch, err := idx.SearchBatch(qs, tc.k)
			require.NoError(t, err)
			for i, q := range qs {
				want := bruteForce(idx, q, tc.k)
				have, err := idx.Search(q, tc.k)
				require.NoError(t, err)
				require.Equal(t, want, have, "query %d single", i)
				require.Equal(t, want, batch[i], "query %d batched", i)
			}
		})
	}
}

func TestSearchTiesBreakByAscendingID(t *testing.T) {
	// Three identical rows inserted out of id order, and one opposite row.
	idx, err := New([]string{"c", "a", "z", "b"}, [][]float32{{1, 0}, {2, 0}, {-1, 0}, {0.5, 0}})
	require.NoError(t, err)
	hits, err := idx.Search([]float32{3, 0}, 4)
	require.NoError(t, err)
	ids := []string{hits[0].ID, hits[1].ID, hits[2].ID, hits[3].ID}
	assert.Equal(t, []string{"a", "b", "c", "z"}, ids)
	for _, h := range hits {
		assert.LessOrEqual(t, h.Similarity, 1.0)
		assert.GreaterOrEqual(t, h.Similarity, -1.0)
		assert.Equal(t, 1-h.Similarity, h.Distance)
	}
	assert.Equal(t, 1.0, hits[0].Similarity)
	assert.Equal(t, -1.0, hits[3].Similarity)
	assert.Equal(t, 2.0, hits[3].Distance)
}

func TestSimilarityIsClipped(t *testing.T) {
	// Find a vector whose float32 self-similarity rounds above 1 (it
	// exists for any kernel); search must clip it to exactly 1, and the
	// negated query to exactly -1.
	rng := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		v := make([]float32, 37)
		for j := range v {
			v[j] = rng.Float32() - 0.5
		}
		idx, err := New([]string{"v"}, [][]float32{v})
		require.NoError(t, err)
		if idx.dot(idx.data, idx.data) <= 1 {
			continue
		}
		hits, err := idx.Search(v, 1)
		require.NoError(t, err)
		assert.Equal(t, 1.0, hits[0].Similarity)
		assert.Equal(t, 0.0, hits[0].Distance)
		neg := make([]float32, len(v))
		for j := range v {
			neg[j] = -v[j]
		}
		hits, err = idx.Search(neg, 1)
		require.NoError(t, err)
		assert.Equal(t, -1.0, hits[0].Similarity)
		assert.Equal(t, 2.0, hits[0].Distance)
		return
	}
	t.Fatal("no vector with self-similarity above 1 found")
}

func TestNormalizeUsesFloat64Accumulator(t *testing.T) {
	// 1e30 squared overflows float32 but not float64.
	v, err := Normalize([]float32{1e30, 1e30})
	require.NoError(t, err)
	assert.InDelta(t, 1/math.Sqrt2, float64(v[0]), 1e-7)
	// 1e-30 squared underflows float32 to zero but not float64.
	v, err = Normalize([]float32{1e-30, 0})
	require.NoError(t, err)
	assert.Equal(t, float32(1), v[0])
}

func TestRejectsInvalidVectors(t *testing.T) {
	b, err := NewBuilder(3, 0)
	require.NoError(t, err)
	require.NoError(t, b.Add("ok", []float32{1, 2, 3}))
	for _, tc := range []struct {
		name string
		id   string
		v    []float32
		want error
		msg  string
	}{
		{"nan", "n", []float32{1, float32(math.NaN()), 0}, ErrNonFinite, `row "n"`},
		{"inf", "i", []float32{float32(math.Inf(1)), 0, 0}, ErrNonFinite, "component 0"},
		{"zero", "z", []float32{0, 0, 0}, ErrZeroVector, `row "z"`},
		{"short", "s", []float32{1, 2}, ErrDimension, "has 2 components, index has 3"},
		{"duplicate", "ok", []float32{1, 2, 3}, nil, "duplicate id"},
		{"empty id", "", []float32{1, 2, 3}, nil, "empty id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.Add(tc.id, tc.v)
			require.Error(t, err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	assert.Len(t, b.ids, 1, "rejected rows must not be kept")
	idx, err := b.Build()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		q    []float32
		want error
	}{
		{"query nan", []float32{float32(math.NaN()), 0, 0}, ErrNonFinite},
		{"query zero", []float32{0, 0, 0}, ErrZeroVector},
		{"query dims", []float32{1, 0, 0, 0}, ErrDimension},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idx.Search(tc.q, 1)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	_, err = idx.Search([]float32{1, 0, 0}, 0)
	assert.ErrorContains(t, err, "k must be positive")
}

func TestFingerprintCoversIDsAndVectors(t *testing.T) {
	a, _ := New([]string{"x", "y"}, [][]float32{{1, 0}, {0, 1}})
	b, _ := New([]string{"x", "y"}, [][]float32{{1, 0}, {0, 1}})
	c, _ := New([]string{"x", "w"}, [][]float32{{1, 0}, {0, 1}})
	d, _ := New([]string{"x", "y"}, [][]float32{{1, 0}, {1, 1}})
	assert.Equal(t, a.Fingerprint(), b.Fingerprint())
	assert.NotEqual(t, a.Fingerprint(), c.Fingerprint())
	assert.NotEqual(t, a.Fingerprint(), d.Fingerprint())
}
