// Package search is the harness of `verdryx bench index`: exact search over
// synthetic vectors, measured as build time and peak memory against the
// matrix plus its int8 copy, the plain-scan memory-bandwidth floors of
// reading the float32 matrix, half of it (what a float16 copy would read)
// and a quarter of it (what the int8 pass reads), single-query time against
// those floors, and batched per-query time against single. The floors and
// the single query are timed in turn, rep by rep, so that the machine's
// load moves them together.
package search

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/verdryx/verdryx/bench/rss"
	"github.com/verdryx/verdryx/index"
)

// Options configures Run.
type Options struct {
	Sizes []int // row counts; run ascending, so each build's peak is its own
	Dim   int   // vector dimensions
	Batch int   // queries per batch
	Reps  int   // timed repetitions per measurement (the median is reported)
}

// Result holds the figures of one run, one Row per size, ascending.
type Result struct {
	Dim        int    `json:"dim"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	Reps       int    `json:"reps"`
	Batch      int    `json:"batch"`
	// KernelF32 and KernelI8 name the kernels that ran: the float32 dot
	// product every score comes from and the int8 first pass.
	KernelF32 string `json:"kernel_f32"`
	KernelI8  string `json:"kernel_i8"`
	Rows      []Row  `json:"rows"`
}

// Row holds the figures of one size. Durations are in nanoseconds.
type Row struct {
	N            int           `json:"n"`
	MatrixBytes  int64         `json:"matrix_bytes"`
	ReducedBytes int64         `json:"reduced_bytes"`    // the int8 copy: codes, scales and error bounds
	PeakBytes    int64         `json:"build_peak_bytes"` // growth of VmHWM over the resident set before the build
	Build        time.Duration `json:"build_ns"`
	Floor        time.Duration `json:"floor_ns"`     // one parallel sequential sum over the matrix
	FloorF16     time.Duration `json:"floor_f16_ns"` // the same over half its bytes
	FloorI8      time.Duration `json:"floor_i8_ns"`  // the same over a quarter of its bytes, what the int8 pass reads
	Single       time.Duration `json:"single_ns"`    // one query
	Reranked     float64       `json:"reranked"`     // rows scored in float32 per single query, mean
	Batch        time.Duration `json:"batch_ns_per_query"`
}

// Run measures each size of opts.Sizes, ascending.
func Run(ctx context.Context, opts Options) (Result, error) {
	if len(opts.Sizes) == 0 || opts.Dim <= 0 || opts.Batch <= 0 || opts.Reps <= 0 {
		return Result{}, errors.New("bench index: sizes, dim, batch and reps must be positive")
	}
	ns := slices.Clone(opts.Sizes)
	slices.Sort(ns)
	res := Result{Dim: opts.Dim, GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Reps: opts.Reps, Batch: opts.Batch}
	for _, n := range ns {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if n <= 0 {
			return Result{}, errors.New("bench index: sizes must be positive")
		}
		r, f32, i8, err := measure(n, opts.Dim, opts.Batch, opts.Reps)
		if err != nil {
			return Result{}, err
		}
		res.KernelF32, res.KernelI8 = f32, i8
		res.Rows = append(res.Rows, r)
	}
	return res, nil
}

func measure(n, dim, batch, reps int) (r Row, f32, i8 string, err error) {
	r = Row{N: n}
	runtime.GC()
	debug.FreeOSMemory()
	rss.ResetPeak()
	before := rss.Current()

	start := time.Now()
	b, err := index.NewBuilder(dim, n)
	if err != nil {
		return r, "", "", err
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(dim)))
	row := make([]float32, dim)
	for i := range n {
		for j := range row {
			row[j] = rng.Float32() - 0.5
		}
		if err := b.Add("v"+strconv.Itoa(i), row); err != nil {
			return r, "", "", err
		}
	}
	idx, err := b.Build()
	if err != nil {
		return r, "", "", err
	}
	r.Build = time.Since(start)
	r.PeakBytes = rss.Peak() - before
	r.MatrixBytes = idx.MatrixBytes()

	queries := make([][]float32, batch)
	for i := range queries {
		queries[i] = make([]float32, dim)
		for j := range queries[i] {
			queries[i][j] = rng.Float32() - 0.5
		}
	}
	r.ReducedBytes = idx.ReducedBytes()
	f32, i8 = idx.Kernels()
	idx.ScanFloorBytes(idx.MatrixBytes()) // warm up
	var floor, f16, fi8, single []time.Duration
	reranked := 0
	for i := range reps {
		floor = append(floor, timed(func() { idx.ScanFloorBytes(idx.MatrixBytes()) }))
		f16 = append(f16, timed(func() { idx.ScanFloorBytes(idx.MatrixBytes() / 2) }))
		fi8 = append(fi8, timed(func() { idx.ScanFloorBytes(idx.MatrixBytes() / 4) }))
		var n int
		single = append(single, timed(func() { _, n, err = idx.SearchStats(queries[i%batch], 2) }))
		if err != nil {
			return r, "", "", err
		}
		reranked += n
	}
	r.Floor, r.FloorF16, r.FloorI8, r.Single = mid(floor), mid(f16), mid(fi8), mid(single)
	r.Reranked = float64(reranked) / float64(reps)
	r.Batch = median(max(reps/3, 3), func() error {
		_, err := idx.SearchBatch(queries, 2)
		return err
	}) / time.Duration(batch)
	runtime.KeepAlive(idx)
	return r, f32, i8, nil
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func mid(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func median(reps int, f func() error) time.Duration {
	ds := make([]time.Duration, 0, reps)
	for range reps {
		start := time.Now()
		if err := f(); err != nil {
			return 0
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
