package grading

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// endRunFunc ends the live span of one eval run: it sets the run's data
// (EvalRunData keys, as verdryx.<key>), marks the span failed when err is
// not nil, and ends it at end. It is called once.
type endRunFunc = func(end time.Time, data map[string]any, err error)

// RunTracer starts the span of an eval run while it is graded
// (producer.Spans implements it). The returned context carries the span:
// the runner starts a child span per case under it and every model and
// judge adapter a GenAI call span under the case's. When evalrun.Deps.Spans
// is a RunTracer, evalrun.Execute and Plan.Grade build the whole hierarchy
// during grading and evalrun.Spans records only the drift check afterwards.
type RunTracer interface {
	// StartRun starts the root span of runID (its trace id derived from
	// runID) at start, named name, with verdryx.run_id and, when set,
	// verdryx.agent_id.
	StartRun(ctx context.Context, name, runID, agentID string, start time.Time) (context.Context, endRunFunc)
}

// Span and event names of the eval trace (the call role attribute is
// llm.AttrCallRole).
const (
	// SpanEval names the span of an eval run.
	SpanEval = "verdryx.eval"
	// SpanCase names the span of one case.
	SpanCase = "verdryx.case"
	// SpanDrift names the span of a drift check.
	SpanDrift = "verdryx.drift"
	// EventEvaluationResult is the GenAI semantic conventions' event for
	// an evaluation score (gen_ai.evaluation.result; semconv/v1.41.0
	// defines its attributes but no constant for its name).
	EventEvaluationResult = "gen_ai.evaluation.result"
)

// Score labels of the evaluation event (gen_ai.evaluation.score.label).
const (
	LabelPass       = "pass"       // value 1
	LabelFail       = "fail"       // value 0
	LabelPartial    = "partial"    // strictly between 0 and 1
	LabelUnmeasured = "unmeasured" // not graded: no score value
	// LabelUnanswered marks a typed case typryx answered unanswered: no
	// score value, counted apart, never a fail.
	LabelUnanswered = "unanswered"
)

// scoreLabel maps a graded value to its label.
func scoreLabel(s Score) string {
	switch {
	case s.Unanswered():
		return LabelUnanswered
	case !s.Graded():
		return LabelUnmeasured
	case s.Value >= 1:
		return LabelPass
	case s.Value <= 0:
		return LabelFail
	}
	return LabelPartial
}

// caseTracer is the tracer of case spans: the one that made the run span
// in ctx, so case spans share its provider and exporter.
func caseTracer(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/verdryx/verdryx/grading")
}

// startCase starts the span of case c under the run span in ctx; it is a
// no-op span when ctx carries none.
func startCase(ctx context.Context, c *Case, start time.Time) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return caseTracer(ctx).Start(ctx, SpanCase, trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("verdryx.case_id", c.ID), attribute.String("verdryx.grader", c.Kind())))
}

// endCase records s as the case's gen_ai.evaluation.result event (name:
// the grader; score value: the case's value, left out when unmeasured;
// label: pass, fail, partial, unmeasured or unanswered; explanation: the
// reason a case was not measured) plus its tokens and cost and, for a
// typed case, typryx's answer id (and reason when unanswered), and ends
// the span. An unmeasured case's span has status error; an unanswered
// one's does not.
func endCase(span trace.Span, s Score, end time.Time) {
	if !span.IsRecording() {
		return
	}
	ev := []attribute.KeyValue{
		semconv.GenAIEvaluationName(s.Grader),
		semconv.GenAIEvaluationScoreLabel(scoreLabel(s)),
	}
	if s.Graded() {
		ev = append(ev, semconv.GenAIEvaluationScoreValue(s.Value))
	} else {
		ev = append(ev, semconv.GenAIEvaluationExplanation(s.Unmeasured))
	}
	span.AddEvent(EventEvaluationResult, trace.WithTimestamp(end), trace.WithAttributes(ev...))
	span.SetAttributes(attribute.Int64("verdryx.tokens", s.Tokens), attribute.Float64("verdryx.cost_usd", s.CostUSD))
	if v := s.Typed; v != nil {
		span.SetAttributes(attribute.String("verdryx.typed.answer_id", v.AnswerID),
			attribute.String("verdryx.typed.template", v.Template), attribute.String("verdryx.typed.type", v.Type),
			attribute.Bool("verdryx.typed.unanswered", v.Unanswered))
		if v.Unanswered {
			span.SetAttributes(attribute.String("verdryx.typed.reason", v.Reason))
		}
	}
	if !s.Graded() && !s.Unanswered() {
		// An unanswered verdict is typryx's answer, not a failure.
		span.SetStatus(codes.Error, s.Unmeasured)
	}
	span.End(trace.WithTimestamp(end))
}

// failCase ends the span of a case that failed the whole run.
func failCase(span trace.Span, err error, end time.Time) {
	if !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, err.Error())
	span.End(trace.WithTimestamp(end))
}

// startRun starts the run span when the runner has a tracer.
func (r *Runner) startRun(ctx context.Context, run *Run) (context.Context, endRunFunc) {
	if r.Tracer == nil {
		return ctx, func(time.Time, map[string]any, error) {}
	}
	return r.Tracer.StartRun(ctx, SpanEval, run.ID, run.AgentID, run.StartedAt)
}

// endRun ends the run span with the run's data, or with err.
func endRun(end endRunFunc, run Run, at time.Time, err error) {
	if err != nil {
		end(at, nil, fmt.Errorf("eval %s: %w", run.EvalSetID, err))
		return
	}
	end(at, EvalRunData(Summarize(run)), nil)
}
