package index

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSearchRowsIsSearchOverTheSubset checks that a restricted search
// ranks exactly the listed rows as a full scan ranks them.
func TestSearchRowsIsSearchOverTheSubset(t *testing.T) {
	x := randomIndex(t, 300, 24, 7)
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		q := make([]float32, 24)
		for j := range q {
			q[j] = rng.Float32() - 0.5
		}
		var rows []int
		keep := map[int]bool{}
		for r := range x.Len() {
			if rng.IntN(3) == 0 {
				rows = append(rows, r)
				keep[r] = true
			}
		}
		rows = append(rows, rows[0]) // a repeat is scored once
		var want []Hit
		for _, h := range bruteForce(x, q, x.Len()) {
			if keep[h.Row] && len(want) < 5 {
				want = append(want, h)
			}
		}
		have, err := x.SearchRows(q, rows, 5)
		require.NoError(t, err)
		assert.Equal(t, want, have, "trial %d", trial)
	}
	_, err := x.SearchRows(make([]float32, 24), []int{0}, 1)
	assert.Error(t, err, "zero query")
	_, err = x.SearchRows([]float32{1}, []int{0}, 1)
	assert.ErrorIs(t, err, ErrDimension)
	q := make([]float32, 24)
	q[0] = 1
	_, err = x.SearchRows(q, []int{x.Len()}, 1)
	assert.ErrorContains(t, err, "row 300 outside")
	hits, err := x.SearchRows(q, nil, 3)
	require.NoError(t, err)
	assert.Empty(t, hits)
}
