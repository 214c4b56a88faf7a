package main

import (
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/bench/traces"
	"github.com/verdryx/verdryx/tracegen"
)

// newBenchTracesCmd maps the flags of `verdryx bench traces` onto
// traces.Run and prints its figures.
func newBenchTracesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "traces",
		Short: "benchmark the trace reduction against a bare page scan",
		Long: "Generate TokenFuse trace directories of two shapes, the generator's 1,000 runs in flight and --in-flight\n" +
			"(default: every run in flight), into --dir/in-flight-N (reused when there), or take the segments already\n" +
			"in --dir as the one shape, and measure the full reduction (cost per outcome + SLOs, row groups on --procs\n" +
			"workers) against a bare page scan of the same columns on as many: rows/s of each, their ratio, CPU time\n" +
			"and the peak RSS (VmHWM, reset before each measured pass). Best of --rounds.",
	}
	fs := cmd.Flags()
	d := tracegen.DefaultFleetOptions()
	rows := fs.Int64("rows", d.Rows, "rows to generate")
	dir := fs.String("dir", "", "directory for the segments (default: a temporary directory, removed after); existing segments there are reused")
	rounds := fs.Int("rounds", 3, "measured passes of each kind; the best is reported")
	procs := fs.Int("procs", 1, "GOMAXPROCS during the measured passes, and the workers of the scan and of the reduction")
	rowGroup := fs.Int64("row-group", traces.DefaultRowGroupRows, "rows per row group (100k-1M is typical)")
	inFlight := fs.Int("in-flight", 0, "runs in flight (interleaved) in the second shape; 0 = every run")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("bench traces: unexpected argument %q", pos[0])
		}
		if *rows <= 0 || *rounds <= 0 || *procs <= 0 || *rowGroup <= 0 || *inFlight < 0 {
			return usageErrorf("bench traces: --rows, --rounds, --procs and --row-group must be positive, --in-flight at least 0")
		}
		opts := traces.Options{Rows: *rows, Dir: *dir, Rounds: *rounds, Procs: *procs, RowGroupRows: *rowGroup, InFlight: *inFlight}
		if isTerminal(stderr) {
			var bar *progressbar.ProgressBar
			last := int64(0)
			opts.OnGenerate = func(done int64) {
				if bar == nil {
					bar = progressbar.NewOptions64(2**rows, progressbar.OptionSetWriter(stderr),
						progressbar.OptionSetDescription("generating traces"), progressbar.OptionClearOnFinish())
				}
				_ = bar.Add64(done - last)
				last = done
				if done >= 2**rows {
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
	fmt.Fprintf(stdout, "bench traces: columns %s; GOMAXPROCS=%d; best of %d\n", res.Columns, res.GOMAXPROCS, res.Rounds)
	for _, sh := range res.Shapes {
		fmt.Fprintf(stdout, "\n%s: %d rows, %d runs, %d segments, %d row groups of %d rows, %.1f MiB",
			sh.Name, sh.Rows, sh.Runs, sh.Segments, sh.RowGroups, sh.RowGroupRows, float64(sh.Bytes)/(1<<20))
		if sh.Generated {
			fmt.Fprintf(stdout, " (generated in %.1fs)", sh.GenerateSeconds)
		}
		fmt.Fprintf(stdout, "\n  page scan:      %6.1fM rows/s  (%.3fs, cpu %.3fs)  peak RSS %.1f MiB\n", sh.ScanRowsPerSec/1e6, sh.ScanSeconds, sh.ScanCPUSeconds, sh.ScanPeakRSSMiB)
		fmt.Fprintf(stdout, "  full reduction: %6.1fM rows/s  (%.3fs, cpu %.3fs)  peak RSS %.1f MiB\n", sh.ReduceRowsPerSec/1e6, sh.ReduceSeconds, sh.ReduceCPUSeconds, sh.PeakRSSMiB)
		fmt.Fprintf(stdout, "  reduction takes %.2fx the page scan's time\n", sh.Ratio)
	}
}
