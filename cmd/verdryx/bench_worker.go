package main

import (
	"github.com/spf13/cobra"

	"fmt"
	"time"

	"github.com/verdryx/verdryx/internal/bench/ingest"
)

// benchWorker maps the flags of `verdryx bench worker` onto ingest.Run and
// prints its figures.
func newBenchWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "benchmark the worker's trace ingestion",
		Long: "Benchmark the worker's trace ingestion against raw JetStream consume-with-ack: each round publishes\n" +
			"--records per-call records to a fresh embedded server, consumes them with a plain consumer acking each\n" +
			"message, then runs the worker's partitioned trace consumers into a fresh store (commit, snapshot, ack).\n" +
			"Prints each round, then the best raw and best worker rate of --rounds and their ratio (other load on\n" +
			"the machine only slows a pass down) beside the median of the rounds' own ratios.",
	}
	fs := cmd.Flags()
	records := fs.Int("records", 1_000_000, "per-call records to publish")
	batch := fs.Int("batch", 512, "worker batch size (messages per transaction)")
	rounds := fs.Int("rounds", 3, "measured rounds, each on a fresh server and store")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("bench worker: unexpected argument %q", pos[0])
		}
		if *records <= 0 {
			return usageErrorf("bench worker: --records must be positive")
		}
		if *rounds <= 0 {
			return usageErrorf("bench worker: --rounds must be positive")
		}
		opts := ingest.Options{Records: *records, Batch: *batch, Rounds: *rounds}
		if !*asJSON {
			opts.OnRound = func(rd ingest.Round) {
				fmt.Fprintf(stdout, "round %d: published in %s; raw %.0f msgs/s (%s); worker %.0f records/s (%s, %d stored, %d not acked); worker/raw %.2f\n",
					rd.Round, rd.Publish.Round(time.Millisecond), rd.RawPerSec, rd.Raw.Round(time.Millisecond),
					rd.WorkerPerSec, rd.Worker.Round(time.Millisecond), rd.Stored, rd.NotAcked, rd.Ratio)
			}
		}
		res, err := ingest.Run(ctx, opts)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := writeJSON(stdout, res); err != nil {
				return err
			}
			return res.Check()
		}
		fmt.Fprintf(stdout, "raw JetStream consume+ack, best of %d:       %10.0f msgs/s\n", len(res.Rounds), res.RawPerSec)
		fmt.Fprintf(stdout, "worker (store commit, then ack), best of %d: %10.0f records/s\n", len(res.Rounds), res.WorkerPerSec)
		fmt.Fprintf(stdout, "worker / raw: %.2f best to best, %.2f median of rounds (target >= 0.70)\n", res.Ratio, res.MedianRatio)
		return res.Check()
	}
	return cmd
}
