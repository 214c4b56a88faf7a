package soak

import (
	"cmp"
	"slices"
)

// TakeoverCompare compares the takeovers timed after the first and the
// last takeover day. Seven restarts of a fraction of a second each on a
// shared machine spread by ±30%, so their medians alone cannot say
// whether the later takeover is slower: PSlower says how likely a
// difference at least this large in that direction is by chance.
type TakeoverCompare struct {
	FirstDay int `json:"first_day"`
	LastDay  int `json:"last_day"`
	// FirstMedian and LastMedian are the medians of each day's tries
	// (total seconds); Ratio is LastMedian / FirstMedian.
	FirstMedian float64 `json:"first_median_seconds"`
	LastMedian  float64 `json:"last_median_seconds"`
	Ratio       float64 `json:"ratio"`
	// PSlower is the exact one-sided p-value of the Wilcoxon rank-sum
	// (Mann-Whitney) test that the last day's tries take longer than the
	// first day's: below 0.05 the last takeover is slower.
	PSlower float64 `json:"p_slower"`
}

// CompareTakeovers returns the comparison of the first and the last day
// with timed takeovers, and false with fewer than two such days.
func (r Result) CompareTakeovers() (TakeoverCompare, bool) {
	var days []Day
	for _, d := range r.Series {
		if len(d.Takeovers) > 0 {
			days = append(days, d)
		}
	}
	if len(days) < 2 {
		return TakeoverCompare{}, false
	}
	first, last := days[0], days[len(days)-1]
	totals := func(d Day) []float64 {
		var v []float64
		for _, t := range d.Takeovers {
			v = append(v, t.Total)
		}
		return v
	}
	a, b := totals(first), totals(last)
	c := TakeoverCompare{FirstDay: first.Day, LastDay: last.Day, FirstMedian: median(a), LastMedian: median(b),
		PSlower: rankSumGreater(a, b)}
	if c.FirstMedian > 0 {
		c.Ratio = c.LastMedian / c.FirstMedian
	}
	return c, true
}

// median returns the median of v (the mean of the middle two for an even
// count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// rankSumGreater returns the exact one-sided p-value of the Wilcoxon
// rank-sum test that b's values are larger than a's: the share of the
// ways to choose len(b) of the pooled values' ranks whose sum is at least
// b's (ties get their mean rank). Exact over every subset by counting
// rank sums (doubled, so mean ranks stay integers), for up to a few dozen
// values in all. 1 when either is empty.
func rankSumGreater(a, b []float64) float64 {
	n, m := len(a)+len(b), len(b)
	if len(a) == 0 || m == 0 {
		return 1
	}
	type obs struct {
		v    float64
		ofB  bool
		rank int // doubled mean rank
	}
	all := make([]obs, 0, n)
	for _, v := range a {
		all = append(all, obs{v: v})
	}
	for _, v := range b {
		all = append(all, obs{v: v, ofB: true})
	}
	slices.SortFunc(all, func(x, y obs) int { return cmp.Compare(x.v, y.v) })
	for i := 0; i < n; {
		j := i
		for j < n && all[j].v == all[i].v {
			j++
		}
		// Ranks i+1..j, doubled: their mean is (i+1+j)/2.
		for k := i; k < j; k++ {
			all[k].rank = i + 1 + j
		}
		i = j
	}
	observed, maxSum := 0, 0
	for _, o := range all {
		if o.ofB {
			observed += o.rank
		}
		maxSum += o.rank
	}
	// ways[k][s]: subsets of k of the ranks seen so far summing to s (as
	// float64: exact up to 2^53 ways, C(50, 25) being 1.3e14).
	ways := make([][]float64, m+1)
	for k := range ways {
		ways[k] = make([]float64, maxSum+1)
	}
	ways[0][0] = 1
	for _, o := range all {
		for k := m; k >= 1; k-- {
			for s := maxSum; s >= o.rank; s-- {
				ways[k][s] += ways[k-1][s-o.rank]
			}
		}
	}
	var atLeast, total float64
	for s, w := range ways[m] {
		total += w
		if s >= observed {
			atLeast += w
		}
	}
	return atLeast / total
}
