package main

import (
	"github.com/spf13/cobra"

	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"

	"github.com/verdryx/verdryx/internal/bench/traces"
	"github.com/verdryx/verdryx/tracegen"
)

// benchTraces maps the flags of `verdryx bench traces` onto traces.Run and
// prints its figures.
func newBenchTracesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "traces",
		Short: "benchmark the trace reduction against a bare page scan",
		Long: "Generate a TokenFuse trace directory (or reuse the segments already in --dir) and measure the full\n" +
			"reduction (cost per outcome + SLOs) against a bare page scan of the same columns: rows/s of each,\n" +
			"their ratio and the peak RSS (VmHWM, reset before each measured pass). Best of --rounds.",
	}
	fs := cmd.Flags()
	d := tracegen.DefaultFleetOptions()
	rows := fs.Int64("rows", d.Rows, "rows to generate")
	dir := fs.String("dir", "", "directory for the segments (default: a temporary directory, removed after); existing segments there are reused")
	rounds := fs.Int("rounds", 3, "measured passes of each kind; the best is reported")
	procs := fs.Int("procs", 1, "GOMAXPROCS during the measured passes (the reduction is single-threaded)")
	rowGroup := fs.Int64("row-group", d.RowGroupRows, "rows per row group (100k-1M is typical)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("bench traces: unexpected argument %q", pos[0])
		}
		if *rows <= 0 || *rounds <= 0 || *procs <= 0 || *rowGroup <= 0 {
			return usageErrorf("bench traces: --rows, --rounds, --procs and --row-group must be positive")
		}
		opts := traces.Options{Rows: *rows, Dir: *dir, Rounds: *rounds, Procs: *procs, RowGroupRows: *rowGroup}
		if isTerminal(stderr) {
			var bar *progressbar.ProgressBar
			last := int64(0)
			opts.OnGenerate = func(done int64) {
				if bar == nil {
					bar = progressbar.NewOptions64(*rows, progressbar.OptionSetWriter(stderr),
						progressbar.OptionSetDescription("generating traces"), progressbar.OptionClearOnFinish())
				}
				_ = bar.Add64(done - last)
				last = done
				if done >= *rows {
					_ = bar.Finish()
				}
			}
		}
		res, err := traces.Run(ctx, opts)
		if err != nil {
			if traces.IsInput(err) {
				return inputError(err)
			}
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		printBenchTraces(stdout, res)
		return nil
	}
	return cmd
}

func printBenchTraces(stdout io.Writer, res traces.Result) {
	fmt.Fprintf(stdout, "bench traces: %d rows, %d runs, %d segments, %.1f MiB, row groups of %d rows",
		res.Rows, res.Runs, res.Segments, float64(res.Bytes)/(1<<20), res.RowGroupRows)
	if res.Generated {
		fmt.Fprintf(stdout, " (generated in %.1fs)", res.GenerateSeconds)
	}
	fmt.Fprintf(stdout, "\ncolumns: %s; GOMAXPROCS=%d; best of %d\n", res.Columns, res.GOMAXPROCS, res.Rounds)
	fmt.Fprintf(stdout, "page scan:      %6.1fM rows/s  (%.3fs)  peak RSS %.1f MiB\n", res.ScanRowsPerSec/1e6, res.ScanSeconds, res.ScanPeakRSSMiB)
	fmt.Fprintf(stdout, "full reduction: %6.1fM rows/s  (%.3fs)  peak RSS %.1f MiB\n", res.ReduceRowsPerSec/1e6, res.ReduceSeconds, res.PeakRSSMiB)
	fmt.Fprintf(stdout, "reduction takes %.2fx the page scan's time\n", res.Ratio)
}
