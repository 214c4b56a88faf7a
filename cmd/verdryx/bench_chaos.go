package main

import (
	"github.com/spf13/cobra"

	"fmt"
	"os"

	"github.com/verdryx/verdryx/bench/chaos"
)

// benchChaos maps the flags of `verdryx bench chaos` onto chaos.Run and
// prints its result. Exit 1 when a call was lost or duplicated, the
// reports differ, an eval request did not run exactly once or a chain
// failed; 2 when the harness itself could not run.
func newBenchChaosCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "exactly once under faults: kill the worker and compare",
		Long: "Exactly once under faults: generate a trace directory, run `verdryx serve` as a child on its own\n" +
			"data directory, replay the directory, SIGKILL serve --kills times at seeded random moments (restarting it\n" +
			"and its embedded NATS server each time) plus one SIGTERM restart, submit eval requests throughout, drain,\n" +
			"then compare the store with cost-per-correct on the directory and verify every event chain. With --cluster N\n" +
			"the workers connect to an in-process N-node JetStream cluster (R3) and a node is down across every stop\n" +
			"and restart; unplanned_exits counts workers that exited without being stopped (any fails the run).",
	}
	fs := cmd.Flags()
	kills := fs.Int("kills", 3, "SIGKILLs of the serve child")
	records := fs.Int("records", 50_000, "trace rows to generate")
	seed := fs.Uint64("seed", 1, "seed of the traces, the kill moments and the request ids")
	evals := fs.Int("evals", 6, "eval requests submitted during the run")
	evalSet := fs.String("evalset", "testdata/grimoire/evalset.json", "eval set the requests run (its directory is serve's --root)")
	drain := fs.Duration("drain-timeout", 0, "bound on the final wait for the consumers to drain (default 90s)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	keep := fs.Bool("keep", false, "keep the work directory (traces, data, child logs)")
	cluster := fs.Int("cluster", 0, "run the workers against an in-process JetStream cluster of this many nodes (>= 3; R3 streams and buckets), stopping and restarting a node at every phase; 0: serve's embedded server")
	lf := addLogFlags(fs, "warn")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("bench chaos: unexpected argument %q", pos[0])
		}
		if *cluster != 0 && *cluster < 3 {
			return usageErrorf("bench chaos: --cluster needs at least 3 nodes")
		}
		if *kills < 0 || *evals < 0 || *records < chaos.MinRecords {
			return usageErrorf("bench chaos: --kills and --evals must be >= 0 and --records >= %d", chaos.MinRecords)
		}
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench chaos: the verdryx binary: %w", err)
		}
		logger, err := lf.logger(stderr, nil)
		if err != nil {
			return err
		}
		res, err := chaos.Run(ctx, chaos.Options{
			Bin: bin, Kills: *kills, Records: *records, Seed: *seed, EvalRequests: *evals, EvalSet: *evalSet,
			DrainTimeout: *drain, Keep: *keep, Cluster: *cluster,
			Logger: logger,
		})
		if err != nil {
			if res != nil && res.Dir != "" {
				fmt.Fprintf(stderr, "bench chaos: work directory kept: %s\n", res.Dir)
			}
			return inputError(err)
		}
		if *asJSON {
			err = writeJSON(stdout, res)
		} else {
			err = res.WriteText(stdout)
		}
		if err != nil {
			return err
		}
		if !res.OK {
			return failed()
		}
		return nil
	}
	return cmd
}
