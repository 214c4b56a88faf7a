package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/window"
	htmlreport "github.com/verdryx/verdryx/report"
	"github.com/verdryx/verdryx/store"
)

// reportTTL is how long /report serves a rendered page before rendering
// it again.
const reportTTL = 5 * time.Second

// reportHandler serves the report of the worker's store at /report: eval
// runs and baselines, and cost and SLOs from the trace calls the worker
// has stored; rendered on request and cached for ttl.
func reportHandler(st *store.Store, traces func(context.Context, outcome.Options) (*fleet.Aggregate, error), ttl time.Duration, version string, logger *slog.Logger) http.Handler {
	return htmlreport.NewHandler(func(ctx context.Context, w io.Writer, q url.Values) error {
		opts, err := window.Parse("", q.Get("from"), q.Get("to"), q.Get("last"), time.Now())
		if err != nil {
			return htmlreport.BadRequest(fmt.Errorf("report: %w", err))
		}
		in, err := htmlreport.Load(ctx, st, time.Time{}, 0)
		if err != nil {
			return err
		}
		agg, err := traces(ctx, opts) // the window's day tables only
		if errors.Is(err, fleet.ErrWindowNotWholeHours) {
			return htmlreport.BadRequest(fmt.Errorf("report: %w", err))
		}
		if err != nil {
			return fmt.Errorf("report: trace partitions: %w", err)
		}
		r, err := agg.Reducer(opts)
		if errors.Is(err, fleet.ErrWindowNotWholeHours) || errors.Is(err, fleet.ErrWindowCutsWholeDay) {
			return htmlreport.BadRequest(fmt.Errorf("report: %w", err))
		}
		if err != nil {
			return err
		}
		in.Traces, in.TraceSource = r, "the merged trace partitions of the fleet"+windowNote(opts)
		in.Sources = []string{"store " + st.Path() + " (verdryx serve)"}
		return htmlreport.Render(ctx, w, in, htmlreport.Options{Version: version})
	}, htmlreport.HandlerOptions{TTL: ttl, Logger: logger, Params: []string{"from", "to", "last"}})
}

// windowNote names a window of the calls for a report's trace source.
func windowNote(o outcome.Options) string {
	switch {
	case o.From.IsZero() && o.To.IsZero():
		return ""
	case o.To.IsZero():
		return ", calls from " + o.From.UTC().Format(time.RFC3339)
	case o.From.IsZero():
		return ", calls before " + o.To.UTC().Format(time.RFC3339)
	}
	return ", calls from " + o.From.UTC().Format(time.RFC3339) + " to " + o.To.UTC().Format(time.RFC3339)
}
