package evalrun

import (
	"context"
	"fmt"
	"time"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
)

// EmitDrift appends the events of a drift check (DriftEvents, stamped end)
// to events and records its span (grading.SpanDrift, from start to end, under the
// baseline's run) on spans; either sink may be nil. It returns one problem
// per event not appended, naming the event type, and goes on past a
// failure. It does not block on the network.
func EmitDrift(ctx context.Context, events EventSink, spans SpanSink, rep drift.Report, agentID string, start, end time.Time) []string {
	var problems []string
	if events != nil {
		for _, ev := range drift.Events(rep, agentID, end) {
			if _, err := events.Append(ctx, ev); err != nil {
				problems = append(problems, fmt.Sprintf("event %s: %v", ev.Type, err))
			}
		}
	}
	if spans != nil {
		spans.Span(ctx, grading.SpanDrift, rep.BaselineRunID, agentID, start, end, drift.Data(rep))
	}
	return problems
}

// Events returns the envelopes a graded result emits, in order: one
// quality_score per graded case, the eval_run, and a quality_drift when
// the drift verdict is regressed. They are a pure function of the result
// (timestamps are the run's finish time), so a result emitted again after a
// crash yields the same events, which sinks drop as already stored.
func Events(res Result) []envelope.Event {
	run := res.Run.Run
	var evs []envelope.Event
	for _, sc := range run.Scores {
		if sc.Graded() {
			evs = append(evs, envelope.New("quality_score", run.AgentID, run.ID, QualityScoreData(sc), run.FinishedAt))
		}
	}
	evs = append(evs, envelope.New("eval_run", run.AgentID, run.ID, grading.EvalRunData(res.Run), run.FinishedAt))
	if res.Drift != nil {
		evs = append(evs, drift.Events(*res.Drift, run.AgentID, run.FinishedAt)...)
	}
	return evs
}

// Spans records the result's spans after grading: the eval run (unless
// it was recorded live, see grading.RunTracer), and the drift check when there was
// one. It does not block on the network.
func Spans(ctx context.Context, sink SpanSink, res Result, driftStart, driftEnd time.Time) {
	if sink == nil {
		return
	}
	run := res.Run
	if !res.traced {
		sink.Span(ctx, grading.SpanEval, run.ID, run.AgentID, run.StartedAt, run.FinishedAt, grading.EvalRunData(run))
	}
	if res.Drift != nil {
		sink.Span(ctx, grading.SpanDrift, res.Drift.BaselineRunID, run.AgentID, driftStart, driftEnd, drift.Data(*res.Drift))
	}
}

// QualityScoreData is the data of a quality_score envelope.
func QualityScoreData(s grading.Score) map[string]any {
	return map[string]any{"case_id": s.CaseID, "value": s.Value, "tokens": s.Tokens, "cost_usd": s.CostUSD}
}
