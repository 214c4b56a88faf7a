package main

import (
	"github.com/spf13/cobra"

	"fmt"
	"time"

	"github.com/verdryx/verdryx/bench/chain"
)

// benchChain maps the flags of `verdryx bench chain` onto chain.Run and
// prints its figures.
func newBenchChainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "benchmark the chained NDJSON writer",
		Long:  "Benchmark the chained NDJSON writer (fsync off) against JCS canonicalization + SHA-256 alone.",
	}
	fs := cmd.Flags()
	dur := fs.Duration("time", 2*time.Second, "minimum time per benchmark")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("bench chain: unexpected argument %q", pos[0])
		}
		res, err := chain.Run(ctx, chain.Options{MinTime: *dur})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		fl, wr := res.Floor, res.Writer
		fmt.Fprintf(stdout, "event size: %d bytes\n", res.EventBytes)
		fmt.Fprintf(stdout, "canonicalize+sha256 (floor): %10.0f events/s  %6.0f ns/event  %5.1f allocs/event\n", fl.EventsPerSec, fl.NsPerEvent, fl.AllocsPerEvent)
		fmt.Fprintf(stdout, "chained writer (fsync off):  %10.0f events/s  %6.0f ns/event  %5.1f allocs/event\n", wr.EventsPerSec, wr.NsPerEvent, wr.AllocsPerEvent)
		fmt.Fprintf(stdout, "writer / floor time ratio:   %.2fx (target <= 2x; target rate >= 200000 events/s)\n", res.Ratio)
		return nil
	}
	return cmd
}
