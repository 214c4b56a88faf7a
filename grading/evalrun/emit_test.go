package evalrun_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
)

// eventSink records appended events, failing each with err when set.
type eventSink struct {
	err error
	got []envelope.Event
}

func (s *eventSink) Append(_ context.Context, ev envelope.Event) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	s.got = append(s.got, ev)
	return true, nil
}

func TestEmitDrift(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	end := start.Add(time.Second)
	ci := -0.2
	reg := drift.Report{Verdict: drift.VerdictRegressed, BaselineID: "bl", BaselineRunID: "run-1", Window: 3, CIHigh: &ci, CILow: &ci}

	evs, spans := &eventSink{}, &spanSink{}
	assert.Empty(t, evalrun.EmitDrift(ctx, evs, spans, reg, agent, start, end))
	require.Len(t, evs.got, 1)
	assert.Equal(t, "quality_drift", evs.got[0].Type)
	assert.Equal(t, "run-1", evs.got[0].RunID)
	require.Len(t, spans.got, 1)
	assert.Equal(t, grading.SpanDrift, spans.got[0].name)
	assert.Equal(t, "run-1", spans.got[0].runID)
	assert.Equal(t, agent, spans.got[0].agentID)

	evs, spans = &eventSink{}, &spanSink{}
	on := drift.Report{Verdict: drift.VerdictOnTrack, BaselineRunID: "run-1"}
	assert.Empty(t, evalrun.EmitDrift(ctx, evs, spans, on, agent, start, end))
	assert.Empty(t, evs.got, "on track: no event")
	assert.Len(t, spans.got, 1, "but a span")

	problems := evalrun.EmitDrift(ctx, &eventSink{err: errors.New("disk full")}, nil, reg, agent, start, end)
	assert.Equal(t, []string{"event quality_drift: disk full"}, problems)
	assert.Empty(t, evalrun.EmitDrift(ctx, nil, nil, reg, agent, start, end), "no sinks: nothing to do")
}
