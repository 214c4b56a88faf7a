package evalrun

import (
	"context"
	"fmt"
	"time"

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
