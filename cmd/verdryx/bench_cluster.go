package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/bench/cluster"
)

// newBenchClusterCmd maps the flags of `verdryx bench cluster` onto
// cluster.Run and prints its figures. Exit 1 when a merged report differs.
func newBenchClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "benchmark partitioned trace workers on an in-process three-node JetStream cluster",
		Long: "Partitioned traces on an in-process three-node JetStream cluster: replay a generated directory,\n" +
			"consume it with 1..--workers `verdryx serve --nats` children, time each round until every partition is drained\n" +
			"and published, and compare the merged report with the direct reduction of the directory.",
	}
	fs := cmd.Flags()
	workers := fs.Int("workers", 3, "largest worker count (rounds run 1..N)")
	records := fs.Int("records", 200_000, "trace rows to generate")
	seed := fs.Uint64("seed", 1, "seed of the traces")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	keep := fs.Bool("keep", false, "keep the work directory")
	lf := addLogFlags(fs, "warn")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("bench cluster: unexpected argument %q", pos[0])
		}
		if *workers <= 0 || *records <= 0 {
			return usageErrorf("bench cluster: --workers and --records must be positive")
		}
		logger, err := lf.logger(stderr, nil)
		if err != nil {
			return err
		}
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench cluster: the verdryx binary: %w", err)
		}
		res, err := cluster.Run(ctx, cluster.Options{Bin: bin, Workers: *workers, Records: *records, Seed: *seed, Keep: *keep, Logger: logger})
		if err != nil {
			return err
		}
		if *asJSON {
			if err := writeJSON(stdout, res); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(stdout, "%d records, %d-node cluster, %d partitions\n", res.Records, res.Nodes, res.Partitions)
			for _, r := range res.Rounds {
				fmt.Fprintf(stdout, "%d worker(s): %10.0f records/s (%.2fs), worker CPU %.2f s per million records  merged report equals cost-per-correct: %v\n",
					r.Workers, r.RecordsPerSec, r.Seconds, r.CPUPerMillionRecords, r.Equal)
			}
			if res.Dir != "" {
				fmt.Fprintf(stdout, "work directory kept: %s\n", res.Dir)
			}
		}
		if !res.Equal {
			return failed()
		}
		return nil
	}
	return cmd
}
