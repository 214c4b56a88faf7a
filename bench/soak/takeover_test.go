package soak

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRankSumGreater checks the exact p-values against counts done by
// hand and against the tables of the rank-sum test.
func TestRankSumGreater(t *testing.T) {
	// Every b above every a: only one of C(6,3) = 20 subsets has the
	// largest rank sum.
	assert.InDelta(t, 1.0/20, rankSumGreater([]float64{1, 2, 3}, []float64{4, 5, 6}), 1e-12)
	// The other way round: every subset's sum is at least the smallest.
	assert.InDelta(t, 1.0, rankSumGreater([]float64{4, 5, 6}, []float64{1, 2, 3}), 1e-12)
	// 7 and 7, fully separated: 1 / C(14,7) = 1/3432.
	a := []float64{0.40, 0.41, 0.42, 0.43, 0.44, 0.45, 0.46}
	b := []float64{0.50, 0.51, 0.52, 0.53, 0.54, 0.55, 0.56}
	assert.InDelta(t, 1.0/3432, rankSumGreater(a, b), 1e-12)
	// b's ranks {2, 4, 5} of 5 (a: 1, 3): sums of 3 of 1..5 at least 11:
	// {2,4,5}, {3,4,5}, {1,4,5}(10 no), {2,3,5}(10 no) -> 2 of 10.
	assert.InDelta(t, 2.0/10, rankSumGreater([]float64{1, 3}, []float64{2, 4, 5}), 1e-12)
	// Ties get mean ranks: all equal is no evidence either way.
	assert.InDelta(t, 1.0, rankSumGreater([]float64{1, 1}, []float64{1, 1}), 1e-12)
	// One tie across: ranks 1, 2.5, 2.5, 4 (a: 1, 2.5); b's sum 6.5 of
	// the pairs' sums {3.5, 3.5, 5, 5, 6.5, 6.5}: 2 of 6.
	assert.InDelta(t, 2.0/6, rankSumGreater([]float64{1, 2}, []float64{2, 3}), 1e-12)
	assert.Equal(t, 1.0, rankSumGreater(nil, b))
	// Interleaved: about a half.
	p := rankSumGreater([]float64{1, 3, 5, 7}, []float64{2, 4, 6, 8})
	assert.Greater(t, p, 0.3)
	assert.Less(t, p, 0.5)
}

func TestCompareTakeovers(t *testing.T) {
	tk := func(v ...float64) []Takeover {
		var out []Takeover
		for _, x := range v {
			out = append(out, Takeover{Total: x})
		}
		return out
	}
	r := Result{Series: []Day{{Day: 1}, {Day: 10, Takeovers: tk(0.6, 0.7, 0.8)}, {Day: 20}, {Day: 30, Takeovers: tk(0.9, 1.0, 1.1, 1.2)}}}
	c, ok := r.CompareTakeovers()
	require.True(t, ok)
	assert.Equal(t, 10, c.FirstDay)
	assert.Equal(t, 30, c.LastDay)
	assert.InDelta(t, 0.7, c.FirstMedian, 1e-12)
	assert.InDelta(t, 1.05, c.LastMedian, 1e-12)
	assert.InDelta(t, 1.5, c.Ratio, 1e-12)
	assert.InDelta(t, 1.0/35, c.PSlower, 1e-12) // 1 / C(7,4)
	_, ok = Result{Series: r.Series[:2]}.CompareTakeovers()
	assert.False(t, ok)
}
