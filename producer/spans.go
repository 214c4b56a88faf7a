package producer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// SpanOptions configure NewSpans.
type SpanOptions struct {
	// Endpoint is the collector's root URL (for example
	// http://localhost:4318: spans are posted to Endpoint + "/v1/traces")
	// or a full traces URL (any other path; see TracesURL).
	// A URL that already ends in /v1/traces is used as is.
	Endpoint string
	// Timeout bounds each export; 0 means 10 s. Exports are not retried.
	Timeout time.Duration
	// ServiceVersion is recorded as service.version when set.
	ServiceVersion string
}

// Spans exports OTLP spans over OTLP/HTTP (protobuf): one per drift
// check, and per eval run either one finished span (Span) or a live run
// span (StartRun) under which grading records a span per case and the
// GenAI span of every model and judge call. The trace id of a run span is
// derived from its run id, so an eval and a later drift check on the same
// run group together; the runs of a model comparison are children of the
// comparison's span (StartParent), in its trace.
//
// Spans is safe for concurrent use. Call Shutdown before the process exits:
// it flushes what is queued and reports the export error, if any.
type Spans struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// NewSpans builds an exporter to opts.Endpoint. It makes no network call
// until a span is flushed.
func NewSpans(ctx context.Context, opts SpanOptions) (*Spans, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("spans: empty OTLP endpoint")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	url := TracesURL(opts.Endpoint)
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(url),
		otlptracehttp.WithTimeout(opts.Timeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	)
	if err != nil {
		return nil, fmt.Errorf("spans: exporter for %s: %w", url, err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName("verdryx")}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(opts.ServiceVersion))
	}
	// The OpenTelemetry SDK's standard variables win over verdryx's
	// defaults: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
	res, err := resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("spans: resource from OTEL_SERVICE_NAME/OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(runIDGenerator{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return &Spans{tp: tp, tracer: tp.Tracer("github.com/verdryx/verdryx")}, nil
}

// TracesURL is where spans for endpoint are posted: a root URL (no path,
// or "/") gets /v1/traces appended; a URL with any other path is a full
// traces URL, used as given.
func TracesURL(endpoint string) string {
	u, err := neturl.Parse(endpoint)
	if err != nil || strings.Trim(u.Path, "/") != "" {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// TraceIDFor derives the trace id of a run: the first 16 bytes of
// SHA-256(runID).
func TraceIDFor(runID string) trace.TraceID {
	sum := sha256.Sum256([]byte(runID))
	var id trace.TraceID
	copy(id[:], sum[:16])
	return id
}

type runIDKey struct{}

// runIDGenerator gives a span the trace id of the run id in its context
// and a random span id.
type runIDGenerator struct{}

func (runIDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	if runID, ok := ctx.Value(runIDKey{}).(string); ok && runID != "" {
		tid = TraceIDFor(runID)
	} else {
		_, _ = rand.Read(tid[:])
	}
	return tid, randomSpanID()
}

func (runIDGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return sid
}

// Span records one finished span named name under the run's trace, with
// attributes verdryx.run_id, verdryx.agent_id (when set) and verdryx.<key>
// for each data key. It does not block on the network.
func (s *Spans) Span(ctx context.Context, name, runID, agentID string, start, end time.Time, data map[string]any) {
	_, endSpan := s.StartRun(ctx, name, runID, agentID, start)
	endSpan(end, data, nil)
}

// StartRun starts a root span named name at start, under the trace of
// runID (TraceIDFor), with verdryx.run_id and verdryx.agent_id (when set),
// and returns the context carrying it: spans started from that context
// (the grading runner's case spans, the model adapters' GenAI call spans)
// are its descendants in the same trace. The returned function ends it:
// it sets verdryx.<key> for each data key (nil values left out), marks the
// span failed when err is not nil, and ends it at end; call it once. It
// implements grading.RunTracer.
//
// A context from StartParent makes the run span a child of the parent's
// span, in the parent's trace, instead.
func (s *Spans) StartRun(ctx context.Context, name, runID, agentID string, start time.Time) (context.Context, func(end time.Time, data map[string]any, err error)) {
	opts := []trace.SpanStartOption{trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal)}
	if parent, ok := ctx.Value(parentKey{}).(trace.SpanContext); ok && parent.IsValid() {
		// Under the group's span, whatever span ctx carries now; a run
		// started in this run's context is a child of the group again.
		ctx = trace.ContextWithSpanContext(ctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, sp := s.tracer.Start(context.WithValue(ctx, runIDKey{}, runID), name, opts...)
	attrs := []attribute.KeyValue{attribute.String("verdryx.run_id", runID)}
	if agentID != "" {
		attrs = append(attrs, attribute.String("verdryx.agent_id", agentID))
	}
	sp.SetAttributes(attrs...)
	return ctx, func(end time.Time, data map[string]any, err error) { endRun(sp, end, data, err) }
}

// parentKey carries the span context of a StartParent span.
type parentKey struct{}

// StartParent starts a root span named name at start, under the trace of
// id (TraceIDFor), with verdryx.run_id set to id and verdryx.agent_id
// (when set): the span of a group of runs, a model comparison. Run spans
// started (StartRun, Span) from the returned context, or one derived from
// it, are its children in its trace. The returned function ends it as
// StartRun's does. It implements evalrun.ParentTracer.
func (s *Spans) StartParent(ctx context.Context, name, id, agentID string, start time.Time) (context.Context, func(end time.Time, data map[string]any, err error)) {
	ctx = context.WithValue(ctx, parentKey{}, trace.SpanContext{}) // a root, whatever ctx held
	ctx, end := s.StartRun(ctx, name, id, agentID, start)
	return context.WithValue(ctx, parentKey{}, trace.SpanContextFromContext(ctx)), end
}

// endRun sets the data attributes and the error of a run span and ends it.
func endRun(sp trace.Span, end time.Time, data map[string]any, err error) {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]attribute.KeyValue, 0, len(keys))
	for _, k := range keys {
		if kv, ok := attr("verdryx."+k, data[k]); ok {
			attrs = append(attrs, kv)
		}
	}
	sp.SetAttributes(attrs...)
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(trace.WithTimestamp(end))
}

// attr converts a data value to an attribute; nil is left out.
func attr(key string, v any) (attribute.KeyValue, bool) {
	switch x := v.(type) {
	case nil:
		return attribute.KeyValue{}, false
	case string:
		return attribute.String(key, x), true
	case bool:
		return attribute.Bool(key, x), true
	case int:
		return attribute.Int(key, x), true
	case int64:
		return attribute.Int64(key, x), true
	case float64:
		return attribute.Float64(key, x), true
	case *float64:
		if x == nil {
			return attribute.KeyValue{}, false
		}
		return attribute.Float64(key, *x), true
	case []string:
		return attribute.StringSlice(key, x), true
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return attribute.String(key, fmt.Sprint(x)), true
		}
		return attribute.String(key, string(b)), true
	}
}

// Flush exports every span recorded so far and returns the export error.
func (s *Spans) Flush(ctx context.Context) error {
	if err := s.tp.ForceFlush(ctx); err != nil {
		return fmt.Errorf("spans: flush: %w", err)
	}
	return nil
}

// Shutdown flushes and stops the exporter; the Spans is unusable after.
func (s *Spans) Shutdown(ctx context.Context) error {
	ferr := s.Flush(ctx)
	if err := s.tp.Shutdown(ctx); err != nil {
		return errors.Join(ferr, fmt.Errorf("spans: shutdown: %w", err))
	}
	return ferr
}
