package report

import (
	"bufio"
	"context"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/outcome"
)

// Render builds the page from in and writes it to w. The page is one HTML
// document with every style and chart inline and no script; it references
// no URL. A failure names the step that failed; nothing useful is written
// then.
func Render(ctx context.Context, w io.Writer, in Input, opts Options) error {
	opts = opts.withDefaults()
	m, err := build(ctx, in, opts)
	if err != nil {
		return err
	}
	data, err := m.view()
	if err != nil {
		return err
	}
	t, err := template.New("page").Parse(pageTemplate)
	if err != nil {
		return fmt.Errorf("report: parse page template: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := t.Execute(bw, data); err != nil {
		return fmt.Errorf("report: write page: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("report: write page: %w", err)
	}
	return nil
}

type qualityView struct {
	Key                       string
	Chart                     template.HTML
	Runs, Unmeasured, Checked int
	Regressed, Significant    int
	Regressions               []string
}

type detailView struct {
	CaseID  string
	Flipped bool
	Lines   []string
}

type gridView struct {
	Key          string
	Chart        template.HTML
	Runs, Cases  int
	Flipped      int
	Counts       map[string]int
	Details      []detailView
	TotalRuns    int
	GridRunLimit int
	// AnswersRun labels the newest run; Answers are its cases in set
	// order, each with its answer and failed checks.
	AnswersRun string
	Answers    []answerView
}

// answerView is one case of a run: its full id, state, answer and what
// failed (each failed check with its detail and unsupported claims, or the
// reason it was not measured).
type answerView struct {
	CaseID, State, Answer string
	Failed                []string
}

// answers lists the cases of the grid's newest run.
func answers(g grid) (string, []answerView) {
	if len(g.Runs) == 0 {
		return "", nil
	}
	j := len(g.Runs) - 1
	run := g.Runs[j]
	label := "run " + run.ID + " (" + run.StartedAt.UTC().Format(time.RFC3339) + ")"
	var out []answerView
	for _, row := range g.Rows {
		cell := row.Cells[j]
		if cell.Score == nil {
			continue
		}
		sc := cell.Score
		av := answerView{CaseID: row.CaseID, State: cell.State, Answer: sc.Output}
		switch cell.State {
		case StateUnmeasured:
			av.Failed = append(av.Failed, "unmeasured: "+sc.Unmeasured)
		case StateUnanswered:
			av.Failed = append(av.Failed, "unanswered by typryx: "+sc.Typed.Reason)
		}
		for _, ch := range sc.Checks {
			if ch.OK {
				continue
			}
			line := ch.Name
			if ch.Detail != "" {
				line += ": " + ch.Detail
			}
			av.Failed = append(av.Failed, line)
			for _, c := range ch.Claims {
				if !c.Supported {
					av.Failed = append(av.Failed, fmt.Sprintf("unsupported claim (%s): %s", ch.Name, c.Claim))
				}
			}
		}
		out = append(out, av)
	}
	return label, out
}

type costView struct {
	Chart    template.HTML
	Headline string
	Resolved bool
	Rows     []outcome.OutcomeRow
	Overall  outcome.OutcomeRow
	Stats    outcome.Stats
}

type sloRowView struct {
	Subject, SLI, Events, Observed, CI, Budget, Burn, Trigger string
	Measured                                                  bool
}

type sloView struct {
	Chart      template.HTML
	Window     string
	Rows       []sloRowView
	Unmeasured int
}

type provItem struct {
	Name   string
	Values []string
}

type pageData struct {
	Generated, Version, Since string
	Sources                   []string
	Runs                      int
	Quality                   []qualityView
	Grids                     []gridView
	Comparisons               []comparisonView
	TraceSource               string
	Cost                      *costView
	CostNote                  string
	SLO                       *sloView
	SLONote                   string
	Provenance                []provItem
	PassMark                  string
	DriftChecks, GridRuns     int
}

func (m *model) view() (*pageData, error) {
	d := &pageData{
		Generated:   m.opts.Now.UTC().Format(time.RFC3339),
		Version:     m.opts.Version,
		Sources:     m.in.Sources,
		Runs:        len(m.in.Runs),
		TraceSource: m.in.TraceSource,
		PassMark:    pct(m.opts.PassMark),
		DriftChecks: m.opts.DriftChecks,
		GridRuns:    m.opts.GridRuns,
	}
	if !m.in.Since.IsZero() {
		d.Since = m.in.Since.UTC().Format(time.RFC3339)
	}
	for _, s := range m.Series {
		c, err := qualityChart(s)
		if err != nil {
			return nil, err
		}
		q := qualityView{Key: s.key(), Chart: template.HTML(c.SVG), Runs: len(s.Points)}
		for i := range s.Points {
			p := &s.Points[i]
			if !p.Measured {
				q.Unmeasured++
			}
			if p.Check == nil || p.Check.Err != "" {
				continue
			}
			q.Checked++
			if p.Check.Regressed {
				q.Regressed++
				sig := "by threshold only, not significant"
				if p.Check.Significant {
					q.Significant++
					sig = "significant"
				}
				r := p.Check.Report
				q.Regressions = append(q.Regressions, fmt.Sprintf("run %s (%s): mean %s, delta %+.3f vs baseline %s, %s",
					p.Run.ID, p.Run.StartedAt.UTC().Format(time.RFC3339), pct(p.Mean), r.Delta, p.Check.Baseline.ID, sig))
			}
		}
		d.Quality = append(d.Quality, q)
	}
	for _, g := range m.Grids {
		c, err := gridChart(g)
		if err != nil {
			return nil, err
		}
		v := gridView{Key: g.Series.key(), Chart: template.HTML(c.SVG), Runs: len(g.Runs), Cases: len(g.Rows), Counts: c.Counts,
			TotalRuns: len(g.Series.Points), GridRunLimit: m.opts.GridRuns}
		for _, row := range g.Rows {
			if row.Flipped {
				v.Flipped++
			}
			if dv, ok := details(g, row); ok {
				v.Details = append(v.Details, dv)
			}
		}
		v.AnswersRun, v.Answers = answers(g)
		d.Grids = append(d.Grids, v)
	}
	d.Comparisons = comparisons(m.in.Runs, m.opts.PassMark)
	switch {
	case m.in.Traces == nil:
		d.CostNote = "not measured: no traces given (verdryx report --traces DIR)"
		d.SLONote = d.CostNote
	default:
		if m.Cost == nil {
			d.CostNote = "not measured: " + m.CostErr
		} else {
			cv, err := costSection(m.Cost)
			if err != nil {
				return nil, err
			}
			d.Cost = cv
		}
		if m.SLO == nil {
			d.SLONote = "not measured: " + m.SLOErr
		} else {
			sv, err := sloSection(m.SLO)
			if err != nil {
				return nil, err
			}
			d.SLO = sv
		}
	}
	d.Provenance = m.provenance()
	return d, nil
}

// details lists, for a case with failed, unmeasured or unanswered cells in
// the grid, each failed check with the runs it failed in and its newest
// detail, each unmeasured reason and each reason typryx left it
// unanswered.
func details(g grid, row gridRow) (detailView, bool) {
	type agg struct {
		runs   int
		detail string
	}
	checks := map[string]*agg{}
	var names []string
	reasons := map[string]int{}
	unanswered := map[string]int{}
	for j := len(row.Cells) - 1; j >= 0; j-- { // newest first
		cell := row.Cells[j]
		switch cell.State {
		case StateFail:
			for _, ch := range cell.Score.Checks {
				if ch.OK {
					continue
				}
				a := checks[ch.Name]
				if a == nil {
					a = &agg{detail: ch.Detail}
					checks[ch.Name] = a
					names = append(names, ch.Name)
				}
				a.runs++
			}
			if len(cell.Score.Failing()) == 0 {
				const k = "(score under the pass mark, no failed check recorded)"
				if checks[k] == nil {
					checks[k] = &agg{}
					names = append(names, k)
				}
				checks[k].runs++
			}
		case StateUnmeasured:
			reasons[cell.Score.Unmeasured]++
		case StateUnanswered:
			unanswered[cell.Score.Typed.Reason]++
		}
	}
	if len(names) == 0 && len(reasons) == 0 && len(unanswered) == 0 {
		return detailView{}, false
	}
	dv := detailView{CaseID: row.CaseID, Flipped: row.Flipped}
	for _, n := range names {
		a := checks[n]
		line := fmt.Sprintf("failed %s in %d of %d runs", n, a.runs, len(g.Runs))
		if a.detail != "" {
			line += ": " + a.detail
		}
		dv.Lines = append(dv.Lines, line)
	}
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		dv.Lines = append(dv.Lines, fmt.Sprintf("unmeasured in %d of %d runs: %s", reasons[r], len(g.Runs), r))
	}
	for _, r := range slices.Sorted(maps.Keys(unanswered)) {
		dv.Lines = append(dv.Lines, fmt.Sprintf("unanswered by typryx in %d of %d runs (not a fail): %s", unanswered[r], len(g.Runs), r))
	}
	return dv, true
}

func costSection(rep *outcome.Report) (*costView, error) {
	cv := &costView{Stats: rep.Stats}
	if len(rep.Groups) == 0 {
		cv.Headline = "not measured: no runs in the traces"
		return cv, nil
	}
	g := rep.Groups[0]
	cv.Rows, cv.Overall = g.Outcomes, g.Overall
	if g.CostPerResolvedUSD != nil {
		cv.Resolved = true
		cv.Headline = fmt.Sprintf("%s per resolved outcome (all spend %s / %d %s runs)",
			usd(*g.CostPerResolvedUSD), usd(g.Overall.TotalCostUSD), g.ResolvedRuns, outcome.Resolved)
	} else {
		cv.Headline = fmt.Sprintf("not measured: no %s runs (all spend %s)", outcome.Resolved, usd(g.Overall.TotalCostUSD))
	}
	c, err := costChart(g)
	if err != nil {
		return nil, err
	}
	cv.Chart = template.HTML(c.SVG)
	return cv, nil
}

func sloSection(rep *outcome.SLOReport) (*sloView, error) {
	sv := &sloView{Window: rep.Window}
	for _, r := range sloRows(rep) {
		ind := r.Ind
		row := sloRowView{Subject: r.Subject, SLI: ind.SLI, Events: fmt.Sprint(ind.Events), Measured: ind.Measured}
		if ind.Measured {
			row.Observed = opt(ind.Observed, "%.4f")
			row.CI = fmt.Sprintf("[%s, %s]", opt(ind.CILow, "%.4f"), opt(ind.CIHigh, "%.4f"))
			row.Budget = opt(ind.BudgetRemaining, "%+.3f")
			row.Burn = opt(ind.BurnRate, "%.2f")
			row.Trigger = ind.Trigger
			if ind.Alert {
				row.Trigger += " (alert)"
			}
		} else {
			sv.Unmeasured++
			row.Trigger = "not measured: " + ind.Reason
		}
		sv.Rows = append(sv.Rows, row)
	}
	c, err := sloChart(rep)
	if err != nil {
		return nil, err
	}
	sv.Chart = template.HTML(c.SVG)
	return sv, nil
}

// provenance gathers what the runs measured, per eval set.
func (m *model) provenance() []provItem {
	sets := map[string]map[string]int{}
	settings := map[string]int{}
	other := map[string]map[string]bool{}
	addOther := func(k, v string) {
		if v == "" {
			return
		}
		if other[k] == nil {
			other[k] = map[string]bool{}
		}
		other[k][v] = true
	}
	for i := range m.in.Runs {
		r := &m.in.Runs[i]
		if sets[r.EvalSetID] == nil {
			sets[r.EvalSetID] = map[string]int{}
		}
		sets[r.EvalSetID][r.EvalSetDigest]++
		addOther("corpus digests", r.Provenance.CorpusDigest)
		addOther("index generations", r.Provenance.IndexGeneration)
		addOther("models", r.Model)
		addOther("judges", r.Judge)
		if st := r.Settings; st != nil {
			addOther("judges", st.Judge)
			addOther("judges", st.SemanticJudge)
			addOther("index generations", st.IndexGeneration)
		}
		if sem, ok := r.Provenance.Graders[grading.GraderRAG]["semantic"].(map[string]any); ok {
			j, _ := sem["judge"].(string) // runs stored before settings were recorded
			addOther("judges", j)
		}
		settings[grading.SettingsText(r.Settings, false)]++
		addOther("verdryx versions of the runs", r.Version)
	}
	var out []provItem
	for _, id := range slices.Sorted(maps.Keys(sets)) {
		var vals []string
		for _, dg := range slices.Sorted(maps.Keys(sets[id])) {
			vals = append(vals, fmt.Sprintf("%s (%d runs)", dg, sets[id][dg]))
		}
		out = append(out, provItem{Name: "eval set " + id, Values: vals})
	}
	for _, k := range []string{"corpus digests", "index generations", "models", "judges", "verdryx versions of the runs"} {
		vals := slices.Sorted(maps.Keys(other[k]))
		if len(vals) == 0 {
			vals = []string{"none recorded"}
		}
		out = append(out, provItem{Name: k, Values: vals})
	}
	var sv []string
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		sv = append(sv, fmt.Sprintf("%s (%d runs)", k, settings[k]))
	}
	if len(sv) > 0 {
		out = append(out, provItem{Name: "settings that change scores (drift pools only runs graded alike)", Values: sv})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.HasPrefix(out[i].Name, "eval set") && !strings.HasPrefix(out[j].Name, "eval set")
	})
	return out
}

const pageTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>verdryx report</title>
<style>
body{font-family:"Liberation Sans",Arial,Helvetica,sans-serif;color:#222;margin:0 auto;max-width:1100px;padding:16px 24px;line-height:1.4}
h1{font-size:1.6em;margin:.2em 0}
h2{font-size:1.3em;border-bottom:2px solid #0072B2;padding-bottom:2px;margin-top:1.6em}
h3{font-size:1.05em;margin:1.2em 0 .3em}
.units,.guide,.meta{margin:.2em 0;color:#444;font-size:.92em}
.guide::before{content:"How to read: ";font-weight:bold}
.units::before{content:"Units: ";font-weight:bold}
figure{margin:.6em 0;overflow-x:auto}
svg.chart{max-width:100%;height:auto;display:block}
svg.grid{max-width:none}
.legend{display:flex;flex-wrap:wrap;gap:.4em 1.2em;font-size:.88em;margin:.4em 0;padding:0;list-style:none}
.legend svg{vertical-align:middle;margin-right:.3em}
.headline{font-size:1.5em;font-weight:bold;margin:.4em 0}
.notmeasured{color:#666;font-style:italic}
table{border-collapse:collapse;font-size:.88em;margin:.5em 0}
th,td{border-bottom:1px solid #ddd;padding:2px 10px;text-align:right}
th:first-child,td:first-child,td.l,th.l{text-align:left}
details{font-size:.9em;margin:.4em 0}
details li{margin:.15em 0}
code.case-id,ul.failures code{overflow-wrap:anywhere}
.answer{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2em 0 .2em 1em;color:#222}
code{font-family:"Liberation Mono",monospace;font-size:.95em}
footer{margin-top:2em;border-top:1px solid #ccc;font-size:.85em;color:#444}
footer dt{font-weight:bold;margin-top:.4em}
footer dd{margin-left:1.2em;word-break:break-all}
</style>
</head>
<body>
<header>
<h1>verdryx report</h1>
<p class="meta">{{.Runs}} eval runs{{if .Since}} started since {{.Since}}{{end}}; generated {{.Generated}} by verdryx {{.Version}}. Colours: Okabe-Ito palette, every colour also told by shape or label; hover a mark for its numbers.</p>
</header>

<section id="quality">
<h2>Quality over time</h2>
<p class="units">mean score per run, 0 to 1, over graded cases only (unmeasured cases are left out, never counted as 0).</p>
<p class="guide">one chart per eval set and model; a falling line under the dashed baseline is a regression; a filled triangle is significant (the 95% CI band lies wholly below the baseline), a hollow one crossed the threshold only.</p>
<ul class="legend">
<li><svg width="14" height="14"><circle cx="7" cy="7" r="4" fill="#0072B2"/></svg>run mean</li>
<li><svg width="16" height="14"><path d="M2 3 L14 3 L8 13Z" fill="#D55E00" stroke="#D55E00"/></svg>regressed, significant (CI high &lt; 0)</li>
<li><svg width="16" height="14"><path d="M2 3 L14 3 L8 13Z" fill="#fff" stroke="#E69F00" stroke-width="1.5"/></svg>regressed by threshold, not significant</li>
<li><svg width="14" height="14"><rect x="3" y="1" width="8" height="12" fill="#56B4E9" fill-opacity=".45"/></svg>drift check: bootstrap 95% CI (last {{.DriftChecks}} runs)</li>
<li><svg width="22" height="14"><line x1="1" y1="7" x2="21" y2="7" stroke="#000" stroke-width="1.5" stroke-dasharray="6 3"/></svg>baseline</li>
<li><svg width="14" height="14"><line x1="7" y1="1" x2="7" y2="13" stroke="#999" stroke-dasharray="2 2"/></svg>run not measured</li>
</ul>
{{range .Quality}}
<h3>{{.Key}}</h3>
<figure class="chart-figure" data-chart="quality">{{.Chart}}
<figcaption class="meta">{{.Runs}} runs ({{.Unmeasured}} not measured), {{.Checked}} drift checks, {{.Regressed}} regressed ({{.Significant}} significant).</figcaption>
</figure>
{{if .Regressions}}<ul class="regressions">{{range .Regressions}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{else}}<p class="notmeasured">no eval runs in the store{{if $.Since}} since {{$.Since}}{{end}}.</p>{{end}}
</section>

<section id="grid">
<h2>Cases x runs</h2>
<p class="units">one cell per case and run; pass = score at least {{.PassMark}}; the last {{.GridRuns}} runs of each eval set and model.</p>
<p class="guide">rows marked "flipped" changed state between the last two runs and come first; hover a cell for its score and failed checks; the list below names every failed check.</p>
<ul class="legend">
<li><svg width="14" height="14"><rect x="1" y="1" width="12" height="12" fill="#009E73"/></svg>pass</li>
<li><svg width="14" height="14"><rect x="1" y="1" width="12" height="12" fill="#D55E00"/></svg>fail</li>
<li><svg width="14" height="14"><rect x="1" y="1" width="12" height="12" fill="#999999"/></svg>unmeasured (not graded, not 0)</li>
<li><svg width="14" height="14"><rect x="1" y="1" width="12" height="12" fill="#CC79A7" stroke="#000" stroke-width="0.6" stroke-dasharray="1.5,1"/></svg>unanswered by typryx (counted apart, never a fail)</li>
<li><svg width="14" height="14"><rect x="1" y="1" width="12" height="12" fill="#fff" stroke="#ccc"/></svg>case not in that run</li>
</ul>
{{range .Grids}}
<h3>{{.Key}}</h3>
<figure class="chart-figure" data-chart="grid">{{.Chart}}
<figcaption class="meta">{{.Cases}} cases x {{.Runs}} runs (of {{.TotalRuns}}); {{.Flipped}} flipped between the last two runs.</figcaption>
</figure>
{{if .Details}}<details{{if le (len .Details) 6}} open{{end}}><summary>Failed checks and unmeasured cases ({{len .Details}} cases)</summary><ul class="failures">
{{range .Details}}<li><code>{{.CaseID}}</code>{{if .Flipped}} (flipped){{end}}<ul>{{range .Lines}}<li>{{.}}</li>{{end}}</ul></li>
{{end}}</ul></details>{{end}}
{{if .Answers}}<details class="answers"><summary>Answers of the newest run, {{.AnswersRun}} ({{len .Answers}} cases)</summary><ul class="answers">
{{range .Answers}}<li><code class="case-id">{{.CaseID}}</code> <span class="state">{{.State}}</span><div class="answer">{{.Answer}}</div>{{if .Failed}}<ul class="failed">{{range .Failed}}<li>{{.}}</li>{{end}}</ul>{{end}}</li>
{{end}}</ul></details>{{end}}
{{else}}<p class="notmeasured">no eval runs in the store.</p>{{end}}
</section>

<section id="compare">
<h2>Model comparisons</h2>
<p class="units">one per verdryx compare (the runs it graded); mean score over measured cases with its 95% interval, against cost per correct answer: spend, unmeasured cases included, divided by the cases that passed (score at least {{.PassMark}}).</p>
<p class="guide">filled dots are on the quality-cost frontier (no other model at least as good and cheaper per correct answer), joined by the dashed line; green is the best by mean, vermilion significantly worse (paired test on the cases both measured, Holm-corrected); the vertical bar is the 95% interval.</p>
{{range .Comparisons}}
<div class="comparison" id="cmp-{{.ID}}">
<h3>{{.ID}} · {{.EvalSet}}</h3>
{{if .Err}}<p class="notmeasured">not compared: {{.Err}}</p>{{else}}
{{if .Chart}}<figure class="chart-figure" data-chart="comparison">{{.Chart}}</figure>{{end}}
{{if .NotDrawn}}<p class="meta">not on the chart (no correct answer, or no case measured): {{range $i, $m := .NotDrawn}}{{if $i}}, {{end}}{{$m}}{{end}}</p>{{end}}
<table class="comparison"><thead><tr><th>model</th><th>mean [95% CI]</th><th>measured</th><th>unmeasured</th><th>passed</th><th>spend</th><th>cost per correct</th><th>verdict</th><th>against the best</th><th>frontier</th></tr></thead><tbody>
{{range .Rows}}<tr><td class="l">{{.Model}}</td><td>{{.Mean}}</td><td>{{.Measured}}</td><td>{{.Unmeasured}}</td><td>{{.Passed}}</td><td>{{.Spend}}</td><td>{{.CostPerCorrect}}</td><td class="l verdict">{{.Verdict}}</td><td class="l">{{.Test}}</td><td>{{if .Frontier}}yes{{else}}no{{end}}</td></tr>
{{end}}</tbody></table>
<p class="headline recommendation">{{.Recommendation}}</p>
<ul class="why">{{range .Why}}<li>{{.}}</li>{{end}}{{range .Notes}}<li>NOTE: {{.}}</li>{{end}}</ul>
{{with .Report.Disagreements}}<details class="disagreements"{{if le (len .) 6}} open{{end}}><summary>Cases the models disagree on ({{len .}}): one passed, another failed</summary>
<table class="disagreements"><thead><tr><th>case</th><th>model</th><th>state</th><th>answer</th><th>failed checks</th></tr></thead><tbody>
{{range .}}{{$case := .CaseID}}{{$n := len .Answers}}{{range $i, $a := .Answers}}<tr class="{{$a.State}}">{{if not $i}}<td class="l case-id" rowspan="{{$n}}"><code>{{$case}}</code></td>{{end}}<td class="l">{{$a.Model}}</td><td>{{$a.State}}</td><td class="l answer">{{$a.Output}}</td><td class="l">{{range $a.Failed}}{{.}}<br>{{end}}</td></tr>
{{end}}{{end}}</tbody></table></details>{{else}}<p class="meta">the models agree on every case.</p>{{end}}
{{end}}
</div>
{{else}}<p class="notmeasured">no model comparison in the store (verdryx compare SET --model A --model B makes one).</p>{{end}}
</section>

<section id="cost">
<h2>Cost per outcome</h2>
<p class="units">US dollars; mean cost per run of the runs that ended with each outcome (a run's outcome is its last non-empty tag; blocked calls are counted, not costed).</p>
<p class="guide">the headline divides all spend, failures included, by the resolved runs: what one resolved outcome really costs.</p>
{{with .Cost}}
<p class="headline" id="cost-per-resolved">{{.Headline}}</p>
{{if .Chart}}<figure class="chart-figure" data-chart="cost">{{.Chart}}</figure>{{end}}
<table><thead><tr><th>outcome</th><th>runs</th><th>calls</th><th>blocked</th><th>total USD</th><th>mean USD/run</th></tr></thead><tbody>
{{range .Rows}}<tr><td>{{.Outcome}}</td><td>{{.Runs}}</td><td>{{.Calls}}</td><td>{{.BlockedCalls}}</td><td>{{printf "%.6f" .TotalCostUSD}}</td><td>{{printf "%.6f" .MeanCostPerRunUSD}}</td></tr>
{{end}}<tr><th>overall</th><th>{{.Overall.Runs}}</th><th>{{.Overall.Calls}}</th><th>{{.Overall.BlockedCalls}}</th><th>{{printf "%.6f" .Overall.TotalCostUSD}}</th><th>{{printf "%.6f" .Overall.MeanCostPerRunUSD}}</th></tr></tbody></table>
<p class="meta">{{.Stats.Calls}} calls read from {{$.TraceSource}}.</p>
{{else}}<p class="notmeasured headline">{{.CostNote}}</p>{{end}}
</section>

<section id="slo">
<h2>SLOs</h2>
<p class="units">error budget remaining = 1 - (1 - observed) / (1 - target), not clamped; burn rate over the most recent 1/28 of the window (1 = spending exactly the budget).</p>
<p class="guide">bars right of the zero line have budget left, bars left of it have overspent (exhausted); an indicator with too few events says "not measured" and has no bar.</p>
{{with .SLO}}
{{if .Chart}}<figure class="chart-figure" data-chart="slo">{{.Chart}}</figure>{{end}}
<table><thead><tr><th>subject</th><th class="l">indicator</th><th>events</th><th>observed</th><th>95% CI</th><th>budget left</th><th>burn rate</th><th>trigger</th></tr></thead><tbody>
{{range .Rows}}<tr{{if not .Measured}} class="notmeasured"{{end}}><td>{{.Subject}}</td><td class="l">{{.SLI}}</td><td>{{.Events}}</td>{{if .Measured}}<td>{{.Observed}}</td><td>{{.CI}}</td><td>{{.Budget}}</td><td>{{.Burn}}</td><td class="l">{{.Trigger}}</td>{{else}}<td colspan="5" class="l">{{.Trigger}}</td>{{end}}</tr>
{{end}}</tbody></table>
<p class="meta">window {{.Window}}; {{.Unmeasured}} indicators not measured.</p>
{{else}}<p class="notmeasured headline">{{.SLONote}}</p>{{end}}
</section>

<footer id="provenance">
<h2>Provenance</h2>
<dl>
{{range .Provenance}}<dt>{{.Name}}</dt>{{range .Values}}<dd><code>{{.}}</code></dd>{{end}}
{{end}}<dt>inputs</dt>{{range .Sources}}<dd><code>{{.}}</code></dd>{{else}}<dd>not recorded</dd>{{end}}
<dt>rendered by</dt><dd>verdryx {{.Version}} at {{.Generated}}</dd>
</dl>
</footer>
</body>
</html>
`
