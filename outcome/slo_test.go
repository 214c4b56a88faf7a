package outcome

import (
	"slices"
	"testing"
	"time"

	"github.com/verdryx/verdryx/calls"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
)

// sloRuns adds n single-call runs for agent, spread evenly over 28 days
// starting at offset hours, good ones tagged case_resolved.
func sloRuns(r *Reducer, agent string, n, good int, offset int, mutate func(i int, c *calls.Call)) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		c := call(agent+"-run-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 0, "allow", 100, "abandoned")
		if i < good {
			c.Outcome = "case_resolved"
		}
		c.AgentID = agent
		c.TSMillis = t0.Add(time.Duration(offset+i*28*24/max(n-1, 1)) * time.Hour).UnixMilli()
		if mutate != nil {
			mutate(i, &c)
		}
		r.Add(c)
	}
}

func indicatorOf(t *testing.T, rep *SLOReport, subject, sli string) Indicator {
	t.Helper()
	for _, s := range rep.Subjects {
		if s.Subject != subject {
			continue
		}
		for _, ind := range s.Indicators {
			if ind.SLI == sli {
				return ind
			}
		}
	}
	t.Fatalf("no %s/%s in report", subject, sli)
	return Indicator{}
}

func TestSLONotMeasuredBelowMinEvents(t *testing.T) {
	r := newReducer(t, Options{})
	sloRuns(r, "agent://acme.example/a", 19, 0, 0, nil)
	rep, err := r.SLO(DefaultSLOOptions(), envelope.ValidAgentID)
	require.NoError(t, err)
	ind := indicatorOf(t, rep, "agent://acme.example/a", SLITaskSuccess)
	require.False(t, ind.Measured)
	require.Nil(t, ind.Observed, "unmeasured must not read as 0")
	require.Nil(t, ind.BudgetRemaining)
	require.Equal(t, int64(19), ind.Events)
	require.Contains(t, ind.Reason, "fewer than the minimum 20")
	require.Empty(t, rep.BurnEvents(time.Now()))

	r.Add(calls.Call{RunID: "extra", HasRunID: true, AgentID: "agent://acme.example/a", Outcome: "abandoned", TSMillis: 1})
	rep, err = r.SLO(DefaultSLOOptions(), envelope.ValidAgentID)
	require.NoError(t, err)
	require.True(t, indicatorOf(t, rep, "agent://acme.example/a", SLITaskSuccess).Measured)
}

func TestSLOTriggersAndAlerts(t *testing.T) {
	r := newReducer(t, Options{})
	// healthy: all good. exhausted: 30/40 good. legacy: same but a
	// non-canonical id, so never alerts. burning: 99 good of 100 overall,
	// but the failures are the most recent runs.
	sloRuns(r, "agent://acme.example/healthy", 40, 40, 0, nil)
	sloRuns(r, "agent://acme.example/exhausted", 40, 30, 0, nil)
	sloRuns(r, "legacy-bot", 40, 30, 0, nil)
	sloRuns(r, "agent://acme.example/burning", 200, 197, 0, func(i int, c *calls.Call) {
		if i >= 197 {
			c.TSMillis = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixMilli() - int64(i)
		}
	})
	sloRuns(r, "", 30, 0, 0, nil)
	rep, err := r.SLO(DefaultSLOOptions(), envelope.ValidAgentID)
	require.NoError(t, err)

	h := indicatorOf(t, rep, "agent://acme.example/healthy", SLITaskSuccess)
	require.Equal(t, TriggerNone, h.Trigger)
	require.InDelta(t, 1.0, *h.BudgetRemaining, 1e-12)

	e := indicatorOf(t, rep, "agent://acme.example/exhausted", SLITaskSuccess)
	require.Equal(t, TriggerExhausted, e.Trigger)
	require.InDelta(t, 1-(0.25/0.05), *e.BudgetRemaining, 1e-9)
	require.Less(t, *e.CIHigh, 0.95)
	require.True(t, e.Alert)

	l := indicatorOf(t, rep, "legacy-bot", SLITaskSuccess)
	require.Equal(t, TriggerExhausted, l.Trigger)
	require.False(t, l.Alert, "a non-canonical subject never alerts")

	b := indicatorOf(t, rep, "agent://acme.example/burning", SLITaskSuccess)
	require.Greater(t, *b.BudgetRemaining, 0.0)
	require.NotNil(t, b.BurnRate)
	require.GreaterOrEqual(t, *b.BurnRate, 6.0)
	require.Equal(t, TriggerFastBurn, b.Trigger)
	require.False(t, b.Alert, "ci_high above target: reported, not paged")

	// Unattributed runs count in the fleet only.
	require.Equal(t, int64(30), rep.UnattributedRuns)
	require.Equal(t, FleetSubject, rep.Subjects[0].Subject)
	require.Equal(t, int64(40+40+40+200+30), rep.Subjects[0].Runs)
	for _, s := range rep.Subjects[1:] {
		require.NotEmpty(t, s.Subject)
	}

	evs := rep.BurnEvents(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	require.Len(t, evs, 1)
	ev := evs[0]
	require.Equal(t, "slo_burn", ev.Type)
	require.Equal(t, "agent://acme.example/exhausted", ev.AgentID)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range ev.Data {
			if !yield(k) {
				return
			}
		}
	})
	require.Equal(t, []string{"budget_remaining", "burn_rate", "ci_high", "ci_low", "events", "identity_field",
		"observed", "sli", "target", "trigger", "window"}, keys)
	require.Equal(t, "agent_id", ev.Data["identity_field"])
	require.Equal(t, TriggerExhausted, ev.Data["trigger"])
	require.NoError(t, ev.Validate())
}

func TestSLOContainmentAndCostDiscipline(t *testing.T) {
	r := newReducer(t, Options{})
	// 40 runs of cost 100; run 0 has a blocked call (refused, not costed),
	// run 1 a wardryx_hold (refused and costed: 200), run 2 costs 301
	// (> 3 x median 100), run 3 costs 300 (= 3 x median: disciplined).
	sloRuns(r, "agent://acme.example/a", 40, 40, 0, func(i int, c *calls.Call) {
		switch i {
		case 2:
			c.CostMicroUSD = 301
		case 3:
			c.CostMicroUSD = 300
		}
	})
	r.Add(calls.Call{RunID: "agent://acme.example/a-run-aa", HasRunID: true, Step: 1, HasStep: true, Decision: "killed", CostMicroUSD: 5000})
	r.Add(calls.Call{RunID: "agent://acme.example/a-run-ba", HasRunID: true, Step: 1, HasStep: true, Decision: "wardryx_hold", CostMicroUSD: 100})
	rep, err := r.SLO(DefaultSLOOptions(), envelope.ValidAgentID)
	require.NoError(t, err)
	require.InDelta(t, 100e-6, *rep.MedianRunCostUSD, 1e-12)
	c := indicatorOf(t, rep, "agent://acme.example/a", SLIContainment)
	require.Equal(t, int64(40), c.Events)
	require.Equal(t, int64(38), c.Good)
	d := indicatorOf(t, rep, "agent://acme.example/a", SLICostDiscipline)
	require.Equal(t, int64(39), d.Good, "only the 301 run breaks 3 x median; the blocked 5000 is not cost")
}

type fakeScores map[string][]float64

func TestSLOQualityFloor(t *testing.T) {
	r := newReducer(t, Options{})
	sloRuns(r, "agent://acme.example/a", 20, 20, 0, nil)
	opts := DefaultSLOOptions()
	scores := fakeScores{"agent://acme.example/a": make([]float64, 25), "agent://acme.example/evalonly": {0.9, 0.79}}
	for i := range scores["agent://acme.example/a"] {
		scores["agent://acme.example/a"][i] = 0.8 // the floor itself is good
	}
	scores["agent://acme.example/a"][24] = 0.5
	opts.Scores = scores
	rep, err := r.SLO(opts, envelope.ValidAgentID)
	require.NoError(t, err)
	q := indicatorOf(t, rep, "agent://acme.example/a", SLIQualityFloor)
	require.True(t, q.Measured)
	require.Equal(t, int64(25), q.Events)
	require.Equal(t, int64(24), q.Good)
	require.Equal(t, int64(1), q.BurnEvents)
	require.InDelta(t, 20.0, *q.BurnRate, 1e-9)
	e := indicatorOf(t, rep, "agent://acme.example/evalonly", SLIQualityFloor)
	require.False(t, e.Measured)
	require.Equal(t, int64(2), e.Events)
	f := indicatorOf(t, rep, FleetSubject, SLIQualityFloor)
	require.Equal(t, int64(27), f.Events)

	rep, err = r.SLO(DefaultSLOOptions(), nil)
	require.NoError(t, err)
	require.Contains(t, indicatorOf(t, rep, FleetSubject, SLIQualityFloor).Reason, "no eval store")
}

func TestSLOOptionsValidate(t *testing.T) {
	for _, mut := range []func(*SLOOptions){
		func(o *SLOOptions) { o.Target = 1 },
		func(o *SLOOptions) { o.Target = 0 },
		func(o *SLOOptions) { o.Confidence = 1.5 },
		func(o *SLOOptions) { o.MinEvents = 0 },
		func(o *SLOOptions) { o.CostMultiple = 0 },
	} {
		o := DefaultSLOOptions()
		mut(&o)
		require.Error(t, o.Validate())
	}
}
