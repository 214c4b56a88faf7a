package producer

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver that decodes what
// arrives.
type otlpReceiver struct {
	mu       sync.Mutex
	paths    []string
	requests []*coltrace.ExportTraceServiceRequest
	status   int
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	r.requests = append(r.requests, &msg)
	status := r.status
	r.mu.Unlock()
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type gotSpan struct {
	service string
	span    *tracepb.Span
}

func (r *otlpReceiver) spans() []gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []gotSpan
	for _, req := range r.requests {
		for _, rs := range req.ResourceSpans {
			svc := attrString(rs.Resource.Attributes, "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					out = append(out, gotSpan{svc, sp})
				}
			}
		}
	}
	return out
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func attrMap(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestSpansReachACollector(t *testing.T) {
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx := context.Background()
	sp, err := NewSpans(ctx, SpanOptions{Endpoint: srv.URL, ServiceVersion: "test"})
	require.NoError(t, err)

	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sp.Span(ctx, "verdryx.eval", "run-1", "agent://acme.example/bot", start, start.Add(2*time.Second),
		map[string]any{"model": "stub", "cases": 7, "mean_score": 0.857, "unanswered": int64(0), "ci_high": nil, "changed_cases": []string{"a"}})
	sp.Span(ctx, "verdryx.drift", "run-1", "", start.Add(time.Hour), start.Add(time.Hour), map[string]any{"verdict": "regressed"})
	sp.Span(ctx, "verdryx.eval", "run-2", "", start, start, nil)
	require.NoError(t, sp.Shutdown(ctx), "shutdown flushes before the command exits")

	got := rcv.spans()
	require.Len(t, got, 3)
	assert.Equal(t, "/v1/traces", rcv.paths[0])
	want := TraceIDFor("run-1")
	eval, drift, other := got[0], got[1], got[2]
	assert.Equal(t, "verdryx", eval.service)
	assert.Equal(t, "verdryx.eval", eval.span.Name)
	assert.Equal(t, want[:], eval.span.TraceId, "trace id derived from the run id")
	assert.Equal(t, want[:], drift.span.TraceId, "the drift check groups with its run")
	assert.NotEqual(t, want[:], other.span.TraceId)
	assert.NotEqual(t, eval.span.SpanId, drift.span.SpanId)
	assert.Empty(t, eval.span.ParentSpanId, "a root span")
	assert.Equal(t, uint64(start.UnixNano()), eval.span.StartTimeUnixNano)
	assert.Equal(t, uint64(start.Add(2*time.Second).UnixNano()), eval.span.EndTimeUnixNano)

	attrs := attrMap(eval.span.Attributes)
	assert.Equal(t, "run-1", attrs["verdryx.run_id"].GetStringValue())
	assert.Equal(t, "agent://acme.example/bot", attrs["verdryx.agent_id"].GetStringValue())
	assert.Equal(t, "stub", attrs["verdryx.model"].GetStringValue())
	assert.Equal(t, int64(7), attrs["verdryx.cases"].GetIntValue())
	assert.Equal(t, 0.857, attrs["verdryx.mean_score"].GetDoubleValue())
	assert.NotContains(t, attrs, "verdryx.ci_high", "a null value is left out")
	assert.Equal(t, "a", attrs["verdryx.changed_cases"].GetArrayValue().Values[0].GetStringValue())
	assert.NotContains(t, attrMap(drift.span.Attributes), "verdryx.agent_id", "no agent, no attribute")
	assert.Equal(t, "regressed", attrMap(drift.span.Attributes)["verdryx.verdict"].GetStringValue())
}

// TestSpansHonourOTelResourceEnv: OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES shape the resource the collector sees.
func TestSpansHonourOTelResourceEnv(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "quality-plane")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging,team=evals")
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx := context.Background()
	sp, err := NewSpans(ctx, SpanOptions{Endpoint: srv.URL, ServiceVersion: "test"})
	require.NoError(t, err)
	sp.Span(ctx, "verdryx.eval", "run-1", "", time.Now(), time.Now(), nil)
	require.NoError(t, sp.Shutdown(ctx))
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	require.Len(t, rcv.requests, 1)
	res := attrMap(rcv.requests[0].ResourceSpans[0].Resource.Attributes)
	assert.Equal(t, "quality-plane", res["service.name"].GetStringValue())
	assert.Equal(t, "staging", res["deployment.environment.name"].GetStringValue())
	assert.Equal(t, "evals", res["team"].GetStringValue())
	assert.Equal(t, "test", res["service.version"].GetStringValue(), "verdryx's own attributes stay")
}

func TestSpansReportExportFailure(t *testing.T) {
	rcv := &otlpReceiver{status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx := context.Background()
	sp, err := NewSpans(ctx, SpanOptions{Endpoint: srv.URL + "/v1/traces", Timeout: 2 * time.Second})
	require.NoError(t, err)
	sp.Span(ctx, "verdryx.eval", "run-1", "", time.Now(), time.Now(), nil)
	err = sp.Shutdown(ctx)
	require.Error(t, err, "a refused export is reported, not swallowed")
	assert.Len(t, rcv.spans(), 1, "sent once: retries are off")
	assert.Equal(t, "/v1/traces", rcv.paths[0], "an endpoint already ending in /v1/traces is used as is")
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://c:4318":             "http://c:4318/v1/traces",
		"http://c:4318/":            "http://c:4318/v1/traces",
		"http://c:4318/v1/traces":   "http://c:4318/v1/traces",
		"http://c:4318/custom/path": "http://c:4318/custom/path",
		"https://c/otlp/v1/traces":  "https://c/otlp/v1/traces",
	} {
		assert.Equal(t, want, TracesURL(in), in)
	}
}

func TestTraceIDFor(t *testing.T) {
	a, b := TraceIDFor("run-1"), TraceIDFor("run-1")
	assert.Equal(t, a, b)
	assert.True(t, a.IsValid())
	assert.NotEqual(t, a, TraceIDFor("run-2"))
	assert.False(t, bytes.Equal(a[:], make([]byte, 16)))
}

func TestNewSpansNeedsEndpoint(t *testing.T) {
	_, err := NewSpans(context.Background(), SpanOptions{})
	assert.Error(t, err)
}

// TestRunSpansUnderAParent: run spans started from StartParent's context
// (and a finished Span) are children of the parent span, in its trace; a
// run started from a context without it, or from a parent's context that
// is itself wrapped in a run's, stays a root of its own trace or a child
// of the parent, never of the run.
func TestRunSpansUnderAParent(t *testing.T) {
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx := context.Background()
	sp, err := NewSpans(ctx, SpanOptions{Endpoint: srv.URL})
	require.NoError(t, err)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

	// A parent started inside another run's context is still a root.
	outer, endOuter := sp.StartRun(ctx, "verdryx.eval", "run-outer", "", start)
	pctx, endParent := sp.StartParent(outer, "verdryx.compare", "cmp-1", "", start)
	rctx, endA := sp.StartRun(pctx, "verdryx.eval", "run-a", "", start)
	_, endB := sp.StartRun(rctx, "verdryx.eval", "run-b", "", start) // from inside run a: still the parent's child
	endB(start, nil, nil)
	endA(start, nil, nil)
	sp.Span(pctx, "verdryx.eval", "run-c", "", start, start, nil)
	endParent(start, map[string]any{"best": "m"}, nil)
	endOuter(start, nil, nil)
	sp.Span(ctx, "verdryx.eval", "run-d", "", start, start, nil)
	require.NoError(t, sp.Shutdown(ctx))

	byRun := map[string]*tracepb.Span{}
	for _, g := range rcv.spans() {
		byRun[attrString(g.span.Attributes, "verdryx.run_id")] = g.span
	}
	require.Len(t, byRun, 6)
	parent := byRun["cmp-1"]
	want := TraceIDFor("cmp-1")
	assert.Equal(t, want[:], parent.TraceId, "the parent's trace id is derived from its id")
	assert.Empty(t, parent.ParentSpanId, "the parent is a root, even inside a run's context")
	for _, id := range []string{"run-a", "run-b", "run-c"} {
		assert.Equal(t, parent.SpanId, byRun[id].ParentSpanId, id)
		assert.Equal(t, parent.TraceId, byRun[id].TraceId, id)
	}
	for _, id := range []string{"run-outer", "run-d"} {
		tid := TraceIDFor(id)
		assert.Empty(t, byRun[id].ParentSpanId, id)
		assert.Equal(t, tid[:], byRun[id].TraceId, id)
	}
}
