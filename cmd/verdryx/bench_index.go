package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/internal/bench/rss"
)

// benchIndex measures exact search over synthetic vectors: build time and
// peak memory against the matrix size, the plain-scan memory-bandwidth floor
// of the same matrix, single-query time against that floor, and batched
// per-query time against single.
func benchIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench index", "", "benchmark exact top-2 search over synthetic vectors", stderr)
	sizes := fs.String("n", "1000,10000,100000", "comma-separated row counts")
	dim := fs.Int("dim", 1536, "vector dimensions")
	batch := fs.Int("batch", 64, "queries per batch")
	reps := fs.Int("reps", 15, "timed repetitions per measurement (the median is reported)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return usageErrorf("bench index: --n: %q is not a positive integer", f)
		}
		ns = append(ns, n)
	}
	if *dim <= 0 || *batch <= 0 || *reps <= 0 {
		return usageErrorf("bench index: --dim, --batch and --reps must be positive")
	}
	slices.Sort(ns) // ascending, so each build's peak is its own
	fmt.Fprintf(stdout, "exact cosine top-2, d=%d, GOMAXPROCS=%d, %s, median of %d\n\n", *dim, runtime.GOMAXPROCS(0), runtime.Version(), *reps)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "n\tmatrix MiB\tbuild ms\tbuild peak MiB\tpeak/matrix\tfloor ms\tsingle ms\tsingle/floor\tbatch ms/query\tbatch/single\t")
	for _, n := range ns {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := measureIndex(n, *dim, *batch, *reps)
		if err != nil {
			return err
		}
		mib := func(b int64) float64 { return float64(b) / (1 << 20) }
		fmt.Fprintf(tw, "%d\t%.2f\t%.1f\t%.2f\t%.3f\t%.3f\t%.3f\t%.2f\t%.3f\t%.2f\t\n",
			n, mib(r.matrix), ms(r.build), mib(r.peak), float64(r.peak)/float64(r.matrix),
			ms(r.floor), ms(r.single), float64(r.single)/float64(r.floor),
			ms(r.batch), float64(r.batch)/float64(r.single))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nbuild peak: growth of the process's peak resident set (VmHWM, reset before each build) over its resident set before it;")
	fmt.Fprintln(stdout, "floor: one parallel sequential sum over the same float32 matrix (memory bandwidth); batch: per-query time in batches of --batch.")
	return nil
}

type indexFigures struct {
	matrix, peak                int64
	build, floor, single, batch time.Duration
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func measureIndex(n, dim, batch, reps int) (indexFigures, error) {
	var r indexFigures
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
	r.build = time.Since(start)
	r.peak = rss.Peak() - before
	r.matrix = idx.MatrixBytes()

	queries := make([][]float32, batch)
	for i := range queries {
		queries[i] = make([]float32, dim)
		for j := range queries[i] {
			queries[i][j] = rng.Float32() - 0.5
		}
	}
	idx.ScanFloor() // warm up
	r.floor = median(reps, func() error { idx.ScanFloor(); return nil })
	qi := 0
	r.single = median(reps, func() error {
		_, err := idx.Search(queries[qi%batch], 2)
		qi++
		return err
	})
	r.batch = median(max(reps/3, 3), func() error {
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
