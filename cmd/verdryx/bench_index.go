package main

import (
	"github.com/spf13/cobra"

	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/verdryx/verdryx/bench/search"
)

// benchIndex maps the flags of `verdryx bench index` onto search.Run and
// prints its table.
func newBenchIndexCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "benchmark exact top-2 search over synthetic vectors",
		Long:  "benchmark exact top-2 search over synthetic vectors",
	}
	fs := cmd.Flags()
	sizes := fs.String("n", "1000,10000,100000", "comma-separated row counts")
	dim := fs.Int("dim", 1536, "vector dimensions")
	batch := fs.Int("batch", 64, "queries per batch")
	reps := fs.Int("reps", 15, "timed repetitions per measurement (the median is reported)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("bench index: unexpected argument %q", pos[0])
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
		res, err := search.Run(ctx, search.Options{Sizes: ns, Dim: *dim, Batch: *batch, Reps: *reps})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		return printBenchIndex(stdout, res)
	}
	return cmd
}

func printBenchIndex(stdout io.Writer, res search.Result) error {
	fmt.Fprintf(stdout, "exact cosine top-2, d=%d, GOMAXPROCS=%d, %s, median of %d\n", res.Dim, res.GOMAXPROCS, res.GoVersion, res.Reps)
	fmt.Fprintf(stdout, "kernels: float32 %s (every score), int8 %s (first pass of a single query)\n\n", res.KernelF32, res.KernelI8)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "n\tmatrix MiB\tint8 MiB\tbuild ms\tbuild peak MiB\tpeak/(matrix+int8)\tfloor ms\tf16 floor ms\tint8 floor ms\tsingle ms\treranked\tsingle/floor\tsingle/int8 floor\tbatch ms/query\tbatch/single\t")
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	for _, r := range res.Rows {
		fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.1f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f\t%.2f\t%.2f\t%.3f\t%.2f\t\n",
			r.N, mib(r.MatrixBytes), mib(r.ReducedBytes), ms(r.Build), mib(r.PeakBytes), float64(r.PeakBytes)/float64(r.MatrixBytes+r.ReducedBytes),
			ms(r.Floor), ms(r.FloorF16), ms(r.FloorI8), ms(r.Single), r.Reranked, float64(r.Single)/float64(r.Floor), float64(r.Single)/float64(r.FloorI8),
			ms(r.Batch), float64(r.Batch)/float64(r.Single))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nbuild peak: growth of the process's peak resident set (VmHWM, reset before each build) over its resident set before it;")
	fmt.Fprintln(stdout, "floor: one parallel sequential sum over the float32 matrix (memory bandwidth); f16 and int8 floor: the same over half and a quarter of its bytes,")
	fmt.Fprintln(stdout, "what a float16 copy and the int8 pass read; reranked: rows scored in float32 after the int8 pass, per query; batch: per-query time in batches of --batch.")
	return nil
}
