package report

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/compare"
)

// Mark kinds of the comparison chart.
const (
	KindModel    = "model"
	KindInterval = "interval"
	KindFrontier = "frontier"
)

// comparisonView is one model comparison's section.
type comparisonView struct {
	ID, EvalSet string
	Chart       template.HTML
	Report      compare.Report
	// NotDrawn names the models left off the chart (no correct answer, or
	// no case measured).
	NotDrawn []string
	Err      string
	// Rows, Recommendation, Why and Notes are the table and the verdict
	// as the page prints them.
	Rows           []compareRow
	Recommendation string
	Why, Notes     []string
}

// compareRow is one model's row of a comparison's table.
type compareRow struct {
	Model, RunID, Mean, Spend, CostPerCorrect, Verdict, Test string
	Measured, Unmeasured, Passed                             int
	Frontier                                                 bool
}

// texts fills the rows and the recommendation of v from its report.
func (v *comparisonView) texts() {
	r := v.Report
	tests := map[string]compare.Test{}
	for _, t := range r.Tests {
		tests[t.Model] = t
	}
	for _, m := range r.Models {
		row := compareRow{Model: m.Model, RunID: m.RunID, Mean: "unmeasured", Spend: usd(m.SpendUSD), CostPerCorrect: costText(m.CostPerCorrectUSD),
			Verdict: m.Verdict, Measured: m.Measured, Unmeasured: m.Unmeasured, Passed: m.Passed, Frontier: m.OnFrontier}
		if m.Mean != nil {
			row.Mean = pct(*m.Mean)
			if m.CILow != nil {
				row.Mean += fmt.Sprintf(" [%s, %s]", pct(*m.CILow), pct(*m.CIHigh))
			}
		}
		if t, ok := tests[m.Model]; ok {
			if t.CILow != nil {
				row.Test = fmt.Sprintf("delta %+.3f [%+.3f, %+.3f], %d pairs", t.MeanDelta, *t.CILow, *t.CIHigh, t.Pairs)
			}
			if t.AdjustedP != nil {
				row.Test += fmt.Sprintf(", Holm p %.4f", *t.AdjustedP)
			}
			if t.Note != "" {
				row.Test += "; " + t.Note
			}
		}
		v.Rows = append(v.Rows, row)
	}
	rec := r.Recommendation
	switch {
	case rec.Candidate == "":
		v.Recommendation = "no routing candidate"
	case rec.Candidate == rec.Best:
		v.Recommendation = fmt.Sprintf("route to %s, the best, at %s per correct answer", rec.Candidate, costText(rec.CandidateCostPerCorrectUSD))
	default:
		saving := "n/a"
		if rec.SavingPerCorrectUSD != nil {
			saving = fmt.Sprintf("$%.6f", *rec.SavingPerCorrectUSD)
		}
		v.Recommendation = fmt.Sprintf("route to %s at %s per correct answer (best %s at %s): saves %s per correct answer",
			rec.Candidate, costText(rec.CandidateCostPerCorrectUSD), rec.Best, costText(rec.BestCostPerCorrectUSD), saving)
	}
	v.Why, v.Notes = rec.Why, r.Notes
}

// comparisons groups the runs by the comparison that graded them
// (grading.Run.ComparisonID) and compares each group of at least two
// models, newest comparison first. A comparison that reused runs graded
// by another shows only the runs it graded itself.
func comparisons(runs []grading.Run, passMark float64) []comparisonView {
	groups := map[string][]grading.Run{}
	for _, r := range runs {
		if r.ComparisonID != "" {
			groups[r.ComparisonID] = append(groups[r.ComparisonID], r)
		}
	}
	ids := make([]string, 0, len(groups))
	for id, g := range groups {
		if len(g) >= 2 {
			ids = append(ids, id)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ids))) // ids sort by creation time
	var out []comparisonView
	for _, id := range ids {
		g := groups[id]
		slices.SortStableFunc(g, func(a, b grading.Run) int { return a.StartedAt.Compare(b.StartedAt) })
		v := comparisonView{ID: id, EvalSet: g[0].EvalSetID}
		rep, err := compare.Compute(g, compare.Options{PassMark: passMark})
		if err != nil {
			v.Err = err.Error()
			out = append(out, v)
			continue
		}
		rep.ComparisonID = id
		v.Report = rep
		v.texts()
		c, notDrawn, err := comparisonChart(rep)
		if err != nil {
			v.Err = err.Error()
		}
		v.Chart, v.NotDrawn = template.HTML(c.SVG), notDrawn
		out = append(out, v)
	}
	return out
}

// comparisonChart draws each model's mean (with its 95% interval) against
// its cost per correct answer, and the frontier through the models on it,
// cheapest first. Models with no correct answer or no measured case have
// no place on the cost axis and are returned as not drawn.
func comparisonChart(r compare.Report) (chart, []string, error) {
	var drawn []compare.Model
	var notDrawn []string
	maxCost := 0.0
	for _, m := range r.Models {
		if m.Mean == nil || m.CostPerCorrectUSD == nil {
			notDrawn = append(notDrawn, m.Model)
			continue
		}
		drawn = append(drawn, m)
		maxCost = math.Max(maxCost, *m.CostPerCorrectUSD)
	}
	if len(drawn) == 0 {
		return chart{}, notDrawn, nil
	}
	if maxCost == 0 {
		maxCost = 1e-6
	}
	xmax := maxCost * 1.15
	p := newPlot("", "cost per correct answer (USD)", "mean score (0-1)")
	p.X.Min, p.X.Max = 0, xmax
	p.Y.Min, p.Y.Max = 0, 1
	grid := plotter.NewGrid()
	grid.Vertical.Width = 0
	grid.Horizontal.Color = rgb("#DDDDDD")
	p.Add(grid)
	var m marks
	label := textStyle(8, "#222222", draw.XLeft)
	p.Add(&markPlotter{xmin: 0, xmax: xmax, ymin: 0, ymax: 1, fn: func(c draw.Canvas, tx, ty func(float64) vg.Length) {
		var front []compare.Model
		for _, name := range r.Frontier {
			for _, d := range drawn {
				if d.Model == name {
					front = append(front, d)
				}
			}
		}
		for i := 1; i < len(front); i++ {
			a, b := front[i-1], front[i]
			m.line(KindFrontier, KindFrontier, tx(*a.CostPerCorrectUSD), ty(*a.Mean), tx(*b.CostPerCorrectUSD), ty(*b.Mean), colBlack, 1.2, "5 3",
				fmt.Sprintf("frontier: %s to %s", a.Model, b.Model))
		}
		for _, d := range drawn {
			x := tx(*d.CostPerCorrectUSD)
			if d.CILow != nil {
				m.line(KindInterval, KindInterval, x, ty(*d.CILow), x, ty(*d.CIHigh), colSky, 2.5, "",
					fmt.Sprintf("%s: 95%% interval [%s, %s]", d.Model, pct(*d.CILow), pct(*d.CIHigh)))
			}
			fill, stroke := colBlue, ""
			switch d.Verdict {
			case compare.VerdictWorse:
				fill = colVermillion
			case compare.VerdictBest:
				fill = colGreen
			}
			if !d.OnFrontier {
				fill, stroke = "#FFFFFF", fill
			}
			m.circle(KindModel, "model "+strings.ReplaceAll(d.Verdict, " ", "-"), x, ty(*d.Mean), 4.5, fill, stroke, modelTitle(d))
			c.FillText(label, vg.Point{X: x + 7, Y: ty(*d.Mean) + 6}, d.Model)
		}
	}})
	ch, err := renderSVG(p, 640, 300, 0, &m, "comparison", "mean score against cost per correct answer, comparison "+r.ComparisonID)
	return ch, notDrawn, err
}

func modelTitle(d compare.Model) string {
	s := fmt.Sprintf("%s (%s): mean %s over %d measured of %d cases, %d correct; %s per correct answer; spend %s",
		d.Model, d.Verdict, pct(*d.Mean), d.Measured, d.Cases, d.Passed, usd(*d.CostPerCorrectUSD), usd(d.SpendUSD))
	if d.OnFrontier {
		s += "; on the frontier"
	}
	return s
}

// costText is a cost per correct answer for the page.
func costText(v *float64) string {
	if v == nil {
		return "n/a (none correct)"
	}
	return fmt.Sprintf("$%.6f", *v)
}
