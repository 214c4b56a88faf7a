package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/bench/e2e"
)

// newBenchWorkerCmd maps the flags of `verdryx bench worker` onto e2e.Run
// and prints its figures.
func newBenchWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "benchmark the deployed path (serve --once --replay) against cost-per-correct --traces",
		Long: "Benchmark the deployed path against the direct path on the same directory, in one run: each round runs\n" +
			"`cost-per-correct --traces DIR`, then `serve --once --replay DIR` on a fresh data directory (embedded\n" +
			"NATS, the replay published as row batches and applied until drained), as child processes. Prints their\n" +
			"wall times and ratio, the worker's peak RSS and CPU per million rows, and the JetStream store's bytes per\n" +
			"Parquet byte and per row; fails when the two reports differ. A third pass, the publishing floor, runs\n" +
			"`replay DIR` alone into a server of its own with no consumer: the worker path cannot beat it. With the\n" +
			"machine's cores, each pass's CPU gives the least wall time it could take. The directory (--dir, else a\n" +
			"temporary one) is generated with every run in flight (the shape `bench traces` uses) when it holds no\n" +
			"segments.",
	}
	fs := cmd.Flags()
	rows := fs.Int64("rows", 10_000_000, "rows to generate when --dir holds no segments")
	dir := fs.String("dir", "", "segment directory (generated there when empty of segments; default: a temporary directory, removed after)")
	rounds := fs.Int("rounds", 1, "rounds of the passes; the best time and CPU of each is reported, and the worst peak RSS and store size")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("bench worker: unexpected argument %q", pos[0])
		}
		if *rows <= 0 || *rounds <= 0 {
			return usageErrorf("bench worker: --rows and --rounds must be positive")
		}
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench worker: %w", err)
		}
		opts := e2e.Options{Exe: exe, Dir: *dir, Rows: *rows, Rounds: *rounds}
		if !*asJSON {
			opts.OnRound = func(rd e2e.Round) {
				fmt.Fprintf(stdout, "round %d: cost-per-correct %s, serve --once --replay %s (%.2fx), worker cpu %.1fs (system %.1fs, %dk page faults), peak RSS %.0f MiB, store %.0f MiB, reports equal: %v; replay alone %s (%.2fx), cpu %.1fs (server %.1fs)\n",
					rd.Round, secs(rd.DirectSeconds), secs(rd.WorkerSeconds), rd.Ratio, rd.WorkerCPU, rd.WorkerSysCPU, rd.WorkerFaults/1000,
					float64(rd.WorkerPeakRSS)/(1<<20), float64(rd.StoreBytes)/(1<<20), rd.ReportsEqual, secs(rd.FloorSeconds), rd.FloorRatio, rd.FloorCPU, rd.FloorServerCPU)
			}
		}
		res, err := e2e.Run(ctx, opts)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := writeJSON(stdout, res); err != nil {
				return err
			}
			return res.Check()
		}
		fmt.Fprintf(stdout, "%s: %d rows in %d segments, %.1f MiB of Parquet\n", res.Dir, res.Rows, res.Segments, float64(res.ParquetBytes)/(1<<20))
		fmt.Fprintf(stdout, "worker / direct wall time: %.2fx (best %s / best %s; goal <= %dx)\n", res.Ratio, secs(res.WorkerSeconds), secs(res.DirectSeconds), e2e.RatioTarget)
		fmt.Fprintf(stdout, "JetStream store, worst round: %.2f bytes per Parquet byte (goal <= %.1f), %.1f bytes per row\n", res.StorePerParquet, e2e.StorePerParquetMax, res.StoreBytesPerRow)
		fmt.Fprintf(stdout, "worker peak RSS, worst round: %.0f MiB (goal < %d MiB); worker CPU: %.2f s per million rows\n", float64(res.WorkerPeakRSS)/(1<<20), e2e.PeakRSSMax>>20, res.WorkerCPUPerMRows)
		fmt.Fprintf(stdout, "publishing floor (replay alone into a server of its own, no worker): %.2fx (best %s)\n", res.FloorRatio, secs(res.FloorSeconds))
		fmt.Fprintf(stdout, "CPU bounds on %d cores, every core busy throughout: publishing alone %.2fx, the worker pass %.2fx\n", res.Cores, res.FloorCPUBound, res.WorkerCPUBound)
		return res.Check()
	}
	return cmd
}

// secs formats seconds as a rounded duration.
func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
