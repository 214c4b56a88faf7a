package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/outcome/window"
	htmlreport "github.com/verdryx/verdryx/report"
	"github.com/verdryx/verdryx/tracemsg"
	"github.com/verdryx/verdryx/tracesource"
)

// newReportCmd makes the report command, which writes the HTML report of the
// store (and traces) to a file. Exit 0: written; 2: usage or input error (no
// store, bad --since, unreadable traces).
func newReportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "write one self-contained HTML page of quality, drift, cost and SLOs",
		Long: "Write one self-contained HTML page (no script, nothing fetched) with quality over time,\n" +
			"a cases x runs grid, cost per outcome and SLO error budgets, and a provenance footer.\n" +
			"Exit 0: written; 2: usage or input error.",
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	var tr reportTraceFlags
	tr.register(fs)
	out := fs.String("out", "report.html", "file to write")
	since := fs.String("since", "", "only runs started at or after this time (RFC 3339, or a date meaning its midnight UTC)")
	gridRuns := fs.Int("grid-runs", 30, "most recent runs per eval set and model in the cases x runs grid")
	driftChecks := fs.Int("drift-checks", 60, "most recent runs per eval set and model checked for drift against their baseline")
	asJSON := fs.Bool("json", false, "print what was written as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("report: unexpected argument %q", pos[0])
		}
		from, err := window.When("--since", *since, false)
		if err != nil {
			return usageErrorf("report: %v", err)
		}
		if *gridRuns < 1 || *driftChecks < 1 {
			return usageErrorf("report: --grid-runs and --drift-checks must be at least 1")
		}
		if *out == "" {
			return usageErrorf("report: --out is empty")
		}
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, storeRead)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		defer st.Close()
		path := st.Path()
		in, err := htmlreport.Load(ctx, st, from, *gridRuns)
		if err != nil {
			return err
		}
		in.Sources = append(in.Sources, "store "+path)
		if note := historyNote(ctx, st); note != "" {
			in.Sources = append(in.Sources, note)
		}
		if err := tr.add(ctx, &in, stderr); err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := htmlreport.Render(ctx, &buf, in, htmlreport.Options{Version: version(), GridRuns: *gridRuns, DriftChecks: *driftChecks}); err != nil {
			return err
		}
		if err := writeFileAtomic(*out, buf.Bytes()); err != nil {
			return inputError(fmt.Errorf("report: --out %s: %w", *out, err))
		}
		if *asJSON {
			return writeJSON(stdout, map[string]any{"out": *out, "bytes": buf.Len(), "runs": len(in.Runs)})
		}
		fmt.Fprintf(stdout, "wrote %s (%d bytes, %d runs)\n", *out, buf.Len(), len(in.Runs))
		return nil
	}
	return cmd
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it over path, so a reader never sees half a page.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// reportTraceFlags are report's trace inputs for the cost and SLO
// sections: at most one of --traces DIR, --input FILE or --nats URL (the
// fleet's merged partitions), and a window of the calls.
type reportTraceFlags struct {
	tf    traceFlags
	input string
}

func (f *reportTraceFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.tf.allowEmpty, "allow-empty", false, "render when --traces holds no segments or --input no records (default: exit 2 saying it is empty)")
	fs.StringVar(&f.tf.traces, "traces", "", "directory of TokenFuse Parquet segments for cost per outcome and SLOs (off when none of --traces, --input, --nats: those sections say not measured)")
	fs.StringVar(&f.input, "input", "", inputHelp)
	fs.BoolVar(&f.tf.strict, "strict", false, "a bad trace segment is fatal (default: reported, counted and skipped)")
	f.tf.nats = addNATSFlags(fs, "", "cost and SLOs from the merged trace partitions the workers published on this NATS server, instead of --traces")
	*f.tf.nats.url = "" // not $NATS_URL: a report of the store alone must keep working where it is set
	fs.IntVar(&f.tf.partitions, "partitions", tracemsg.DefaultPartitions, "trace partitions of the fleet read with --nats")
	fs.StringVar(&f.tf.from, "from", "", "cost and SLOs of calls at or after this time only (RFC 3339, or a date; with --nats on the hour)")
	fs.StringVar(&f.tf.to, "to", "", "cost and SLOs of calls before this time only (RFC 3339, or a date meaning the end of that day UTC)")
	fs.StringVar(&f.tf.last, "last", "", "cost and SLOs of the last DURATION only (24h, 7d, 2w), from the start of the hour it begins in")
}

// add reduces the calls of the one trace input given (none leaves the
// cost and SLO sections not measured) into in.Traces and names the source.
func (f *reportTraceFlags) add(ctx context.Context, in *htmlreport.Input, stderr io.Writer) error {
	if src := (tracesource.Source{Traces: f.tf.traces, Input: f.input}); *f.tf.nats.url == "" && src.Dir() == "" && src.Given() == 0 {
		if f.tf.from != "" || f.tf.to != "" || f.tf.last != "" {
			return usageErrorf("report: --from, --to and --last window the calls of --traces, --input or --nats: give one")
		}
		return nil
	}
	opts, err := f.tf.options("", stderr)
	if err != nil {
		return usageErrorf("report: %v", err)
	}
	res, err := f.tf.reduceSource(ctx, "report", f.input, opts, stderr)
	if err != nil {
		return err
	}
	switch {
	case *f.tf.nats.url != "":
		in.TraceSource = "the merged trace partitions of the fleet at " + *f.tf.nats.url
	case f.input != "":
		in.TraceSource = "records " + f.input
	default:
		in.TraceSource = "traces " + res.Traces
	}
	in.Traces = res.Reducer
	in.Sources = append(in.Sources, in.TraceSource)
	return nil
}
