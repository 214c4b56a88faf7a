package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/bench/soak"
)

// newBenchSoakCmd maps the flags of `verdryx bench soak` onto soak.Run and
// prints its series.
func newBenchSoakCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "months of a fleet's traffic, compressed, against one long-running serve: memory, state and disk per day",
		Long: "Run one `verdryx serve` child for --days simulated days of --day-seconds wall seconds each, its streams\n" +
			"kept for --retention simulated days. Each day a generated fleet's delivery (runs that start and end all day,\n" +
			"1% of calls arriving one to three days late) is replayed into it, and every 5th day the delivery of three\n" +
			"days before is replayed again, after the duplicate window. Prints per day: records/s, the worker's RSS,\n" +
			"partition state and snapshot bytes, stream and disk bytes, and whether the fleet's report of the days it\n" +
			"holds (cost-per-correct --nats --from --to) equals the direct reduction of the same days; at the end each\n" +
			"of those days alone. Times a takeover (a new serve on the same data) seven times after day 10 and\n" +
			"after the last day, each after the same checks, and says whether the last is slower (an exact one-sided\n" +
			"rank-sum test of the tries). The month ends yesterday (UTC). Exit 1 when a report differed or the worker\n" +
			"did not stay up.",
	}
	fs := cmd.Flags()
	opts := soak.Options{}
	fs.IntVar(&opts.Days, "days", 30, "simulated days")
	fs.IntVar(&opts.CallsPerDay, "calls-per-day", 200_000, "calls generated per simulated day")
	fs.Float64Var(&opts.DaySeconds, "day-seconds", 6, "wall seconds per simulated day (a day whose work takes longer runs over)")
	fs.IntVar(&opts.Retention, "retention", 7, "simulated days the serve child's streams keep a message")
	fs.Uint64Var(&opts.Fleet.Seed, "seed", 1, "seed of the generated fleet")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the work directory (segments, data, child logs)")
	asJSON := fs.Bool("json", false, "print the series as JSON")
	plotPath := fs.String("plot", "", "write the series as a figure (.png, else SVG)")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("bench soak: unexpected argument %q", pos[0])
		}
		switch {
		case opts.Days < 1 || opts.CallsPerDay < 1000:
			return usageErrorf("bench soak: --days %d --calls-per-day %d: want at least 1 day of 1,000 calls", opts.Days, opts.CallsPerDay)
		case opts.DaySeconds < 1:
			return usageErrorf("bench soak: --day-seconds %v: want at least 1", opts.DaySeconds)
		case opts.Retention < 1:
			return usageErrorf("bench soak: --retention %d: want at least 1 day", opts.Retention)
		}
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench soak: %w", err)
		}
		opts.Bin = exe
		opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: soakLogLevel()}))
		if !*asJSON {
			fmt.Fprintln(stdout, "day  rows      late  again  records/s  rss MiB  state KiB  snap KiB  stream MiB  disk MiB  exact  takeover")
			opts.OnDay = func(d soak.Day) { printSoakDay(stdout, d) }
		}
		res, err := soak.Run(ctx, opts)
		if err != nil {
			return fmt.Errorf("bench soak: %w", err)
		}
		if *plotPath != "" {
			if err := soak.Plot(res, *plotPath); err != nil {
				return err
			}
		}
		if *asJSON {
			if err := writeJSON(stdout, res); err != nil {
				return err
			}
		} else {
			printSoakEnd(stdout, res)
		}
		if len(res.Problems) > 0 {
			return fmt.Errorf("bench soak: %d problem(s)", len(res.Problems))
		}
		return nil
	}
	return cmd
}

func printSoakDay(w io.Writer, d soak.Day) {
	again, take := "-", "-"
	if d.Replayed > 0 {
		again = fmt.Sprint(d.Replayed)
	}
	if d.TakeoverSeconds > 0 {
		take = secs(d.TakeoverSeconds)
	}
	fmt.Fprintf(w, "%3d  %-8d  %-4d  %-5s  %-9.0f  %-7.0f  %-9.0f  %-8.0f  %-10.1f  %-8.1f  %-5v  %s\n",
		d.Day, d.Rows, d.Late, again, d.RecordsPerSecond, float64(d.RSS)/(1<<20), float64(d.StateBytes)/(1<<10),
		float64(d.SnapshotBytes)/(1<<10), float64(d.StreamBytes)/(1<<20), float64(d.DiskBytes)/(1<<20), d.Exact, take)
}

func printSoakEnd(w io.Writer, res soak.Result) {
	if n := len(res.Series); n > 10 {
		f := res.Flat(9, n-1)
		fmt.Fprintf(w, "day %d / day 10: rss %.2fx, state %.2fx, snapshots %.2fx, disk %.2fx (flat: within 1.10x)\n",
			n, f["rss"], f["state"], f["snapshot"], f["disk"])
		// Means of k days, each window after the retention filled (from
		// day Retention+1): one point of a series that moves ±10% from
		// day to day (a collection, a compaction, a replayed day) is not
		// its level.
		if k := min(res.ReplayAgainEvery, 10-res.Retention); k > 0 {
			m := res.FlatMean(9, n-1, k)
			fmt.Fprintf(w, "days %d-%d / days %d-%d (means): rss %.2fx, state %.2fx, snapshots %.2fx, disk %.2fx\n",
				n-k+1, n, 11-k, 10, m["rss"], m["state"], m["snapshot"], m["disk"])
		}
	}
	if c := res.Takeover; c != nil {
		verdict := "not slower"
		if c.PSlower < 0.05 {
			verdict = "slower"
		}
		fmt.Fprintf(w, "takeover day %d / day %d: %s / %s (medians, %.2fx); %s (one-sided rank-sum p %.3f over the tries; slower below 0.05)\n",
			c.LastDay, c.FirstDay, secs(c.LastMedian), secs(c.FirstMedian), c.Ratio, verdict, c.PSlower)
	}
	for _, d := range res.DayReports {
		note := ""
		if d.Inconclusive {
			note = " (inconclusive: checked after the day's retention could have passed)"
		}
		fmt.Fprintf(w, "day %d alone: fleet %d calls, direct %d, exact: %v%s\n", d.Day, d.FleetCalls, d.DirectCalls, d.Exact, note)
	}
	for _, p := range res.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
}

// soakLogLevel is debug when VERDRYX_SOAK_DEBUG is set, else warn.
func soakLogLevel() slog.Level {
	if os.Getenv("VERDRYX_SOAK_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
