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
		Long:  "Benchmark the worker's trace ingestion against raw JetStream consume-with-ack.",
	}
	fs := cmd.Flags()
	records := fs.Int("records", 1_000_000, "per-call records to publish")
	batch := fs.Int("batch", 512, "worker batch size (messages per transaction)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("bench worker: unexpected argument %q", pos[0])
		}
		if *records <= 0 {
			return usageErrorf("bench worker: --records must be positive")
		}
		opts := ingest.Options{Records: *records, Batch: *batch}
		if !*asJSON {
			opts.OnPublished = func(n int, d time.Duration) {
				fmt.Fprintf(stdout, "published %d records in %s\n", n, d.Round(time.Millisecond))
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
		fmt.Fprintf(stdout, "raw JetStream consume+ack:      %10.0f msgs/s (%s)\n", res.RawPerSec, res.Raw.Round(time.Millisecond))
		fmt.Fprintf(stdout, "worker (store commit, then ack): %10.0f records/s (%s, %d stored, %d not acked)\n", res.WorkerPerSec, res.Worker.Round(time.Millisecond), res.Stored, res.NotAcked)
		fmt.Fprintf(stdout, "worker / raw: %.2f (target >= 0.70)\n", res.Ratio)
		return res.Check()
	}
	return cmd
}
