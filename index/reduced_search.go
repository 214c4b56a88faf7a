package index

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// reducedBlock is the number of rows one int8 kernel call scores: enough
// to amortise the call, small enough for the results to stay in L1.
const reducedBlock = 256

// pass1 is one goroutine's share of the int8 pass: the k best lower bounds
// of its rows (a min-heap) and the rows whose upper bound reached the k-th
// best lower bound it had seen when they were scored.
type pass1 struct {
	lows  []float64
	cands []kept
}

// kept is a row of the int8 pass and its score's upper bound.
type kept struct {
	row int
	hi  float64
}

// stats describe how one single-query search went.
type stats struct {
	// Reranked is the number of rows scored in float32 after the int8
	// pass; Len() when the index has no int8 copy.
	Reranked int
}

// SearchStats is Search, also returning how many rows the float32 rerank
// scored (Len() for an index without an int8 copy).
func (x *Index) SearchStats(query []float32, k int) (hits []Hit, reranked int, err error) {
	if x.red == nil {
		hits, err := x.Search(query, k)
		return hits, x.Len(), err
	}
	if k <= 0 {
		return nil, 0, fmt.Errorf("index: k must be positive, have %d", k)
	}
	if len(query) != x.dims {
		return nil, 0, fmt.Errorf("%w: query 0 has %d components, index has %d", ErrDimension, len(query), x.dims)
	}
	nq, err := Normalize(query)
	if err != nil {
		return nil, 0, fmt.Errorf("query 0: %w", err)
	}
	hits, st := x.searchReduced(nq, min(k, x.Len()))
	return hits, st.Reranked, nil
}

// searchReduced answers one normalised query q with k <= Len() by the int8
// pass and a float32 rerank of the rows it cannot rule out. Its hits are
// those of a float32 scan of every row with the same kernel.
func (x *Index) searchReduced(q []float32, k int) ([]Hit, stats) {
	defer runtime.KeepAlive(x) // x owns the rows (see Store.LoadGeneration)
	n := len(x.ids)
	qq := newQuery(q)
	bd := newBounds(qq, x.red.norm, x.dims)
	workers := runtime.GOMAXPROCS(0)
	// The int8 pass reads a quarter of the bytes a float32 scan does.
	if w := n * x.dims / 4 / parallelMinWork; w < workers {
		workers = max(w, 1)
	}
	workers = min(workers, n)
	parts := make([]pass1, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { parts[w] = x.firstPass(qq, &bd, k, lo, hi) })
	}
	wg.Wait()

	// The k-th best lower bound over all rows: every row whose upper bound
	// is below it scores strictly below k rows, so it cannot be a hit.
	var lows []float64
	for _, p := range parts {
		lows = append(lows, p.lows...)
	}
	slices.SortFunc(lows, func(a, b float64) int { return cmpDesc(a, b) })
	thr := lows[k-1]

	// Rerank, in float32 with the index's kernel, every kept row.
	var st stats
	tops := make([]topK, workers)
	counts := make([]int, workers)
	for w := range workers {
		tops[w] = newTopK(k, x.ids)
	}
	rerank := func(w int) {
		top, buf := &tops[w], make([]float32, x.dims)
		for _, c := range parts[w].cands {
			if c.hi < thr {
				continue
			}
			r := c.row
			top.offer(r, x.dot(q, x.rowOf(r, buf)))
			counts[w]++
		}
	}
	total := 0
	for _, p := range parts {
		total += len(p.cands)
	}
	if total*x.dims < parallelMinWork {
		for w := range workers {
			rerank(w)
		}
	} else {
		for w := range workers {
			wg.Go(func() { rerank(w) })
		}
		wg.Wait()
	}
	merged := newTopK(k, x.ids)
	for w, t := range tops {
		for _, c := range t.items {
			merged.offer(c.row, c.sim)
		}
		st.Reranked += counts[w]
	}
	return merged.hits(), st
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// firstPass scores rows [lo, hi) in int8 and keeps the k best lower bounds
// and the rows whose upper bound reaches the k-th of them seen so far.
func (x *Index) firstPass(q *query, bd *bounds, k, lo, hi int) pass1 {
	d := x.dims
	p := pass1{lows: make([]float64, 0, k)}
	thr := math.Inf(-1)
	var dots [reducedBlock]int32
	for b := lo; b < hi; b += reducedBlock {
		end := min(b+reducedBlock, hi)
		out := dots[:end-b]
		x.i8.dots(x.red.codes[b*d:end*d], q, out)
		scales, errs := x.red.scales[b:end], x.red.errs[b:end]
		for i, dot := range out {
			lo, hi := bd.interval(scales[i], errs[i], dot)
			if hi < thr {
				continue
			}
			p.cands = append(p.cands, kept{row: b + i, hi: hi})
			if len(p.lows) < k {
				p.lows = append(p.lows, lo)
				heapUp(p.lows, len(p.lows)-1)
				if len(p.lows) == k {
					thr = p.lows[0]
				}
			} else if lo > p.lows[0] {
				p.lows[0] = lo
				heapDown(p.lows, 0)
				thr = p.lows[0]
			}
		}
	}
	return p
}

// heapUp and heapDown keep h a min-heap.
func heapUp(h []float64, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func heapDown(h []float64, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
