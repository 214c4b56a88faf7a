package index

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// Hit is one ranked search result.
type Hit struct {
	// Row is the row of the matrix, in insertion order.
	Row int
	// ID is the row's stable id.
	ID string
	// Similarity is the cosine similarity clipped to [-1, 1].
	Similarity float64
	// Distance is exactly 1 - Similarity.
	Distance float64
}

// Index is an immutable exact cosine index over unit float32 rows stored in
// one contiguous matrix, or, for a quantized index (a stored generation:
// Writer, Store.LoadGeneration), over the rows its int8 copy defines: row r is
// component by component the float32 product scales[r]*codes[r][j], and
// every score is exact for that row. It is safe for concurrent use.
type Index struct {
	dims int
	ids  []string
	data []float32 // len(ids) * dims, row-major, unit rows; nil when quantized
	// red is the int8 copy single-query searches scan first; nil when dims
	// exceeds maxReducedDims.
	red *reduced
	kernels

	fpOnce sync.Once
	fp     string
}

// Builder fills the matrix of a new Index row by row, normalising each row
// into preallocated storage so building needs the matrix plus one row of
// scratch, not a second copy. A Builder is not safe for concurrent use.
type Builder struct {
	dims int
	ids  []string
	data []float32
	seen map[string]int
	red  *reduced // nil when dims exceeds maxReducedDims
}

// NewBuilder returns a Builder for rows of dims components. capacity is the
// expected row count; the matrix grows past it if needed.
func NewBuilder(dims, capacity int) (*Builder, error) {
	if dims <= 0 {
		return nil, fmt.Errorf("index: dimensions must be positive, have %d", dims)
	}
	if capacity < 0 {
		capacity = 0
	}
	b := &Builder{
		dims: dims,
		ids:  make([]string, 0, capacity),
		data: make([]float32, 0, capacity*dims),
		seen: make(map[string]int, capacity),
	}
	if dims <= maxReducedDims {
		b.red = &reduced{
			codes:  make([]int8, 0, capacity*dims),
			scales: make([]float32, 0, capacity),
			errs:   make([]float32, 0, capacity),
		}
	}
	return b, nil
}

// Add validates v (length dims, finite, non-zero) and appends it, normalised,
// under id, with its int8 copy. Ids must be unique and non-empty.
func (b *Builder) Add(id string, v []float32) error {
	if id == "" {
		return errors.New("index: empty id")
	}
	if prev, ok := b.seen[id]; ok {
		return fmt.Errorf("index: duplicate id %q (rows %d and %d)", id, prev, len(b.ids))
	}
	if len(v) != b.dims {
		return fmt.Errorf("%w: row %q has %d components, index has %d", ErrDimension, id, len(v), b.dims)
	}
	n := len(b.data)
	b.data = append(b.data, v...)
	if err := normalizeInto(b.data[n:], v); err != nil {
		b.data = b.data[:n]
		return fmt.Errorf("row %q: %w", id, err)
	}
	if red := b.red; red != nil {
		c := len(red.codes)
		red.codes = append(red.codes, make([]int8, b.dims)...)
		s, e, norm := quantizeInto(red.codes[c:], b.data[n:])
		red.scales = append(red.scales, s)
		red.errs = append(red.errs, e)
		red.norm = max(red.norm, norm)
	}
	b.seen[id] = len(b.ids)
	b.ids = append(b.ids, id)
	return nil
}

// Build returns the Index. The Builder must not be used afterwards.
func (b *Builder) Build() (*Index, error) {
	if len(b.ids) == 0 {
		return nil, errors.New("index: no rows")
	}
	idx := &Index{dims: b.dims, ids: b.ids, data: b.data, red: b.red, kernels: kernel()}
	b.ids, b.data, b.seen, b.red = nil, nil, nil, nil
	return idx, nil
}

// newQuantized returns the quantized index of n = len(ids) rows of dims
// int8 codes and their scales, every row's norm at most norm. It does not
// copy or check codes and scales (Store.Verify does).
func newQuantized(dims int, ids []string, codes []int8, scales []float32, norm float64) *Index {
	errs := make([]float32, len(scales))
	for r, s := range scales {
		errs[r] = dequantError(s, dims)
	}
	red := &reduced{codes: codes, scales: scales, errs: errs, norm: norm}
	return &Index{dims: dims, ids: ids, red: red, kernels: kernel()}
}

// ID returns the id of row r.
func (x *Index) ID(r int) string { return x.ids[r] }

// rowOf returns row r: a view of the matrix, or, quantized, the row the
// codes define written into buf (dims long).
func (x *Index) rowOf(r int, buf []float32) []float32 {
	d := x.dims
	if x.data != nil {
		return x.data[r*d : (r+1)*d]
	}
	s := x.red.scales[r]
	for j, c := range x.red.codes[r*d : (r+1)*d] {
		buf[j] = s * float32(c)
	}
	return buf
}

// New builds an Index from ids and their vectors (not required to be unit
// length; they are validated and normalised).
func New(ids []string, vectors [][]float32) (*Index, error) {
	if len(ids) != len(vectors) {
		return nil, fmt.Errorf("index: %d ids but %d vectors", len(ids), len(vectors))
	}
	if len(vectors) == 0 {
		return nil, errors.New("index: no rows")
	}
	b, err := NewBuilder(len(vectors[0]), len(vectors))
	if err != nil {
		return nil, err
	}
	for i, v := range vectors {
		if err := b.Add(ids[i], v); err != nil {
			return nil, err
		}
	}
	return b.Build()
}

// Dims returns the number of components of every row.
func (x *Index) Dims() int { return x.dims }

// Len returns the number of rows.
func (x *Index) Len() int { return len(x.ids) }

// IDs returns a copy of the row ids in row order.
func (x *Index) IDs() []string { return append([]string(nil), x.ids...) }

// MatrixBytes returns the size of the vector matrix in bytes.
// A quantized index has none: 0.
func (x *Index) MatrixBytes() int64 { return int64(len(x.data)) * 4 }

// ReducedBytes returns the size of the int8 copy (codes, scales and error
// bounds) in bytes, 0 when the index has none.
func (x *Index) ReducedBytes() int64 {
	if x.red == nil {
		return 0
	}
	return x.red.bytes()
}

// Kernels names the kernels this index runs: the float32 dot product every
// score comes from and the int8 kernel of the first pass of a single query
// ("none" without an int8 copy).
func (x *Index) Kernels() (f32, i8 string) {
	if x.red == nil {
		return x.f32Name, "none"
	}
	return x.f32Name, x.i8.name
}

// Fingerprint returns "sha256:<hex>" over the dimensions, the ids and the
// little-endian bytes of the matrix. It is computed once, on first use.
func (x *Index) Fingerprint() string {
	defer runtime.KeepAlive(x) // x owns the rows (see Store.LoadGeneration)
	x.fpOnce.Do(func() {
		h := sha256.New()
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], uint64(x.dims))
		h.Write(buf[:])
		binary.LittleEndian.PutUint64(buf[:], uint64(len(x.ids)))
		h.Write(buf[:])
		for _, id := range x.ids {
			binary.LittleEndian.PutUint64(buf[:], uint64(len(id)))
			h.Write(buf[:])
			h.Write([]byte(id))
		}
		if x.data != nil {
			h.Write([]byte(vectorsDigest(x.data)))
		} else {
			_ = writeQuantized(h, x.red) // a hash never fails to write
		}
		x.fp = "sha256:" + hex.EncodeToString(h.Sum(nil))
	})
	return x.fp
}

// vectorsDigest is "sha256:<hex>" of the little-endian bytes of data, the
// bytes writeVectors stores.
func vectorsDigest(data []float32) string {
	h := sha256.New()
	_ = writeVectors(h, data) // a hash never fails to write
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// parallelMinWork is the number of multiply-adds below which a search runs
// on one goroutine: splitting a small matrix costs more than it saves.
const parallelMinWork = 1 << 20

// tileBytes bounds the rows a batched search reuses across all its queries,
// so the tile stays in the per-core cache while every query visits it.
const tileBytes = 128 << 10

// Search returns the k rows most similar to query, ranked by descending
// similarity then ascending id. query must have Dims components, be finite
// and non-zero; it is normalised first. For large indexes the rows are split
// across GOMAXPROCS goroutines. Search does not block on anything else.
//
// The rows are first scanned in their int8 copy, which bounds every row's
// exact score from both sides; only rows whose upper bound reaches the k-th
// best lower bound are scored in float32. The result is the one a float32
// scan of every row gives: same rows, order and similarities, bit for bit.
func (x *Index) Search(query []float32, k int) ([]Hit, error) {
	res, err := x.SearchBatch([][]float32{query}, k)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// SearchBatch answers several queries in one pass over the matrix: rows are
// visited a cache-sized tile at a time and every query is scored against the
// tile before moving on, so each row is read from memory once per batch
// rather than once per query. Results equal those of Search, query by query.
func (x *Index) SearchBatch(queries [][]float32, k int) ([][]Hit, error) {
	defer runtime.KeepAlive(x) // x owns the rows (see Store.LoadGeneration)
	if k <= 0 {
		return nil, fmt.Errorf("index: k must be positive, have %d", k)
	}
	if len(queries) == 0 {
		return nil, errors.New("index: no queries")
	}
	qs := make([][]float32, len(queries))
	for i, q := range queries {
		if len(q) != x.dims {
			return nil, fmt.Errorf("%w: query %d has %d components, index has %d", ErrDimension, i, len(q), x.dims)
		}
		nq, err := Normalize(q)
		if err != nil {
			return nil, fmt.Errorf("query %d: %w", i, err)
		}
		qs[i] = nq
	}
	if k > len(x.ids) {
		k = len(x.ids)
	}
	if len(qs) == 1 && x.red != nil {
		hits, _ := x.searchReduced(qs[0], k)
		return [][]Hit{hits}, nil
	}
	n := len(x.ids)
	workers := runtime.GOMAXPROCS(0)
	if w := n * x.dims * len(qs) / parallelMinWork; w < workers {
		workers = max(w, 1)
	}
	if workers > n {
		workers = n
	}
	parts := make([][]topK, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { parts[w] = x.scan(qs, k, lo, hi) })
	}
	wg.Wait()
	out := make([][]Hit, len(qs))
	for qi := range qs {
		merged := newTopK(k, x.ids)
		for _, p := range parts {
			for _, c := range p[qi].items {
				merged.offer(c.row, c.sim)
			}
		}
		out[qi] = merged.hits()
	}
	return out, nil
}

// scan scores rows [lo, hi) against every query. A single query streams
// the rows once. Several queries are scored a cache-sized tile of rows at a
// time, four queries per pass over a row, so each row is read from memory
// once per batch and from cache once per four queries.
func (x *Index) scan(qs [][]float32, k, lo, hi int) []topK {
	tops := make([]topK, len(qs))
	for i := range tops {
		tops[i] = newTopK(k, x.ids)
	}
	d := x.dims
	buf := make([]float32, d)
	if len(qs) == 1 {
		q, top := qs[0], &tops[0]
		for r := lo; r < hi; r++ {
			top.offer(r, x.dot(q, x.rowOf(r, buf)))
		}
		return tops
	}
	tile := max(tileBytes/(4*d), 1)
	var group [4][]float32
	var sims [4]float32
	for t := lo; t < hi; t += tile {
		end := min(t+tile, hi)
		qi := 0
		for ; qi+4 <= len(qs); qi += 4 {
			copy(group[:], qs[qi:qi+4])
			for r := t; r < end; r++ {
				x.dot4(x.rowOf(r, buf), &group, &sims)
				for j, s := range sims {
					tops[qi+j].offer(r, s)
				}
			}
		}
		for ; qi < len(qs); qi++ {
			q, top := qs[qi], &tops[qi]
			for r := t; r < end; r++ {
				top.offer(r, x.dot(q, x.rowOf(r, buf)))
			}
		}
	}
	return tops
}

// candidate is a row and its clipped float32 similarity.
type candidate struct {
	row int
	sim float32
}

// topK keeps the k best candidates in a min-heap whose root is the worst
// kept one, so a row that cannot enter costs one comparison.
type topK struct {
	k     int
	ids   []string
	items []candidate
}

func newTopK(k int, ids []string) topK {
	return topK{k: k, ids: ids, items: make([]candidate, 0, k)}
}

// worse reports whether a ranks after b: lower similarity, or equal
// similarity and a larger id.
func (t *topK) worse(a, b candidate) bool {
	if a.sim != b.sim {
		return a.sim < b.sim
	}
	return t.ids[a.row] > t.ids[b.row]
}

func (t *topK) offer(row int, sim float32) {
	if sim > 1 {
		sim = 1
	} else if sim < -1 {
		sim = -1
	}
	c := candidate{row: row, sim: sim}
	if len(t.items) < t.k {
		t.items = append(t.items, c)
		t.up(len(t.items) - 1)
		return
	}
	if !t.worse(t.items[0], c) {
		return
	}
	t.items[0] = c
	t.down(0)
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.worse(t.items[i], t.items[p]) {
			return
		}
		t.items[i], t.items[p] = t.items[p], t.items[i]
		i = p
	}
}

func (t *topK) down(i int) {
	n := len(t.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.worse(t.items[r], t.items[l]) {
			m = r
		}
		if !t.worse(t.items[m], t.items[i]) {
			return
		}
		t.items[i], t.items[m] = t.items[m], t.items[i]
		i = m
	}
}

// hits drains the heap into best-first order.
func (t *topK) hits() []Hit {
	out := make([]Hit, len(t.items))
	for i := len(t.items) - 1; i >= 0; i-- {
		c := t.items[0]
		last := len(t.items) - 1
		t.items[0] = t.items[last]
		t.items = t.items[:last]
		t.down(0)
		sim := float64(c.sim)
		out[i] = Hit{Row: c.row, ID: t.ids[c.row], Similarity: sim, Distance: 1 - sim}
	}
	return out
}

// ScanFloorBytes reads the first b bytes of the matrix (at most all of it,
// whole components) once, split across goroutines the way Search splits
// rows, and returns their sum. It does no ranking: its run time is the
// memory-bandwidth floor of any pass that reads b bytes on the same machine
// and memory: a single-query float32 scan (MatrixBytes), the int8 pass
// (ReducedBytes) or a float16 copy (MatrixBytes/2).
func (x *Index) ScanFloorBytes(b int64) float32 {
	total := int(min(b, x.MatrixBytes()) / 4)
	workers := runtime.GOMAXPROCS(0)
	if w := total / parallelMinWork; w < workers {
		workers = max(w, 1)
	}
	sums := make([]float32, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := total*w/workers, total*(w+1)/workers
		wg.Go(func() { sums[w] = sum(x.data[lo:hi]) })
	}
	wg.Wait()
	var t float32
	for _, s := range sums {
		t += s
	}
	return t
}

// sumGeneric adds a with eight independent accumulators, so the loop is
// limited by memory, not by the latency of one dependent add chain.
func sumGeneric(a []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa := a[i : i+8 : i+8]
		s0 += aa[0]
		s1 += aa[1]
		s2 += aa[2]
		s3 += aa[3]
		s4 += aa[4]
		s5 += aa[5]
		s6 += aa[6]
		s7 += aa[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// SearchRows is Search restricted to rows (indexes into the matrix, each
// in [0, Len()); repeats are scored once): the k of them most similar to
// query, ranked as Search ranks, with the same float32 similarities. It
// scores every listed row exactly, on the calling goroutine, so it costs
// len(rows) dot products: the way to search the subset a metadata filter
// leaves.
func (x *Index) SearchRows(query []float32, rows []int, k int) ([]Hit, error) {
	defer runtime.KeepAlive(x) // x owns the rows (see Store.LoadGeneration)
	if k <= 0 {
		return nil, fmt.Errorf("index: k must be positive, have %d", k)
	}
	if len(query) != x.dims {
		return nil, fmt.Errorf("%w: query 0 has %d components, index has %d", ErrDimension, len(query), x.dims)
	}
	q, err := Normalize(query)
	if err != nil {
		return nil, fmt.Errorf("query 0: %w", err)
	}
	top := newTopK(min(k, len(rows)), x.ids)
	seen := make(map[int]bool, len(rows))
	buf := make([]float32, x.dims)
	for _, r := range rows {
		if r < 0 || r >= len(x.ids) {
			return nil, fmt.Errorf("index: row %d outside [0, %d)", r, len(x.ids))
		}
		if seen[r] {
			continue
		}
		seen[r] = true
		top.offer(r, x.dot(q, x.rowOf(r, buf)))
	}
	return top.hits(), nil
}
