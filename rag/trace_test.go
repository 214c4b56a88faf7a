package rag_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/verdryx/verdryx/rag"
)

func TestExtractiveRecordsACallSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, root := tp.Tracer("test").Start(context.Background(), "case")
	answer, err := rag.NewExtractive(0).Generate(ctx, rag.Request{Question: "what is absent here?"})
	root.End()
	require.NoError(t, err)
	assert.Equal(t, rag.Abstention, answer)
	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	assert.Equal(t, "chat offline-extractive", spans[0].Name)
	assert.Equal(t, root.SpanContext().SpanID(), spans[0].Parent.SpanID())
}
