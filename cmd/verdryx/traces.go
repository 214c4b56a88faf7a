package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/outcome/window"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
	"github.com/verdryx/verdryx/tracesource"
)

// traceFlags are the input flags cost-per-correct and slo share.
type traceFlags struct {
	traces, from, to string
	last             string
	strict, asJSON   bool
	allowEmpty       bool
	procs            int
	nats             natsFlags
	partitions       int
	stdin            io.Reader // what --input - reads
}

func (t *traceFlags) register(fs *pflag.FlagSet) {
	t.nats = addNATSFlags(fs, "", "read the merged trace partitions the workers published on this NATS server instead of --traces")
	*t.nats.url = "" // not $NATS_URL: --traces must keep working where it is set
	fs.IntVar(&t.partitions, "partitions", tracemsg.DefaultPartitions, "trace partitions of the fleet read with --nats")
	fs.StringVar(&t.traces, "traces", "", "directory of TokenFuse Parquet segments (calls-{pid:x}-{nanos:x}-{seq:08}.parquet or the earlier calls-{seq:08}.parquet; other files ignored)")
	fs.StringVar(&t.from, "from", "", "only calls at or after this time (RFC 3339, or a date meaning its midnight UTC)")
	fs.StringVar(&t.to, "to", "", "only calls before this time (RFC 3339, or a date meaning the end of that day UTC)")
	fs.StringVar(&t.last, "last", "", "only calls of the last DURATION up to now (90m, 24h, 7d, 2w), from the start of the hour it begins in (with --traces as with --nats, which keeps its state per hour)")
	fs.BoolVar(&t.strict, "strict", false, "a bad segment is fatal (default: reported, counted and skipped)")
	fs.BoolVar(&t.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&t.allowEmpty, "allow-empty", false, "report an input with no calls (default: exit 2 saying what was empty)")
	fs.IntVar(&t.procs, "procs", runtime.GOMAXPROCS(0), "row groups of --traces reduced in parallel, 0 = GOMAXPROCS (the report is the same for any value)")
}

// options returns the reduction's options of the flags; a --last window
// is named on stderr (it starts on the hour).
func (t *traceFlags) options(by string, stderr io.Writer) (outcome.Options, error) {
	o, err := window.Parse("--", t.from, t.to, t.last, time.Now())
	o.By = by
	if err == nil && t.last != "" {
		fmt.Fprintf(stderr, "verdryx: --last %s starts at %s, on the hour before (the fleet keeps its state by the hour; --traces and --input count the same window)\n",
			t.last, o.From.UTC().Format(time.RFC3339))
	}
	return o, err
}

// inputHelp is --input's help: the forms segfold.ReduceInput reads.
const inputHelp = "records instead of --traces: a .parquet file with the call columns (any name), a directory of them, " +
	"a JSON array, NDJSON or CSV file of per-call records (Parquet column names) or flat {outcome, cost_usd} records; - reads standard input"

// newCostPerCorrectCmd makes the cost-per-correct command, which prints what
// each outcome costs per run, from a trace directory or an outcome-record
// file.
func newCostPerCorrectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cost-per-correct",
		Short: "cost per outcome from TokenFuse Parquet traces or outcome records",
		Long: "Cost per outcome: each run's calls fold into one bucket (last non-empty outcome tag by step wins, (untagged)\n" +
			"otherwise); blocked calls are counted but not costed. Reports runs, calls, blocked calls, total and mean\n" +
			"cost per run per tag, an overall row, and all spend divided by resolved runs.",
	}
	fs := cmd.Flags()
	var tf traceFlags
	tf.register(fs)
	input := fs.String("input", "", inputHelp)
	by := fs.String("by", "", "group by agent_id, key_id or model")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("cost-per-correct: unexpected argument %q", pos[0])
		}
		opts, err := tf.options(*by, stderr)
		if err != nil {
			return usageErrorf("cost-per-correct: %v", err)
		}
		// A directory is read for this report alone: only the columns it
		// needs are decoded (the fleet's merged state, --nats, is full).
		opts.CostOnly = *input == "" && *tf.nats.url == ""
		tf.stdin = cmd.InOrStdin()
		res, err := tf.reduceSource(ctx, "cost-per-correct", *input, opts, stderr)
		if err != nil {
			return err
		}
		dirStats := res.Dir
		rep, err := res.Reducer.CheckedReport()
		if err != nil {
			return inputError(err)
		}
		if tf.asJSON {
			return writeJSON(stdout, struct {
				*outcome.Report
				Traces *segfold.DirStats `json:"traces,omitempty"`
			}{rep, dirStats})
		}
		if err := rep.WriteTable(stdout); err != nil {
			return err
		}
		if dirStats != nil {
			fmt.Fprintf(stdout, "segments: %d read, %d skipped as bad, %d other files ignored\n",
				dirStats.Segments, len(dirStats.Failed), dirStats.Ignored)
		}
		return nil
	}
	return cmd
}

// newSLOCmd makes the slo command, which prints the four SLIs with their
// error budgets per agent and for the fleet, and appends slo_burn events for
// alerting ones with --events.
func newSLOCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slo",
		Short: "SLO indicators and error budgets from traces",
		Long: "SLO indicators and error budgets from a trace directory: task_success, quality_floor (eval scores from\n" +
			"--scores-db, joined by agent id), containment and cost_discipline, per agent id and for the fleet, with\n" +
			"Wilson intervals, budget remaining, burn rate over the most recent 1/28 of the span and triggers.\n" +
			"Fewer than --min-events events is reported as not measured, never as 0. With --events, an slo_burn\n" +
			"event is appended for each exhausted or fast-burning indicator whose ci_high is below target.",
	}
	fs := cmd.Flags()
	var tf traceFlags
	tf.register(fs)
	d := outcome.DefaultSLOOptions()
	target := fs.Float64("target", d.Target, "objective for every indicator, in (0, 1)")
	confidence := fs.Float64("confidence", d.Confidence, "Wilson interval confidence, in (0, 1)")
	minEvents := fs.Int64("min-events", d.MinEvents, "fewest events an indicator is measured on")
	good := fs.String("good-outcomes", strings.Join(d.GoodOutcomes, ","), "comma-separated outcome tags task_success counts as good")
	costMultiple := fs.Float64("cost-multiple", d.CostMultiple, "cost_discipline bound as a multiple of the fleet median run cost")
	events := fs.String("events", envOr("VERDRYX_EVENTS_PATH", ""), "append slo_burn events to this chained NDJSON file (env VERDRYX_EVENTS_PATH)")
	input := fs.String("input", "", inputHelp)
	scoresDB := fs.String("scores-db", "", "eval store (SQLite) whose scores feed quality_floor; must exist (default: the data directory's store, or $VERDRYX_DB, when there is one)")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("slo: unexpected argument %q", pos[0])
		}
		opts, err := tf.options("", stderr)
		if err != nil {
			return usageErrorf("slo: %v", err)
		}
		sopts := outcome.SLOOptions{Target: *target, Confidence: *confidence, MinEvents: *minEvents,
			QualityFloor: d.QualityFloor, CostMultiple: *costMultiple}
		for _, g := range strings.Split(*good, ",") {
			if g = strings.TrimSpace(g); g != "" {
				sopts.GoodOutcomes = append(sopts.GoodOutcomes, g)
			}
		}
		if err := sopts.Validate(); err != nil {
			return usageErrorf("slo: %v", err)
		}
		if sopts.Scores, err = sloScores(ctx, *scoresDB, g.data); err != nil {
			return err
		}
		tf.stdin = cmd.InOrStdin()
		res, err := tf.reduceSource(ctx, "slo", *input, opts, stderr)
		if err != nil {
			return err
		}
		st := res.Dir
		rep, err := res.Reducer.SLO(sopts, envelope.ValidAgentID)
		if err != nil {
			return usageErrorf("slo: %v", err)
		}
		var written int
		if *events != "" {
			if written, err = producer.AppendFile(*events, rep.BurnEvents(time.Now())); err != nil {
				return err
			}
		}
		return printSLO(stdout, rep, st, tf.asJSON, *events, written)
	}
	return cmd
}

// printSLO prints the SLO report with the replay counts and the events
// appended to eventsPath.
// printSLO prints the report; st is the trace directory's figures, nil
// when the records came from --input or --nats.
func printSLO(stdout io.Writer, rep *outcome.SLOReport, st *segfold.DirStats, asJSON bool, eventsPath string, written int) error {
	if asJSON {
		return writeJSON(stdout, struct {
			*outcome.SLOReport
			Traces        *segfold.DirStats `json:"traces,omitempty"`
			EventsWritten int               `json:"events_written"`
		}{rep, st, written})
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if st != nil {
		fmt.Fprintf(stdout, "segments: %d read, %d skipped as bad; ", st.Segments, len(st.Failed))
	}
	fmt.Fprintf(stdout, "%d runs", rep.Subjects[0].Runs)
	if eventsPath != "" {
		fmt.Fprintf(stdout, "; %d slo_burn events appended to %s", written, eventsPath)
	}
	fmt.Fprintln(stdout)
	return nil
}

// sloScores are the eval scores quality_floor joins: those of --scores-db,
// else of the data directory's store when there is one, else none.
func sloScores(ctx context.Context, scoresDB, data string) (map[string][]float64, error) {
	if scoresDB == "" {
		// The store the quickstart and eval made, when there is one.
		if p := dbPath("", data); fileExists(p) {
			scoresDB = p
		}
	}
	if scoresDB == "" {
		return nil, nil
	}
	scores, err := loadScores(ctx, scoresDB)
	if err != nil {
		return nil, inputError(err)
	}
	return scores, nil
}

// reduceSource folds the one source the flags of command name give
// (--traces DIR, --input FILE or --nats URL, else $TOKENFUSE_DATA_DIR)
// into a reducer made with opts (tracesource.Reduce); the Result's Dir is
// nil unless a directory was read. It says on stderr what a reader of the
// report should know: the environment's directory, an empty one, the
// segments skipped, the fleet's late calls.
func (f *traceFlags) reduceSource(ctx context.Context, name, input string, opts outcome.Options, stderr io.Writer) (*tracesource.Result, error) {
	src := tracesource.Source{Traces: f.traces, Input: input, Stdin: f.stdin,
		Strict: f.strict, AllowEmpty: f.allowEmpty, Procs: f.procs, Alone: true} // the command exits when done
	if *f.nats.url != "" {
		if err := checkNATSURL(*f.nats.url); err != nil {
			return nil, err
		}
		var nc *nats.Conn
		defer func() {
			if nc != nil {
				nc.Close()
			}
		}()
		src.Fleet = func() (jetstream.JetStream, error) {
			var err error
			if nc, err = f.nats.connect(*f.nats.url, "verdryx-report"); err != nil {
				return nil, err
			}
			return jetstream.New(nc)
		}
		src.Subjects = streams.DefaultSubjects()
		src.Subjects.Partitions = f.partitions
	}
	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		src.Progress = func(total int64, n int) func(segment.Segment) {
			if n < 2 {
				return nil
			}
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(stderr),
				progressbar.OptionSetDescription("reading traces"),
				progressbar.OptionShowBytes(true),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond))
			return func(s segment.Segment) { _ = bar.Add64(s.Size) }
		}
	}
	res, err := tracesource.Reduce(ctx, src, opts)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return nil, f.sourceError(name, input, opts, err)
	}
	if res.FromEnv {
		fmt.Fprintf(stderr, "verdryx: read the TokenFuse directory of $%s, %s (none of --traces, --input or --nats given)\n", segment.DirEnv, res.Traces)
	}
	if d := res.Dir; d != nil {
		if d.Segments+len(d.Failed) == 0 {
			fmt.Fprintf(stderr, "verdryx: no TokenFuse segments in %s (%d other files ignored)\n", res.Traces, d.Ignored)
		}
		for _, fl := range d.Failed {
			fmt.Fprintf(stderr, "verdryx: skipped %v\n", fl.Err)
		}
	}
	if res.Late > 0 {
		fmt.Fprintf(stderr, "verdryx: %d call(s) arrived after their day was past the workers' retention: reported here, not counted\n", res.Late)
	}
	return res, nil
}

// sourceError words an error of tracesource.Reduce for command name in
// the flags' terms, with its exit code.
func (f *traceFlags) sourceError(name, input string, opts outcome.Options, err error) error {
	err = withFlagNames(serveOptionFlags(), err)
	fromNATS := *f.nats.url != ""
	var (
		in *tracesource.InputError
		us *tracesource.UsageError
	)
	dir := tracesource.Source{Traces: f.traces}.Dir()
	switch {
	case errors.Is(err, tracesource.ErrSources):
		return usageErrorf("%s: give exactly one of --traces DIR, --input FILE or --nats URL (or set $%s)", name, segment.DirEnv)
	case errors.Is(err, tracesource.ErrGroupedFleet):
		return usageErrorf("%s: --by %s with --nats: the workers keep each run's state whole, not its calls split by %s (group --traces or --input instead)", name, opts.By, opts.By)
	case errors.Is(err, tracesource.ErrEmpty) && input != "":
		return usageErrorf("%s: --input %s holds no records (give --allow-empty to report it anyway)", name, input)
	case errors.Is(err, tracesource.ErrEmpty):
		return usageErrorf("%s: --traces %s holds no TokenFuse segments (give --allow-empty to report it anyway)", name, dir)
	case errors.As(err, &us) && fromNATS:
		return usageErrorf("%s: --nats: %v", name, us.Err)
	case errors.As(err, &us):
		return usageErrorf("%s: %v", name, us.Err)
	case errors.As(err, &in) && fromNATS:
		return inputError(fmt.Errorf("--nats: %w", err))
	case errors.As(err, &in):
		return inputError(err)
	case fromNATS:
		return fmt.Errorf("--nats: %w", err)
	}
	return err
}

// loadScores reads per-agent eval scores from an existing store.
func loadScores(ctx context.Context, path string) (map[string][]float64, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("--scores-db: %w", err)
	}
	st, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("--scores-db: %w", err)
	}
	defer st.Close()
	var q outcome.QualityScores = st
	scores, err := q.AgentScores(ctx)
	if err != nil {
		return nil, fmt.Errorf("--scores-db %s: %w", path, err)
	}
	return scores, nil
}

// fileExists reports whether path names an existing regular file.
func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
