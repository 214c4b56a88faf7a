package outcome

import (
	"time"

	"github.com/verdryx/verdryx/calls"

	"github.com/verdryx/verdryx/envelope"
)

// BurnEvents returns one slo_burn envelope per alerting indicator (trigger
// exhausted or fast_burn, ci_high below target, canonical agent:// subject),
// stamped ts. The data keys are exactly those docs/traces.md "SLOs and
// error budgets" lists; burn_rate is null when the burn window held no
// event.
func (rep *SLOReport) BurnEvents(ts time.Time) []envelope.Event {
	var out []envelope.Event
	for _, s := range rep.Subjects {
		if s.Subject == FleetSubject || !envelope.ValidAgentID(s.Subject) {
			continue
		}
		for _, ind := range s.Indicators {
			if !ind.Alert {
				continue
			}
			var burn any
			if ind.BurnRate != nil {
				burn = *ind.BurnRate
			}
			data := map[string]any{
				"sli":              ind.SLI,
				"target":           ind.Target,
				"observed":         *ind.Observed,
				"ci_low":           *ind.CILow,
				"ci_high":          *ind.CIHigh,
				"events":           ind.Events,
				"window":           rep.Window,
				"budget_remaining": *ind.BudgetRemaining,
				"burn_rate":        burn,
				"trigger":          ind.Trigger,
				"identity_field":   calls.ColAgentID,
			}
			out = append(out, envelope.New("slo_burn", s.Subject, "", data, ts))
		}
	}
	return out
}
