package llm

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/verdryx/verdryx/provider"
)

// AttrCallRole marks a model call span with the role of the call: "model"
// (the model under evaluation), "judge" or "typed".
const AttrCallRole = attribute.Key("verdryx.call.role")

// WithRole marks the model calls made under ctx as role's: when ctx carries
// a recording span, the returned context adds AttrCallRole to the GenAI call
// spans of the adapters (provider.WithAttributes); otherwise it returns ctx
// unchanged.
func WithRole(ctx context.Context, role string) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	return provider.WithAttributes(ctx, AttrCallRole.String(role))
}
