package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/verdryx/verdryx/internal/bench/cluster"
)

// benchCluster maps the flags of `verdryx bench cluster` onto cluster.Run
// and prints its figures. Exit 1 when a merged report differs.
func benchCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench cluster", "", "Partitioned traces on an in-process three-node JetStream cluster: replay a generated directory,\n"+
		"consume it with 1..--workers `verdryx serve --nats` children, time each round until every partition is drained\n"+
		"and published, and compare the merged report with the direct reduction of the directory.", stderr)
	workers := fs.Int("workers", 3, "largest worker count (rounds run 1..N)")
	records := fs.Int("records", 200_000, "trace rows to generate")
	seed := fs.Uint64("seed", 1, "seed of the traces")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	keep := fs.Bool("keep", false, "keep the work directory")
	verbose := fs.Bool("v", false, "log progress to stderr")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *workers <= 0 || *records <= 0 {
		return usageErrorf("bench cluster: --workers and --records must be positive")
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench cluster: the verdryx binary: %w", err)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	res, err := cluster.Run(ctx, cluster.Options{Bin: bin, Workers: *workers, Records: *records, Seed: *seed, Keep: *keep,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))})
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
			fmt.Fprintf(stdout, "%d worker(s): %10.0f records/s (%.2fs)  merged report equals cost-per-correct: %v\n",
				r.Workers, r.RecordsPerSec, r.Seconds, r.Equal)
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
