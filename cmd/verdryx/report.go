package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/outcome"

	htmlreport "github.com/verdryx/verdryx/report"
	"github.com/verdryx/verdryx/store"
)

// cmdReport writes the HTML report of the store (and traces) to a file.
// Exit 0: written; 2: usage or input error (no store, bad --since,
// unreadable traces).
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
	allowEmpty := fs.Bool("allow-empty", false, "render when --traces holds no segments or --input no records (default: exit 2 saying it is empty)")
	traces := fs.String("traces", "", "directory of TokenFuse Parquet segments for cost per outcome and SLOs (off when empty: those sections say not measured)")
	input := fs.String("input", "", "NDJSON/JSONL or CSV file of per-call records (docs/traces.md), instead of --traces")
	out := fs.String("out", "report.html", "file to write")
	since := fs.String("since", "", "only runs started at or after this time (RFC 3339, or a date meaning its midnight UTC)")
	gridRuns := fs.Int("grid-runs", 30, "most recent runs per eval set and model in the cases x runs grid")
	driftChecks := fs.Int("drift-checks", 60, "most recent runs per eval set and model checked for drift against their baseline")
	strict := fs.Bool("strict", false, "a bad trace segment is fatal (default: reported, counted and skipped)")
	asJSON := fs.Bool("json", false, "print what was written as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("report: unexpected argument %q", pos[0])
		}
		from, err := parseWhen("since", *since, false)
		if err != nil {
			return usageErrorf("report: %v", err)
		}
		if *gridRuns < 1 || *driftChecks < 1 {
			return usageErrorf("report: --grid-runs and --drift-checks must be at least 1")
		}
		if *out == "" {
			return usageErrorf("report: --out is empty")
		}
		st, err := openEvalStore(ctx, *db, g.data, true)
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
		if err := addReportTraces(ctx, &in, *traces, *input, *allowEmpty, *strict, stderr); err != nil {
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

// reportHandler serves the report of the worker's store at /report: eval
// runs and baselines, and cost and SLOs from the trace calls the worker
// has stored; rendered on request and cached for ttl.
func reportHandler(st *store.Store, traces func(context.Context) (*fleet.Aggregate, error), ttl time.Duration, logger *slog.Logger) http.Handler {
	return htmlreport.NewHandler(func(ctx context.Context, w io.Writer) error {
		in, err := htmlreport.Load(ctx, st, time.Time{}, 0)
		if err != nil {
			return err
		}
		agg, err := traces(ctx)
		if err != nil {
			return fmt.Errorf("report: trace partitions: %w", err)
		}
		r, err := agg.Reducer(outcome.Options{})
		if err != nil {
			return err
		}
		in.Traces, in.TraceSource = r, "the merged trace partitions of the fleet"
		in.Sources = []string{"store " + st.Path() + " (verdryx serve)"}
		return htmlreport.Render(ctx, w, in, htmlreport.Options{Version: version()})
	}, htmlreport.HandlerOptions{TTL: ttl, Logger: logger})
}

// addReportTraces reduces the calls of --traces DIR or --input FILE (at
// most one; neither leaves the cost and SLO sections not measured) into
// in.Traces and names the source.
func addReportTraces(ctx context.Context, in *htmlreport.Input, traces, input string, allowEmpty, strict bool, stderr io.Writer) error {
	if traces != "" && input != "" {
		return usageErrorf("report: give at most one of --traces DIR or --input FILE")
	}
	if traces == "" && input == "" {
		return nil
	}
	r, err := outcome.NewReducer(outcome.Options{})
	if err != nil {
		return err
	}
	if input != "" {
		if err := outcome.ReadRecordsFile(input, r); err != nil {
			return inputError(err)
		}
		if st := r.Stats(); st.Calls == 0 && st.Records == 0 && !allowEmpty {
			return usageErrorf("report: --input %s holds no records (give --allow-empty to render it anyway)", input)
		}
		in.TraceSource = "records " + input
	} else {
		if err := checkTraceDir("--traces", traces, allowEmpty); err != nil {
			return err
		}
		if _, err := reduceTraces(ctx, traces, r, strict, 0, stderr); err != nil {
			return err
		}
		in.TraceSource = "traces " + traces
	}
	in.Traces = r
	in.Sources = append(in.Sources, in.TraceSource)
	return nil
}
