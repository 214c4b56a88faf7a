package worker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/outcome"
)

// SLO evaluation defaults (Options.SLOEvery, Options.SLOWindow).
const (
	DefaultSLOEvery  = 5 * time.Minute
	DefaultSLOWindow = 7 * 24 * time.Hour
)

// sloGauges are the cost and SLO figures of the fleet's merged state on
// /metrics.
type sloGauges struct {
	runs, calls, usd *prometheus.GaugeVec // by outcome tag
	budget, burn     *prometheus.GaugeVec // by subject and sli
}

func newSLOGauges(reg prometheus.Registerer) *sloGauges {
	g := &sloGauges{
		runs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "verdryx_cost_runs",
			Help: "Runs of the fleet's merged state over the SLO window, by outcome tag."}, []string{"outcome"}),
		calls: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "verdryx_cost_calls",
			Help: "Calls of the fleet's merged state over the SLO window, by outcome tag."}, []string{"outcome"}),
		usd: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "verdryx_cost_usd",
			Help: "Spend (USD) of the fleet's merged state over the SLO window, by outcome tag."}, []string{"outcome"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "verdryx_slo_budget_remaining",
			Help: "Error budget left per SLO indicator and subject (agent id or fleet); measured indicators only."}, []string{"subject", "sli"}),
		burn: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "verdryx_slo_burn_rate",
			Help: "Burn rate over the most recent 1/28 of the span per SLO indicator and subject."}, []string{"subject", "sli"}),
	}
	reg.MustRegister(g.runs, g.calls, g.usd, g.budget, g.burn)
	return g
}

// sloLoop evaluates the SLOs over the fleet's merged state every
// Options.SLOEvery (over the Options.SLOWindow before now, from the start
// of its first day), sets the gauges and appends an slo_burn event to the
// chain when an indicator starts alerting (outcome.SLOReport.BurnEvents:
// exhausted or fast burn with ci_high below target, canonical subject),
// once per indicator and subject until it stops alerting: not every tick.
// It blocks until ctx is done.
func (r *running) sloLoop(ctx context.Context) error {
	o := &r.w.opts
	g := newSLOGauges(r.metrics.Registry)
	alerting := map[string]bool{} // subject + "\x00" + sli
	tick := time.NewTicker(o.SLOEvery)
	defer tick.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-r.inputsDone:
	}
	for {
		if err := r.evalSLO(ctx, g, alerting); err != nil && ctx.Err() == nil {
			o.Logger.Warn("slo evaluation", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// evalSLO is one evaluation of sloLoop.
func (r *running) evalSLO(ctx context.Context, g *sloGauges, alerting map[string]bool) error {
	o := &r.w.opts
	now := time.Now().UTC()
	opts := outcome.Options{From: now.Add(-o.SLOWindow).Truncate(24 * time.Hour)}
	agg, err := fleet.ReadAggregateFor(ctx, r.js, o.Subjects, opts)
	if err != nil {
		return err
	}
	red, err := agg.Reducer(opts)
	if err != nil {
		return err
	}
	rep, err := red.CheckedReport()
	if err != nil {
		return err
	}
	g.runs.Reset()
	g.calls.Reset()
	g.usd.Reset()
	if len(rep.Groups) > 0 {
		for _, row := range rep.Groups[0].Outcomes {
			g.runs.WithLabelValues(row.Outcome).Set(float64(row.Runs))
			g.calls.WithLabelValues(row.Outcome).Set(float64(row.Calls))
			g.usd.WithLabelValues(row.Outcome).Set(row.TotalCostUSD)
		}
	}
	slo, err := red.SLO(outcome.DefaultSLOOptions(), envelope.ValidAgentID)
	if err != nil {
		return err
	}
	g.budget.Reset()
	g.burn.Reset()
	now2 := map[string]bool{}
	for _, s := range slo.Subjects {
		for _, ind := range s.Indicators {
			if ind.BudgetRemaining != nil {
				g.budget.WithLabelValues(s.Subject, ind.SLI).Set(*ind.BudgetRemaining)
			}
			if ind.BurnRate != nil {
				g.burn.WithLabelValues(s.Subject, ind.SLI).Set(*ind.BurnRate)
			}
			if ind.Alert {
				now2[s.Subject+"\x00"+ind.SLI] = true
			}
		}
	}
	for _, ev := range slo.BurnEvents(now) {
		sli, _ := ev.Data["sli"].(string)
		key := ev.AgentID + "\x00" + sli
		if alerting[key] {
			continue
		}
		// Every sink of the worker's events: the chain on NATS and the
		// --events file.
		if _, err := r.deps.Events.Append(ctx, ev); err != nil {
			return err
		}
		alerting[key] = true
		r.metrics.ChainLength.Set(float64(r.chain.Len()))
		o.Logger.Warn("slo_burn", "agent", ev.AgentID, "sli", sli, "trigger", ev.Data["trigger"])
	}
	for k := range alerting {
		if !now2[k] {
			delete(alerting, k) // recovered: a later burn is reported again
		}
	}
	return nil
}
