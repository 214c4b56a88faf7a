package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/outcome"
)

// Mark kinds counted per chart (and used as CSS classes).
const (
	KindPoint      = "point"
	KindUnmeasured = "unmeasured-run"
	KindBand       = "ci-band"
	KindBaseline   = "baseline"
	KindCell       = "cell"
	KindBar        = "bar"
	KindSLOBar     = "slo-bar"
	KindSLONone    = "slo-unmeasured"
	KindSLOClip    = "slo-clipped"
)

// sloFloor is the lowest budget the SLO chart's axis shows: a bar for a
// budget below it is cut there and marked clipped.
const sloFloor = -5.0

// timeTicks labels up to n evenly spaced run indexes with their start time.
func timeTicks(runs []*grading.Run, n int) plot.ConstantTicks {
	if len(runs) == 0 {
		return nil
	}
	layout := "01-02 15:04"
	if runs[len(runs)-1].StartedAt.Sub(runs[0].StartedAt) > 72*time.Hour {
		layout = "2006-01-02"
	}
	var ticks plot.ConstantTicks
	step := max(1, (len(runs)+n-1)/n)
	for i := 0; i < len(runs); i += step {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: runs[i].StartedAt.UTC().Format(layout)})
	}
	if last := len(runs) - 1; ticks[len(ticks)-1].Value != float64(last) {
		if len(ticks) > 1 && float64(last)-ticks[len(ticks)-1].Value < float64(step)/2 {
			ticks = ticks[:len(ticks)-1]
		}
		ticks = append(ticks, plot.Tick{Value: float64(last), Label: runs[last].StartedAt.UTC().Format(layout)})
	}
	return ticks
}

func pct(v float64) string { return fmt.Sprintf("%.3f", v) }

// pointTitle is the hover text of a run's point.
func pointTitle(p *point) string {
	r := p.Run
	var b strings.Builder
	fmt.Fprintf(&b, "run %s (%s)\n", r.ID, r.StartedAt.UTC().Format(time.RFC3339))
	if p.Measured {
		fmt.Fprintf(&b, "mean score %s over %d graded of %d cases", pct(p.Mean), p.Graded, len(r.Scores))
	} else {
		fmt.Fprintf(&b, "mean score not measured (0 of %d cases graded)", len(r.Scores))
	}
	if c := p.Check; c != nil {
		b.WriteString("\n" + checkText(c))
	}
	return b.String()
}

// checkText describes a drift check in one or two lines.
func checkText(c *check) string {
	if c.Err != "" {
		return fmt.Sprintf("drift vs baseline %s: not checked: %s", c.Baseline.ID, c.Err)
	}
	r := c.Report
	s := fmt.Sprintf("drift vs baseline %s (mean %s): delta %+.3f, verdict %s", c.Baseline.ID, pct(r.BaselineMean), r.Delta, r.Verdict)
	if r.CILow != nil && r.CIHigh != nil {
		sig := "not significant"
		if c.Significant {
			sig = "significant"
		}
		s += fmt.Sprintf("\nbootstrap 95%% CI of delta [%+.3f, %+.3f] (%s)", *r.CILow, *r.CIHigh, sig)
	} else {
		s += "\nCI not computed (fewer than 2 graded scores on a side)"
	}
	return s
}

// qualityChart draws one series: mean score per run (points and a line),
// baselines as dashed rules, the CI band of each drift check, regressed
// runs as triangles (filled: significant; hollow: by threshold only).
func qualityChart(s *series) (chart, error) {
	n := len(s.Points)
	runs := make([]*grading.Run, n)
	index := map[string]int{}
	for i := range s.Points {
		runs[i] = s.Points[i].Run
		index[runs[i].ID] = i
	}
	p := newPlot("", "runs, oldest to newest (start time, UTC)", "mean score (0-1)")
	p.X.Tick.Marker = timeTicks(runs, 6)
	p.Y.Min, p.Y.Max = 0, 1
	p.X.Min, p.X.Max = -0.5, float64(n)-0.5
	grid := plotter.NewGrid()
	grid.Vertical.Width = 0
	grid.Horizontal.Color = rgb("#DDDDDD")
	p.Add(grid)
	var xys plotter.XYs
	for i, pt := range s.Points {
		if pt.Measured {
			xys = append(xys, plotter.XY{X: float64(i), Y: pt.Mean})
		}
	}
	var m marks
	// CI bands and baseline rules first, so the line and points sit on top.
	p.Add(&markPlotter{xmin: -0.5, xmax: float64(n) - 0.5, ymin: 0, ymax: 1, fn: func(c draw.Canvas, tx, ty func(float64) vg.Length) {
		half := 0.4
		if n > 80 {
			half = 0.5
		}
		for i := range s.Points {
			pt := &s.Points[i]
			if pt.Check == nil || pt.Check.Report.CILow == nil || pt.Check.Report.CIHigh == nil {
				continue
			}
			r := pt.Check.Report
			lo, hi := max(0, min(1, r.BaselineMean+*r.CILow)), max(0, min(1, r.BaselineMean+*r.CIHigh))
			m.rect(KindBand, KindBand, tx(float64(i)-half), ty(lo), tx(float64(i)+half), ty(hi), colSky, ` fill-opacity="0.45"`,
				fmt.Sprintf("run %s\n%s", pt.Run.ID, checkText(pt.Check)))
		}
		for bi, b := range s.Baselines {
			from := 0
			if i, ok := index[b.RunID]; ok {
				from = i
			}
			to := n - 1
			// A later baseline of the series takes over from its run on.
			for _, nb := range s.Baselines[bi+1:] {
				if j, ok := index[nb.RunID]; ok && j > from && j < to {
					to = j
				}
			}
			label := b.ID
			if b.Label != "" {
				label += " (" + b.Label + ")"
			}
			m.line(KindBaseline, KindBaseline, tx(float64(from)-0.5), ty(b.MeanScore), tx(float64(to)+0.5), ty(b.MeanScore), colBlack, 1.5, "6 3",
				fmt.Sprintf("baseline %s: mean %s of run %s, created %s", label, pct(b.MeanScore), b.RunID, b.CreatedAt.UTC().Format(time.RFC3339)))
		}
		for i := range s.Points {
			if !s.Points[i].Measured {
				m.line(KindUnmeasured, KindUnmeasured, tx(float64(i)), c.Min.Y, tx(float64(i)), c.Max.Y, colGrey, 1, "2 2", pointTitle(&s.Points[i]))
			}
		}
	}})
	if len(xys) > 1 {
		l, err := plotter.NewLine(xys)
		if err != nil {
			return chart{}, fmt.Errorf("report: quality line of %s: %w", s.key(), err)
		}
		l.LineStyle.Color = rgb(colBlue)
		l.LineStyle.Width = vg.Points(1.2)
		p.Add(l)
	}
	p.Add(&markPlotter{xmin: -0.5, xmax: float64(n) - 0.5, ymin: 0, ymax: 1, fn: func(_ draw.Canvas, tx, ty func(float64) vg.Length) {
		r := vg.Length(3.5)
		if n > 60 {
			r = 2
		}
		for i := range s.Points {
			pt := &s.Points[i]
			if !pt.Measured {
				continue
			}
			x, y := tx(float64(i)), ty(pt.Mean)
			switch c := pt.Check; {
			case c != nil && c.Regressed && c.Significant:
				m.triangle(KindPoint, "point regressed significant", x, y, max(r, 4.5), colVermillion, colVermillion, pointTitle(pt))
			case c != nil && c.Regressed:
				m.triangle(KindPoint, "point regressed not-significant", x, y, max(r, 4.5), "#FFFFFF", colOrange, pointTitle(pt))
			default:
				m.circle(KindPoint, "point", x, y, r, colBlue, "", pointTitle(pt))
			}
		}
	}})
	return renderSVG(p, 640, 240, 0, &m, "quality", "mean score per run of "+s.key())
}

// cellTitle is the hover text of a grid cell.
func cellTitle(caseID string, r *grading.Run, cell gridCell) string {
	head := fmt.Sprintf("%s · run %s (%s)", caseID, r.ID, r.StartedAt.UTC().Format(time.RFC3339))
	sc := cell.Score
	switch cell.State {
	case StateAbsent:
		return head + "\nnot in this run"
	case StateUnmeasured:
		return head + "\nunmeasured: " + sc.Unmeasured
	case StateUnanswered:
		return fmt.Sprintf("%s\nunanswered by typryx (not a fail): %s, answer %s", head, sc.Typed.Reason, sc.Typed.AnswerID)
	case StatePass:
		return fmt.Sprintf("%s\npass, score %s", head, pct(sc.Value))
	}
	s := fmt.Sprintf("%s\nfail, score %s", head, pct(sc.Value))
	if f := sc.Failing(); len(f) > 0 {
		s += "\nfailed checks: " + strings.Join(f, ", ")
	}
	return s
}

// cellColour is the fill of a grid cell state.
func cellColour(state string) string {
	switch state {
	case StatePass:
		return colGreen
	case StateFail:
		return colVermillion
	case StateUnmeasured:
		return colGrey
	case StateUnanswered:
		return colPurple
	}
	return "#FFFFFF"
}

// gridChart draws one series' cases x runs grid.
func gridChart(g grid) (chart, error) {
	rows, cols := len(g.Rows), len(g.Runs)
	if rows == 0 || cols == 0 {
		return chart{}, nil
	}
	p := newPlot("", "runs, newest right (start time UTC, short run id)", "")
	names := make([]string, rows)
	for i, row := range g.Rows {
		name := row.CaseID
		if len(name) > 80 { // the full id is in each cell's title and the answers list
			name = name[:38] + "..." + name[len(name)-39:]
		}
		if row.Flipped {
			name = "flipped: " + name
		}
		names[rows-1-i] = name // first row on top
	}
	p.NominalY(names...)
	xt := make(plot.ConstantTicks, cols)
	for i, l := range runLabels(g.Runs) {
		xt[i] = plot.Tick{Value: float64(i), Label: l}
	}
	p.X.Tick.Marker = xt
	p.X.Tick.Label.Rotation = math.Pi / 2
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	var m marks
	p.Add(&markPlotter{xmin: -0.5, xmax: float64(cols) - 0.5, ymin: -0.5, ymax: float64(rows) - 0.5, fn: func(_ draw.Canvas, tx, ty func(float64) vg.Length) {
		for i, row := range g.Rows {
			y := float64(rows - 1 - i)
			for j, cell := range row.Cells {
				extra := ""
				switch cell.State {
				case StateAbsent:
					extra = ` stroke="#CCCCCC" stroke-width="0.5"`
				case StateUnanswered: // told by its dashed outline too
					extra = ` stroke="#000000" stroke-width="0.6" stroke-dasharray="1.5,1"`
				}
				m.rect(KindCell, "cell "+cell.State, tx(float64(j)-0.45), ty(y-0.42), tx(float64(j)+0.45), ty(y+0.42),
					cellColour(cell.State), extra, cellTitle(row.CaseID, g.Runs[j], cell))
			}
		}
	}})
	longest := 0
	for _, n := range names {
		longest = max(longest, len(n))
	}
	w := vg.Length(float64(longest)*5.2+70) + vg.Length(cols)*13
	w = max(w, 320)
	h := vg.Length(rows)*12 + 150
	return renderSVG(p, w, h, 0, &m, "grid", "cases x runs of "+g.Series.key())
}

// runLabels labels runs for an axis, each distinct: start time to the
// second (UTC) and the id's last 8 characters (a verdryx run id's random
// part), with "#n" added to a label that still repeats.
func runLabels(runs []*grading.Run) []string {
	out := make([]string, len(runs))
	seen := map[string]int{}
	for i, r := range runs {
		id := r.ID
		if len(id) > 8 {
			id = id[len(id)-8:]
		}
		l := r.StartedAt.UTC().Format("01-02 15:04:05") + " " + id
		seen[l]++
		if n := seen[l]; n > 1 {
			l += fmt.Sprintf(" #%d", n)
		}
		out[i] = l
	}
	return out
}

// usd formats a dollar amount with enough digits for tiny per-call costs.
func usd(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "$0"
	case a < 0.01:
		return fmt.Sprintf("$%.6f", v)
	case a < 100:
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// costChart draws horizontal bars of mean USD per run by outcome with the
// runs and calls as labels.
func costChart(g outcome.GroupReport) (chart, error) {
	rows := len(g.Outcomes)
	if rows == 0 {
		return chart{}, nil
	}
	p := newPlot("", "mean cost per run (USD)", "")
	names := make([]string, rows)
	maxMean := 0.0
	for i, o := range g.Outcomes {
		names[rows-1-i] = o.Outcome
		maxMean = math.Max(maxMean, o.MeanCostPerRunUSD)
	}
	p.NominalY(names...)
	if maxMean == 0 {
		maxMean = 1e-6
	}
	p.X.Min, p.X.Max = 0, maxMean*1.05
	var m marks
	label := textStyle(9, "#222222", draw.XLeft)
	p.Add(&markPlotter{xmin: 0, xmax: maxMean * 1.05, ymin: -0.5, ymax: float64(rows) - 0.5, fn: func(c draw.Canvas, tx, ty func(float64) vg.Length) {
		for i, o := range g.Outcomes {
			y := float64(rows - 1 - i)
			fill := colBlue
			if o.Outcome == outcome.Resolved {
				fill = colGreen
			}
			m.rect(KindBar, "bar", tx(0), ty(y-0.32), tx(o.MeanCostPerRunUSD), ty(y+0.32), fill, "",
				fmt.Sprintf("%s: mean %s per run; %d runs, %d calls (%d blocked), total %s",
					o.Outcome, usd(o.MeanCostPerRunUSD), o.Runs, o.Calls, o.BlockedCalls, usd(o.TotalCostUSD)))
			c.FillText(label, vg.Point{X: c.Max.X + 10, Y: ty(y)},
				fmt.Sprintf("%s/run · %d runs · %d calls", usd(o.MeanCostPerRunUSD), o.Runs, o.Calls))
		}
	}})
	return renderSVG(p, 640, vg.Length(rows)*26+70, 190, &m, "cost", "mean cost per run by outcome")
}

// sloRow is one subject and indicator of the SLO chart.
type sloRow struct {
	Subject string
	Ind     outcome.Indicator
}

func sloRows(rep *outcome.SLOReport) []sloRow {
	var out []sloRow
	for _, s := range rep.Subjects {
		for _, ind := range s.Indicators {
			out = append(out, sloRow{Subject: s.Subject, Ind: ind})
		}
	}
	return out
}

func opt(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

// sloLabel is the text beside an indicator's bar; a budget below sloFloor
// says its bar is clipped.
func sloLabel(ind outcome.Indicator) string {
	if !ind.Measured {
		return "not measured: " + ind.Reason
	}
	s := fmt.Sprintf("budget %s · burn %s · %s", opt(ind.BudgetRemaining, "%+.2f"), opt(ind.BurnRate, "%.2f"), ind.Trigger)
	if b := ind.BudgetRemaining; b != nil && *b < sloFloor {
		s = fmt.Sprintf("budget %+.2f (bar clipped at %g) · burn %s · %s", *b, sloFloor, opt(ind.BurnRate, "%.2f"), ind.Trigger)
	}
	if ind.Alert {
		s += " (alert)"
	}
	return s
}

// sloChart draws the budget remaining of each subject and indicator as a
// bar from zero (right: budget left, left: overspent); a bar below
// sloFloor is cut there, marked by a left-pointing triangle at its end
// (KindSLOClip) and class "clipped", with the true value in its label and
// title; an unmeasured indicator has no bar and says so.
func sloChart(rep *outcome.SLOReport) (chart, error) {
	rows := sloRows(rep)
	if len(rows) == 0 {
		return chart{}, nil
	}
	n := len(rows)
	lo := -1.0
	for _, r := range rows {
		if b := r.Ind.BudgetRemaining; b != nil {
			lo = math.Min(lo, *b)
		}
	}
	lo = math.Max(lo, sloFloor)
	p := newPlot("", "error budget remaining (1 = untouched, 0 = spent, below 0 = overspent)", "")
	names := make([]string, n)
	for i, r := range rows {
		subj := r.Subject
		if len(subj) > 40 {
			subj = "..." + subj[len(subj)-37:]
		}
		names[n-1-i] = subj + " · " + r.Ind.SLI
	}
	p.NominalY(names...)
	p.X.Min, p.X.Max = lo*1.04, 1.04
	var xt plot.ConstantTicks
	for v := math.Ceil(lo); v <= 1; v++ {
		xt = append(xt, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
	}
	p.X.Tick.Marker = xt
	var m marks
	label := textStyle(9, "#222222", draw.XLeft)
	grey := textStyle(9, "#666666", draw.XLeft)
	p.Add(&markPlotter{xmin: lo * 1.04, xmax: 1.04, ymin: -0.5, ymax: float64(n) - 0.5, fn: func(c draw.Canvas, tx, ty func(float64) vg.Length) {
		for i, r := range rows {
			y := float64(n - 1 - i)
			ind := r.Ind
			title := fmt.Sprintf("%s · %s (target %.3f, %d events)\n%s", r.Subject, ind.SLI, ind.Target, ind.Events, sloLabel(ind))
			if !ind.Measured {
				m.rect(KindSLONone, KindSLONone, c.Min.X, ty(y-0.4), c.Max.X, ty(y+0.4), "#EEEEEE", "", title)
				c.FillText(grey, vg.Point{X: c.Max.X + 10, Y: ty(y)}, sloLabel(ind))
				continue
			}
			b := *ind.BudgetRemaining
			fill := colGreen
			if b <= 0 {
				fill = colVermillion
			}
			title += fmt.Sprintf("\nobserved %s, CI [%s, %s]", opt(ind.Observed, "%.4f"), opt(ind.CILow, "%.4f"), opt(ind.CIHigh, "%.4f"))
			if b < lo {
				title += fmt.Sprintf("\nbar clipped at %g: the budget is %+.2f", lo, b)
				m.rect(KindSLOBar, "slo-bar clipped "+ind.Trigger, tx(0), ty(y-0.32), tx(lo), ty(y+0.32), fill, "", title)
				m.leftTriangle(KindSLOClip, KindSLOClip, tx(lo)-vg.Length(9), ty(y), 4, colBlack, title)
			} else {
				m.rect(KindSLOBar, "slo-bar "+ind.Trigger, tx(0), ty(y-0.32), tx(b), ty(y+0.32), fill, "", title)
			}
			c.FillText(label, vg.Point{X: c.Max.X + 10, Y: ty(y)}, sloLabel(ind))
		}
		m.line("zero", "zero", tx(0), c.Min.Y, tx(0), c.Max.Y, colBlack, 1, "", "budget 0: spent")
	}})
	return renderSVG(p, 760, vg.Length(n)*16+80, 250, &m, "slo", "SLO error budget remaining per subject and indicator")
}
