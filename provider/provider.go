// Package provider holds what every model-provider call shares, whichever
// client makes it: the token usage it reports and its OpenTelemetry GenAI
// span.
//
// A call span is a child of the span in the caller's context and is made by
// that span's tracer provider, so the hierarchy (eval run, case, model call)
// follows context propagation and costs nothing when the context carries no
// recording span. Attribute names follow the OpenTelemetry GenAI semantic
// conventions as defined by go.opentelemetry.io/otel/semconv/v1.41.0, the
// newest version in the otel module that still defines the gen_ai names;
// gen_ai.system (renamed gen_ai.provider.name in semconv 1.37) is also set,
// from semconv/v1.36.0, because several GenAI backends still read only it.
//
// The package imports nothing of this module.
package provider

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv136 "go.opentelemetry.io/otel/semconv/v1.36.0"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Operation names (gen_ai.operation.name).
const (
	OpChat       = "chat"
	OpEmbeddings = "embeddings"
)

// Provider names (gen_ai.provider.name and gen_ai.system). Stub is this
// project's offline stand-ins (stub model, stub judge, offline generator
// and embedder): no provider is called.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
	Stub      = "verdryx.stub"
)

// Usage is what a provider reported about one call. Token counts are the
// provider's own; zero means it reported none (the offline stand-ins report
// none and are not estimated).
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// ResponseModel is the model that answered, as the provider named it;
	// "" means it did not say.
	ResponseModel string
}

// Call describes one model call for its span.
type Call struct {
	// Operation is OpChat or OpEmbeddings.
	Operation string
	// Provider is OpenAI, Anthropic, Stub or another gen_ai.provider.name.
	Provider string
	// Model is the requested model id (gen_ai.request.model).
	Model string
}

// Span is the span of one model call. The zero value and a nil *Span are
// valid and record nothing.
type Span struct {
	span trace.Span
}

// tracerName is the instrumentation scope of call spans.
const tracerName = "github.com/verdryx/verdryx/provider"

type attrsKey struct{}

// WithAttributes returns ctx whose call spans (started by Start under it)
// also carry attrs, after any set by an outer WithAttributes. The grading
// runner marks judge calls this way.
func WithAttributes(ctx context.Context, attrs ...attribute.KeyValue) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]attribute.KeyValue)
	return context.WithValue(ctx, attrsKey{}, append(append([]attribute.KeyValue(nil), prev...), attrs...))
}

// Start starts the span of c as a child of the span in ctx, named
// "{operation} {model}" with kind client, and returns the context carrying
// it. When ctx carries no recording span the span is a no-op. The caller
// must call End exactly once.
func Start(ctx context.Context, c Call) (context.Context, *Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, &Span{}
	}
	name := c.Operation
	if c.Model != "" {
		name += " " + c.Model
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(c.Operation),
		semconv.GenAIProviderNameKey.String(c.Provider),
		semconv136.GenAISystemKey.String(c.Provider),
		semconv.GenAIRequestModel(c.Model),
	}
	extra, _ := ctx.Value(attrsKey{}).([]attribute.KeyValue)
	ctx, sp := parent.TracerProvider().Tracer(tracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, extra...)...))
	return ctx, &Span{span: sp}
}

// End records u (the response model when known, and both token counts,
// zeros included) or err (status error, error.type) and ends the span.
func (s *Span) End(u Usage, err error) {
	if s == nil || s.span == nil {
		return
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIUsageInputTokens(int(u.InputTokens)),
		semconv.GenAIUsageOutputTokens(int(u.OutputTokens)),
	}
	if u.ResponseModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(u.ResponseModel))
	}
	s.span.SetAttributes(attrs...)
	if err != nil {
		s.span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// ErrorTyper is an error that names its own low-cardinality error.type
// ("http_429", "malformed_response").
type ErrorTyper interface {
	ErrorType() string
}

// errorType is a low-cardinality error.type: "timeout" or "canceled" for
// context errors, an ErrorTyper's own type, else "_OTHER".
func errorType(err error) string {
	var et ErrorTyper
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &et):
		return et.ErrorType()
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
