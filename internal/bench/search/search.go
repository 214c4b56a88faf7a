// Package search is the harness of `verdryx bench index`: exact search over
// synthetic vectors, measured as build time and peak memory against the
// matrix size, the plain-scan memory-bandwidth floor of the same matrix,
// single-query time against that floor, and batched per-query time against
// single.
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

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/internal/bench/rss"
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
	Rows       []Row  `json:"rows"`
}

// Row holds the figures of one size. Durations are in nanoseconds.
type Row struct {
	N           int           `json:"n"`
	MatrixBytes int64         `json:"matrix_bytes"`
	PeakBytes   int64         `json:"build_peak_bytes"` // growth of VmHWM over the resident set before the build
	Build       time.Duration `json:"build_ns"`
	Floor       time.Duration `json:"floor_ns"`  // one parallel sequential sum over the matrix
	Single      time.Duration `json:"single_ns"` // one query
	Batch       time.Duration `json:"batch_ns_per_query"`
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
		r, err := measure(n, opts.Dim, opts.Batch, opts.Reps)
		if err != nil {
			return Result{}, err
		}
		res.Rows = append(res.Rows, r)
	}
	return res, nil
}

func measure(n, dim, batch, reps int) (Row, error) {
	r := Row{N: n}
	runtime.GC()
	debug.FreeOSMemory()
	rss.ResetPeak()
	before := rss.Current()

	start := time.Now()
	b, err := index.NewBuilder(dim, n)
	if err != nil {
		return r, err
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(dim)))
	row := make([]float32, dim)
	for i := range n {
		for j := range row {
			row[j] = rng.Float32() - 0.5
		}
		if err := b.Add("v"+strconv.Itoa(i), row); err != nil {
			return r, err
		}
	}
	idx, err := b.Build()
	if err != nil {
		return r, err
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
	idx.ScanFloor() // warm up
	r.Floor = median(reps, func() error { idx.ScanFloor(); return nil })
	qi := 0
	r.Single = median(reps, func() error {
		_, err := idx.Search(queries[qi%batch], 2)
		qi++
		return err
	})
	r.Batch = median(max(reps/3, 3), func() error {
		_, err := idx.SearchBatch(queries, 2)
		return err
	}) / time.Duration(batch)
	runtime.KeepAlive(idx)
	return r, nil
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
