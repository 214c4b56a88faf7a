package evalreq

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// spanCollector is an in-process OTLP/HTTP receiver keeping every span.
type spanCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *spanCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

// TestEvalRequestComparisonSpans: a comparison request on the worker
// exports one verdryx.compare span with each model's run span as its
// child, in its trace.
func TestEvalRequestComparisonSpans(t *testing.T) {
	e := newEnv(t)
	col := &spanCollector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	spans, err := producer.NewSpans(jstest.Ctx(t, 5*time.Second), producer.SpanOptions{Endpoint: srv.URL})
	require.NoError(t, err)
	chat := &fakeChat{calls: map[string]int{}}
	st := jstest.OpenStore(t, filepath.Join(e.Dir, "spans.db"))
	h := NewHandler(st, evalrun.Deps{Store: st, Spans: spans, Version: "test"}, e.NC, Options{Roots: testdataRoot(t), Logger: jstest.Logger(t),
		Models: fakeModels(t, chat), Allowed: []string{"openai:good", "openai:bad"}})
	jstest.RunPuller(t, e.Eval, h, pull.Options{Name: "eval", Batch: 1, Logger: jstest.Logger(t)})
	rep := e.request(Request{RequestID: "s-1", EvalSet: numbered(3), Models: []string{"openai:good", "openai:bad"}})
	require.True(t, rep.OK, rep.Error)
	require.NoError(t, spans.Shutdown(jstest.Ctx(t, 5*time.Second)))

	col.mu.Lock()
	defer col.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	for _, s := range col.spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["verdryx.compare"], 1)
	cmp := byName["verdryx.compare"][0]
	assert.Empty(t, cmp.ParentSpanId)
	require.Len(t, byName["verdryx.eval"], 2)
	for _, r := range byName["verdryx.eval"] {
		assert.Equal(t, cmp.SpanId, r.ParentSpanId, "a model run is a child of the comparison")
		assert.Equal(t, cmp.TraceId, r.TraceId)
	}
}
