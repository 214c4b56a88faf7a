package evalreq

import (
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdryx/verdryx/testkit/otlptest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// TestEvalRequestComparisonSpans: a comparison request on the worker
// exports one verdryx.compare span with each model's run span as its
// child, in its trace.
func TestEvalRequestComparisonSpans(t *testing.T) {
	e := newEnv(t)
	col := &otlptest.Collector{}
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

	got := col.Spans()
	byName := map[string][]*tracepb.Span{}
	for _, s := range got {
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
