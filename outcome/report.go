package outcome

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// OutcomeRow is the spend of the runs that ended with one outcome tag.
type OutcomeRow struct {
	Outcome           string  `json:"outcome"`
	Runs              int64   `json:"runs"`
	Calls             int64   `json:"calls"`
	BlockedCalls      int64   `json:"blocked_calls"`
	TotalCostMicroUSD int64   `json:"total_cost_microusd"`
	TotalCostUSD      float64 `json:"total_cost_usd"`
	MeanCostPerRunUSD float64 `json:"mean_cost_per_run_usd"`
}

func (o *OutcomeRow) finish() {
	o.TotalCostUSD = float64(o.TotalCostMicroUSD) / 1e6
	if o.Runs > 0 {
		o.MeanCostPerRunUSD = o.TotalCostUSD / float64(o.Runs)
	}
}

// GroupReport is the cost per outcome of one group (the whole input when
// the report is not grouped).
type GroupReport struct {
	// Key is the group's field value ("" in an ungrouped report, or for
	// calls where the field was unset).
	Key string `json:"key"`
	// Outcomes is one row per tag, sorted by tag, "(untagged)" last.
	Outcomes []OutcomeRow `json:"outcomes"`
	// Overall pools every run of the group.
	Overall OutcomeRow `json:"overall"`
	// ResolvedRuns is the number of case_resolved runs.
	ResolvedRuns int64 `json:"resolved_runs"`
	// CostPerResolvedUSD is all spend divided by ResolvedRuns: what one
	// resolved outcome costs once failures are paid for. Nil without any
	// resolved run.
	CostPerResolvedUSD *float64 `json:"cost_per_resolved_usd"`
}

// Report is the cost-per-outcome report.
type Report struct {
	By     string        `json:"by,omitempty"`
	From   string        `json:"from,omitempty"`
	To     string        `json:"to,omitempty"`
	Groups []GroupReport `json:"groups"`
	Stats  Stats         `json:"stats"`

	overflow error // a total that would overflow int64 (see CheckedReport)
}

// Report builds the cost-per-outcome report from everything added so far.
// It does not change the reducer: more calls may be added and Report called
// again.
func (r *Reducer) Report() *Report {
	rep := &Report{By: r.opts.By, Stats: r.stats}
	if !r.opts.From.IsZero() {
		rep.From = r.opts.From.UTC().Format(time.RFC3339)
	}
	if !r.opts.To.IsZero() {
		rep.To = r.opts.To.UTC().Format(time.RFC3339)
	}
	type key struct{ group, outcome int32 }
	rows := make(map[key]*OutcomeRow)
	add := func(g, o int32, runs, calls, blocked, cost int64) {
		k := key{g, o}
		row := rows[k]
		if row == nil {
			row = &OutcomeRow{}
			rows[k] = row
		}
		row.Runs += runs
		row.Calls += calls
		row.BlockedCalls += blocked
		sumCost(&rep.overflow, &row.TotalCostMicroUSD, cost)
	}
	if r.grouped {
		for k, acc := range r.groups {
			rs := &r.runs[k>>32]
			add(int32(uint32(k)), rs.Outcome.Value, 1, acc.calls, acc.blocked, acc.cost)
		}
	} else {
		for i := range r.runs {
			rs := &r.runs[i]
			if rs.Calls > 0 {
				add(0, rs.Outcome.Value, 1, int64(rs.Calls), int64(rs.Blocked), rs.Cost)
			}
		}
	}
	for i := range r.anon {
		rs := &r.anon[i]
		add(r.anonGrp[i], rs.Outcome.Value, 1, int64(rs.Calls), int64(rs.Blocked), rs.Cost)
	}
	for i := range r.flat {
		rs := &r.flat[i]
		add(0, rs.Outcome.Value, 1, int64(rs.Calls), int64(rs.Blocked), rs.Cost)
	}

	groups := make(map[int32]*GroupReport)
	resolved, hasResolved := r.syms.Lookup(Resolved)
	for k, row := range rows {
		g := groups[k.group]
		if g == nil {
			g = &GroupReport{Key: r.syms.Name(k.group), Overall: OutcomeRow{Outcome: "overall"}}
			groups[k.group] = g
		}
		row.Outcome = Untagged
		if k.outcome != 0 {
			row.Outcome = r.syms.Name(k.outcome)
		}
		row.finish()
		g.Outcomes = append(g.Outcomes, *row)
		g.Overall.Runs += row.Runs
		g.Overall.Calls += row.Calls
		g.Overall.BlockedCalls += row.BlockedCalls
		sumCost(&rep.overflow, &g.Overall.TotalCostMicroUSD, row.TotalCostMicroUSD)
		if hasResolved && k.outcome == resolved {
			g.ResolvedRuns += row.Runs
		}
	}
	if len(groups) == 0 && !r.grouped {
		groups[0] = &GroupReport{Overall: OutcomeRow{Outcome: "overall"}}
	}
	for _, g := range groups {
		slices.SortFunc(g.Outcomes, func(a, b OutcomeRow) int { return compareTags(a.Outcome, b.Outcome) })
		g.Overall.finish()
		if g.ResolvedRuns > 0 {
			v := g.Overall.TotalCostUSD / float64(g.ResolvedRuns)
			g.CostPerResolvedUSD = &v
		}
		if g.Outcomes == nil {
			g.Outcomes = []OutcomeRow{}
		}
		rep.Groups = append(rep.Groups, *g)
	}
	slices.SortFunc(rep.Groups, func(a, b GroupReport) int { return cmp.Compare(a.Key, b.Key) })
	return rep
}

// compareTags orders outcome tags bytewise with "(untagged)" last.
func compareTags(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == Untagged:
		return 1
	case b == Untagged:
		return -1
	}
	return strings.Compare(a, b)
}

// WriteTable writes rep as an aligned human-readable table.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for gi, g := range rep.Groups {
		if gi > 0 {
			fmt.Fprintln(tw)
		}
		if rep.By != "" {
			key := g.Key
			if key == "" {
				key = `""`
			}
			fmt.Fprintf(tw, "%s = %s\n", rep.By, key)
		}
		fmt.Fprintln(tw, "outcome\truns\tcalls\tblocked\ttotal USD\tmean USD/run\t")
		for _, row := range append(slices.Clip(g.Outcomes), g.Overall) {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.6f\t%.6f\t\n", row.Outcome, row.Runs, row.Calls,
				row.BlockedCalls, row.TotalCostUSD, row.MeanCostPerRunUSD)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if g.CostPerResolvedUSD != nil {
			fmt.Fprintf(w, "cost per resolved outcome: $%.6f (all spend $%.6f / %d resolved runs)\n",
				*g.CostPerResolvedUSD, g.Overall.TotalCostUSD, g.ResolvedRuns)
		} else {
			fmt.Fprintf(w, "cost per resolved outcome: not measured (no %s runs; all spend $%.6f)\n",
				Resolved, g.Overall.TotalCostUSD)
		}
	}
	s := rep.Stats
	fmt.Fprintf(w, "calls read: %d", s.Calls)
	if s.OutsideWindow > 0 {
		fmt.Fprintf(w, ", outside window: %d", s.OutsideWindow)
	}
	if s.DroppedUntagged > 0 {
		fmt.Fprintf(w, ", untagged independent calls dropped: %d", s.DroppedUntagged)
	}
	if s.Records > 0 {
		fmt.Fprintf(w, ", flat records: %d", s.Records)
	}
	_, err := fmt.Fprintln(w)
	return err
}
