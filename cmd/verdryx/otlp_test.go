package main

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/verdryx/verdryx/testkit/otlptest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func TestEvalExportsTheGenAITrace(t *testing.T) {
	cleanEvalEnv(t)
	col := &otlptest.Collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	dir := t.TempDir()
	set := numberedSet(t, dir, "set.json", 2, nil)
	_, stderr, code := runCLI(t, "eval", "--db", filepath.Join(dir, "v.db"), "--otlp", srv.URL, set)
	require.Equal(t, exitOK, code, stderr)

	spans := col.Spans()
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["verdryx.eval"], 1, "one run span, exported before eval returns")
	require.Len(t, byName["verdryx.case"], 2)
	require.Len(t, byName["chat stub"], 2)
	run := byName["verdryx.eval"][0]
	for _, c := range byName["verdryx.case"] {
		assert.Equal(t, run.SpanId, c.ParentSpanId)
		require.Len(t, c.Events, 1)
		assert.Equal(t, "gen_ai.evaluation.result", c.Events[0].Name)
	}
	assert.Len(t, spans, 5, "no second, after-the-fact eval span")
}

// TestCompareSpansGroupUnderTheComparison: compare --otlp exports one
// verdryx.compare span and each model's run span as its child, in the
// comparison's trace, with the runs' case spans below them.
func TestCompareSpansGroupUnderTheComparison(t *testing.T) {
	cleanEvalEnv(t)
	col := &otlptest.Collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	chat := &modelsChat{calls: map[string]int{}, accuracy: map[string]float64{"m-one": 0.9, "m-two": 0.5}}
	fake := httptest.NewServer(chat)
	defer fake.Close()
	dir := t.TempDir()
	set := numberedSet(t, dir, "set.json", 3, nil)
	_, stderr, code := runCLI(t, "compare", "--db", filepath.Join(dir, "v.db"), "--otlp", srv.URL, "--openai-base-url", fake.URL,
		"--model", "openai:m-one", "--model", "openai:m-two", set)
	require.Equal(t, exitOK, code, stderr)

	spans := col.Spans()
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["verdryx.compare"], 1)
	cmp := byName["verdryx.compare"][0]
	assert.Empty(t, cmp.ParentSpanId, "the comparison is the root")
	require.Len(t, byName["verdryx.eval"], 2, "one run span per model")
	runs := map[string]bool{}
	for _, r := range byName["verdryx.eval"] {
		assert.Equal(t, cmp.SpanId, r.ParentSpanId, "a model run is a child of the comparison")
		assert.Equal(t, cmp.TraceId, r.TraceId, "in the comparison's trace")
		runs[string(r.SpanId)] = true
	}
	require.Len(t, byName["verdryx.case"], 6)
	for _, c := range byName["verdryx.case"] {
		assert.True(t, runs[string(c.ParentSpanId)], "a case is a child of its run")
		assert.Equal(t, cmp.TraceId, c.TraceId)
	}
}
