package outcome

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// QualityScores supplies eval scores per agent id for the quality_floor SLI.
// (*store.Store).AgentScores satisfies it. Scores are in chronological order.
type QualityScores interface {
	AgentScores(ctx context.Context) (map[string][]float64, error)
}

// SLI names.
const (
	SLITaskSuccess    = "task_success"
	SLIQualityFloor   = "quality_floor"
	SLIContainment    = "containment"
	SLICostDiscipline = "cost_discipline"
)

// Triggers.
const (
	TriggerNone      = "none"
	TriggerExhausted = "exhausted"
	TriggerFastBurn  = "fast_burn"
	TriggerSlowBurn  = "slow_burn"
)

// FleetSubject names the all-runs subject of an SLO report.
const FleetSubject = "fleet"

// SLOOptions configures the SLO computation.
type SLOOptions struct {
	// Target is the objective for every SLI, in (0, 1). Default 0.95.
	Target float64
	// Confidence is the Wilson interval's coverage, in (0, 1). Default 0.95.
	Confidence float64
	// MinEvents is the fewest eligible events an SLI is measured on; below
	// it the SLI is "not measured", never 0. Default 20.
	MinEvents int64
	// GoodOutcomes are the outcome tags task_success counts as good.
	// Default case_resolved.
	GoodOutcomes []string
	// QualityFloor is the eval score a quality_floor event must reach.
	// Default 0.8.
	QualityFloor float64
	// CostMultiple bounds a disciplined run's cost as a multiple of the
	// fleet median of positive run costs. Default 3.0.
	CostMultiple float64
	// Scores are the eval scores per agent id; nil leaves quality_floor not
	// measured.
	Scores map[string][]float64
}

// DefaultSLOOptions returns the defaults docs/traces.md "SLOs and error
// budgets" gives.
func DefaultSLOOptions() SLOOptions {
	return SLOOptions{Target: 0.95, Confidence: 0.95, MinEvents: 20,
		GoodOutcomes: []string{Resolved}, QualityFloor: 0.8, CostMultiple: 3.0}
}

// Validate reports a bad option.
func (o SLOOptions) Validate() error {
	switch {
	case !(o.Target > 0 && o.Target < 1):
		return fmt.Errorf("slo target %v: want a value in (0, 1)", o.Target)
	case !(o.Confidence > 0 && o.Confidence < 1):
		return fmt.Errorf("slo confidence %v: want a value in (0, 1)", o.Confidence)
	case o.MinEvents < 1:
		return fmt.Errorf("slo min events %d: want >= 1", o.MinEvents)
	case !(o.CostMultiple > 0):
		return fmt.Errorf("slo cost multiple %v: want > 0", o.CostMultiple)
	}
	return nil
}

// Indicator is one SLI of one subject. Pointer fields are nil when not
// measured.
type Indicator struct {
	SLI    string  `json:"sli"`
	Target float64 `json:"target"`
	// Measured is false below MinEvents or when the data is missing; Reason
	// says which.
	Measured bool   `json:"measured"`
	Reason   string `json:"reason,omitempty"`
	// Events is the number of eligible events (runs, or eval scores for
	// quality_floor); Good of them met the indicator.
	Events int64 `json:"events"`
	Good   int64 `json:"good"`
	// Observed is Good/Events with its Wilson interval.
	Observed *float64 `json:"observed"`
	CILow    *float64 `json:"ci_low"`
	CIHigh   *float64 `json:"ci_high"`
	// BudgetRemaining = 1 - (1-observed)/(1-target), not clamped.
	BudgetRemaining *float64 `json:"budget_remaining"`
	// BurnRate = (1-observed)/(1-target) over the most recent 1/28 of the
	// span (BurnEvents events); nil when that window holds none.
	BurnRate   *float64 `json:"burn_rate"`
	BurnEvents int64    `json:"burn_events"`
	// Trigger is exhausted, fast_burn, slow_burn or none.
	Trigger string `json:"trigger"`
	// Alert is true when an slo_burn event is due: trigger exhausted or
	// fast_burn, ci_high below target and a canonical agent:// subject.
	Alert bool `json:"alert"`
}

// SubjectSLO is the indicators of one subject: an agent id, or the fleet.
type SubjectSLO struct {
	Subject    string      `json:"subject"`
	Runs       int64       `json:"runs"`
	Indicators []Indicator `json:"indicators"`
}

// SLOReport is the SLO report over a reduction.
type SLOReport struct {
	// Window is the span of the runs' last call times, RFC 3339 interval.
	Window string `json:"window"`
	// BurnWindow is its most recent 1/28.
	BurnWindow string `json:"burn_window"`
	// MedianRunCostUSD is the fleet median of positive run costs.
	MedianRunCostUSD *float64 `json:"median_run_cost_usd"`
	// UnattributedRuns carry no agent id: counted in the fleet, in no
	// agent's numbers.
	UnattributedRuns int64        `json:"unattributed_runs"`
	Subjects         []SubjectSLO `json:"subjects"`
	// Subjects[0] is the fleet; the rest are agents sorted by id.
}

type sloRun struct {
	ts      int64
	agent   int32
	outcome int32
	refused bool
	cost    int64
}

type tally struct{ events, good, burnEvents, burnGood int64 }

func (t *tally) add(good, recent bool) {
	t.events++
	if good {
		t.good++
	}
	if recent {
		t.burnEvents++
		if good {
			t.burnGood++
		}
	}
}

// SLO computes the four SLIs per agent id and for the fleet over every run
// reduced so far (independent calls count as runs of one call; flat records
// count as runs of the fleet with no time, at the window's start). validAgent says which subjects may alert
// (the canonical agent:// form); nil allows none.
func (r *Reducer) SLO(opts SLOOptions, validAgent func(string) bool) (*SLOReport, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if r.opts.CostOnly {
		return nil, fmt.Errorf("slo: %w", errCostOnly)
	}
	runs := make([]sloRun, 0, len(r.runs))
	collect := func(rs *runState) {
		if rs.Calls > 0 {
			runs = append(runs, sloRun{ts: rs.LastTS, agent: rs.Agent.Value, outcome: rs.Outcome.Value, refused: rs.Refused > 0, cost: rs.Cost})
		}
	}
	for i := range r.runs {
		collect(&r.runs[i])
	}
	for i := range r.anon {
		collect(&r.anon[i])
	}

	rep := &SLOReport{}
	var first, last int64
	for i, run := range runs {
		if i == 0 || run.ts < first {
			first = run.ts
		}
		if i == 0 || run.ts > last {
			last = run.ts
		}
	}
	cut := last - (last-first)/28
	if len(runs) > 0 {
		rep.Window = interval(first, last)
		rep.BurnWindow = interval(cut, last)
	}
	// Flat {outcome, cost_usd} records (an outcomes export) are runs of
	// the fleet with no time: counted at the window's start, so they are
	// in every ratio and in the burn window only when nothing has a time
	// (then there is no window to print).
	for i := range r.flat {
		rs := &r.flat[i]
		runs = append(runs, sloRun{ts: first, outcome: rs.Outcome.Value, refused: rs.Refused > 0, cost: rs.Cost})
	}
	var positive []int64
	for _, run := range runs {
		if run.cost > 0 {
			positive = append(positive, run.cost)
		}
	}
	var limit float64
	hasMedian := len(positive) > 0
	if hasMedian {
		slices.Sort(positive)
		m := len(positive) / 2
		med := float64(positive[m])
		if len(positive)%2 == 0 {
			med = (float64(positive[m-1]) + float64(positive[m])) / 2
		}
		limit = opts.CostMultiple * med
		usd := med / 1e6
		rep.MedianRunCostUSD = &usd
	}
	good := make(map[int32]bool)
	for _, tag := range opts.GoodOutcomes {
		if id, ok := r.syms.Lookup(tag); ok {
			good[id] = true
		}
	}

	const nSLI = 3 // trace SLIs: task_success, containment, cost_discipline
	tallies := map[int32]*[nSLI]tally{}
	fleet := &[nSLI]tally{}
	runsBy := map[int32]int64{}
	for _, run := range runs {
		recent := run.ts >= cut
		sub := fleet
		var per *[nSLI]tally
		if run.agent != 0 {
			per = tallies[run.agent]
			if per == nil {
				per = &[nSLI]tally{}
				tallies[run.agent] = per
			}
			runsBy[run.agent]++
		} else {
			rep.UnattributedRuns++
		}
		for _, t := range []*[nSLI]tally{sub, per} {
			if t == nil {
				continue
			}
			if run.outcome != 0 {
				t[0].add(good[run.outcome], recent)
			}
			t[1].add(!run.refused, recent)
			if hasMedian {
				t[2].add(float64(run.cost) <= limit, recent)
			}
		}
	}

	z := math.Sqrt2 * math.Erfinv(opts.Confidence)
	// quality_floor events are eval scores; their burn window is the most
	// recent 1/28 of each agent's scores (the store keeps them in order but
	// without the traces' clock).
	scoreTally := func(scores []float64) tally {
		var t tally
		n := len(scores)
		recentFrom := n - (n+27)/28
		for i, s := range scores {
			t.add(s >= opts.QualityFloor, i >= recentFrom)
		}
		return t
	}
	build := func(subject string, t *[nSLI]tally, runs int64, quality tally) SubjectSLO {
		s := SubjectSLO{Subject: subject, Runs: runs}
		canAlert := subject != FleetSubject && validAgent != nil && validAgent(subject)
		s.Indicators = append(s.Indicators, indicator(SLITaskSuccess, t[0], opts, z, canAlert, "no tagged runs"))
		if opts.Scores == nil {
			s.Indicators = append(s.Indicators, Indicator{SLI: SLIQualityFloor, Target: opts.Target, Trigger: TriggerNone,
				Reason: "no eval store given"})
		} else {
			s.Indicators = append(s.Indicators, indicator(SLIQualityFloor, quality, opts, z, canAlert, "no eval scores"))
		}
		s.Indicators = append(s.Indicators, indicator(SLIContainment, t[1], opts, z, canAlert, "no runs"))
		costReason := "no runs"
		if !hasMedian {
			costReason = "no run with a positive cost"
		}
		s.Indicators = append(s.Indicators, indicator(SLICostDiscipline, t[2], opts, z, canAlert, costReason))
		return s
	}
	subjects := map[string]bool{}
	for id := range tallies {
		subjects[r.syms.Name(id)] = true
	}
	var fleetQuality tally
	quality := map[string]tally{}
	for agent, v := range opts.Scores {
		q := scoreTally(v)
		fleetQuality.events += q.events
		fleetQuality.good += q.good
		fleetQuality.burnEvents += q.burnEvents
		fleetQuality.burnGood += q.burnGood
		if agent != "" {
			subjects[agent] = true
			quality[agent] = q
		}
	}
	rep.Subjects = append(rep.Subjects, build(FleetSubject, fleet, int64(len(runs)), fleetQuality))
	for _, agent := range slices.Sorted(maps.Keys(subjects)) {
		id, _ := r.syms.Lookup(agent)
		t := tallies[id]
		if t == nil || id == 0 {
			t = &[nSLI]tally{}
		}
		rep.Subjects = append(rep.Subjects, build(agent, t, runsBy[id], quality[agent]))
	}
	return rep, nil
}

func interval(from, to int64) string {
	f := time.UnixMilli(from).UTC().Format("2006-01-02T15:04:05.000Z")
	t := time.UnixMilli(to).UTC().Format("2006-01-02T15:04:05.000Z")
	return f + "/" + t
}

func ptr(v float64) *float64 { return &v }

// wilson returns the Wilson score interval of good/n at normal quantile z.
func wilson(good, n int64, z float64) (lo, hi float64) {
	p := float64(good) / float64(n)
	nf := float64(n)
	z2 := z * z
	den := 1 + z2/nf
	center := (p + z2/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / den
	return math.Max(0, center-half), math.Min(1, center+half)
}

func indicator(sli string, t tally, opts SLOOptions, z float64, canAlert bool, emptyReason string) Indicator {
	ind := Indicator{SLI: sli, Target: opts.Target, Events: t.events, Good: t.good, BurnEvents: t.burnEvents, Trigger: TriggerNone}
	if t.events == 0 {
		ind.Reason = emptyReason
		return ind
	}
	if t.events < opts.MinEvents {
		ind.Reason = fmt.Sprintf("%d events, fewer than the minimum %d", t.events, opts.MinEvents)
		return ind
	}
	ind.Measured = true
	obs := float64(t.good) / float64(t.events)
	lo, hi := wilson(t.good, t.events, z)
	ind.Observed, ind.CILow, ind.CIHigh = ptr(obs), ptr(lo), ptr(hi)
	budget := 1 - (1-obs)/(1-opts.Target)
	ind.BudgetRemaining = ptr(budget)
	if t.burnEvents > 0 {
		recent := float64(t.burnGood) / float64(t.burnEvents)
		ind.BurnRate = ptr((1 - recent) / (1 - opts.Target))
	}
	switch {
	case budget <= 0:
		ind.Trigger = TriggerExhausted
	case ind.BurnRate != nil && *ind.BurnRate >= 6:
		ind.Trigger = TriggerFastBurn
	case ind.BurnRate != nil && *ind.BurnRate >= 2:
		ind.Trigger = TriggerSlowBurn
	}
	ind.Alert = canAlert && (ind.Trigger == TriggerExhausted || ind.Trigger == TriggerFastBurn) && hi < opts.Target
	return ind
}

// WriteTable writes rep as a human-readable table, unmeasured indicators
// shown with their reason.
func (rep *SLOReport) WriteTable(w io.Writer) error {
	if rep.Window != "" {
		fmt.Fprintf(w, "window %s (burn window %s)\n", rep.Window, rep.BurnWindow)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "subject\tsli\tevents\tobserved\tci\tbudget left\tburn rate\ttrigger")
	num := func(p *float64, format string) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf(format, *p)
	}
	unmeasured := 0
	for _, s := range rep.Subjects {
		for _, ind := range s.Indicators {
			if !ind.Measured {
				unmeasured++
				fmt.Fprintf(tw, "%s\t%s\t%d\t-\t-\t-\t-\tnot measured: %s\n", s.Subject, ind.SLI, ind.Events, ind.Reason)
				continue
			}
			trig := ind.Trigger
			if ind.Alert {
				trig += " (alert)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t[%s, %s]\t%s\t%s\t%s\n", s.Subject, ind.SLI, ind.Events,
				num(ind.Observed, "%.4f"), num(ind.CILow, "%.4f"), num(ind.CIHigh, "%.4f"),
				num(ind.BudgetRemaining, "%.3f"), num(ind.BurnRate, "%.2f"), trig)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	if rep.MedianRunCostUSD != nil {
		notes = append(notes, fmt.Sprintf("fleet median run cost $%.6f", *rep.MedianRunCostUSD))
	}
	notes = append(notes, fmt.Sprintf("%d unattributed runs (fleet only)", rep.UnattributedRuns))
	notes = append(notes, fmt.Sprintf("%d indicators not measured", unmeasured))
	_, err := fmt.Fprintln(w, strings.Join(notes, "; "))
	return err
}
