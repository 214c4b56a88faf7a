// Package otlptest is an in-process OTLP/HTTP trace receiver for tests:
// what verdryx exports with --otlp, decoded span by span.
package otlptest

import (
	"io"
	"net/http"
	"slices"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is an http.Handler that accepts OTLP/HTTP protobuf trace
// exports and keeps every span. It is safe for concurrent use; the zero
// value is ready.
type Collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

// ServeHTTP decodes one export request; a body that is not one is
// answered 400.
func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns the spans received so far, in arrival order.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}
