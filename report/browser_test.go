package report_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/report"
	"github.com/verdryx/verdryx/report/fixture"
)

// findChromium returns the Chromium binary, skipping the test when there is
// none outside CI and failing it under CI (CI=true), where .ci/run installs
// Debian's chromium package.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no Chromium on PATH: install it to run the browser test (Debian: apt-get update && apt-get install -y chromium; .ci/run does this)"
	if os.Getenv("CI") == "true" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

// domFacts is what the page shows, read from the live DOM.
type domFacts struct {
	Sections []struct {
		ID                     string
		Title                  string
		HasUnits, HasGuide     bool
		Charts                 int
		TextHasNotMeasuredWord bool
	}
	Charts []struct {
		Class                      string
		W, H                       float64
		Points, Bands, Baselines   int
		UnmeasuredRuns             int
		Cells, UnmeasuredCells     int
		Bars, SLOBars, SLONone     int
		Regressed, Significant     int
		RegressedTitles            []string
		UnmeasuredCellTitles       []string
		TextNodes, SelectableTexts int
	}
	FirstFailure     string
	FailureFlipped   []string
	NotMeasuredRows  []string
	Headline         string
	External         []string
	ScriptsOrLinks   int
	ProvenanceText   string
	BodyTextNotEmpty bool
}

const domScript = `(() => {
  const q = (el, s) => el.querySelectorAll(s).length;
  const out = {Sections: [], Charts: []};
  for (const id of ["quality", "grid", "cost", "slo", "provenance"]) {
    const s = document.getElementById(id);
    if (!s) continue;
    out.Sections.push({ID: id, Title: (s.querySelector("h2")||{}).textContent || "",
      HasUnits: !!s.querySelector(".units"), HasGuide: !!s.querySelector(".guide"),
      Charts: q(s, "svg.chart"), TextHasNotMeasuredWord: s.textContent.includes("not measured")});
  }
  for (const svg of document.querySelectorAll("svg.chart")) {
    const r = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll("text")];
    out.Charts.push({Class: svg.getAttribute("class"), W: r.width, H: r.height,
      Points: q(svg, ".mark.point"), Bands: q(svg, ".mark.ci-band"), Baselines: q(svg, ".mark.baseline"),
      UnmeasuredRuns: q(svg, ".mark.unmeasured-run"),
      Cells: q(svg, ".mark.cell"), UnmeasuredCells: q(svg, ".mark.cell.unmeasured"),
      Bars: q(svg, ".mark.bar"), SLOBars: q(svg, ".mark.slo-bar"), SLONone: q(svg, ".mark.slo-unmeasured"),
      Regressed: q(svg, ".mark.point.regressed"), Significant: q(svg, ".mark.point.regressed.significant"),
      RegressedTitles: [...svg.querySelectorAll(".mark.point.regressed title")].map(t => t.textContent),
      UnmeasuredCellTitles: [...svg.querySelectorAll(".mark.cell.unmeasured title")].map(t => t.textContent),
      TextNodes: texts.length,
      SelectableTexts: texts.filter(t => getComputedStyle(t).userSelect !== "none" && t.textContent.trim() !== "").length});
  }
  const fl = document.querySelector("#grid ul.failures > li");
  out.FirstFailure = fl ? fl.textContent : "";
  out.FailureFlipped = [...document.querySelectorAll("#grid ul.failures > li")].filter(li => li.firstChild.nextSibling && li.firstChild.nextSibling.textContent.includes("flipped")).map(li => li.querySelector("code").textContent);
  out.NotMeasuredRows = [...document.querySelectorAll("#slo tr.notmeasured")].map(tr => tr.textContent);
  out.Headline = (document.querySelector("#cost-per-resolved")||{}).textContent || "";
  const ext = [];
  for (const el of document.querySelectorAll("*")) {
    for (const a of ["src", "href", "xlink:href", "srcset", "poster", "data"]) {
      const v = el.getAttribute(a);
      if (v) ext.push(el.tagName + " " + a + "=" + v);
    }
  }
  out.External = ext;
  out.ScriptsOrLinks = q(document, "script, link, iframe, object, embed, img");
  out.ProvenanceText = document.getElementById("provenance") ? document.getElementById("provenance").textContent : "";
  out.BodyTextNotEmpty = document.body.innerText.length > 100;
  return out;
})()`

// TestBrowserReport opens a report of a store with several runs (one
// significantly regressed, one case unmeasured, one run unmeasured) and
// trace outcomes in headless Chromium and checks, from the live DOM, every
// section, chart size and mark count, the regression mark and that the
// page made no request. It saves full-page and per-section screenshots in
// the test's temp dir (and in $VERDRYX_REPORT_SCREENSHOTS when set).
func TestBrowserReport(t *testing.T) {
	chromium := findChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "verdryx.db"))
	spec := fixture.Spec{Series: 2, Runs: 9, Cases: 12, Seed: 7, Regress: 6, UnmeasuredCase: true, UnmeasuredRun: 3,
		AgentID: "agent://acme.example/support/good"}
	facts, err := fixture.Populate(ctx, st, spec)
	require.NoError(t, err)
	in, err := report.Load(ctx, st, time.Time{}, 0)
	require.NoError(t, err)
	traces := reduceFixture(t, "slo")
	in.Traces, in.TraceSource = traces, "testdata/traces/slo"
	costRep, err := traces.CheckedReport()
	require.NoError(t, err)
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	require.NoError(t, err)
	opts := report.Options{Version: "test", GridRuns: 30, DriftChecks: 60}
	require.NoError(t, report.Render(ctx, f, in, opts))
	require.NoError(t, f.Close())

	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1200, 900))...)
	defer cancelAlloc()
	var mu sync.Mutex
	var requests []string
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	}))
	defer cancel()
	pageURL := (&url.URL{Scheme: "file", Path: page}).String()
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(pageURL)))
	tctx, cancelT := context.WithTimeout(bctx, 60*time.Second)
	defer cancelT()
	got, err := chromedp.Run(tctx, chromedp.Evaluate[domFacts](domScript))
	require.NoError(t, err)

	// Screenshots first, so a failing assertion still leaves them.
	shots := map[string]chromedp.Action[[]byte]{"report-full.png": chromedp.FullScreenshot(100)}
	for _, id := range []string{"quality", "grid", "cost", "slo", "provenance"} {
		shots["section-"+id+".png"] = chromedp.Screenshot(chromedp.ID(id))
	}
	keep := os.Getenv("VERDRYX_REPORT_SCREENSHOTS")
	for name, act := range shots {
		png, err := chromedp.Run(tctx, act)
		require.NoError(t, err, name)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
		if keep != "" {
			require.NoError(t, os.WriteFile(filepath.Join(keep, name), png, 0o644))
		}
	}
	t.Logf("screenshots in %s", dir)

	// Every section, with a title, units and a reading guide.
	require.Len(t, got.Sections, 5, "sections present")
	for _, s := range got.Sections {
		assert.NotEmpty(t, s.Title, s.ID)
		if s.ID != "provenance" {
			assert.True(t, s.HasUnits && s.HasGuide, "section %s has units and a reading guide", s.ID)
		}
	}
	// Charts: 2 quality + 2 grids + cost + slo, each with a real size.
	nSeries := len(facts.Series)
	require.Len(t, got.Charts, 2*nSeries+2)
	for i, c := range got.Charts {
		assert.Greater(t, c.W, 100.0, "chart %d (%s) width", i, c.Class)
		assert.Greater(t, c.H, 50.0, "chart %d (%s) height", i, c.Class)
		assert.Greater(t, c.SelectableTexts, 0, "chart %d (%s) has selectable text", i, c.Class)
	}
	for si, sf := range facts.Series {
		q := got.Charts[si]
		require.Contains(t, q.Class, "quality")
		assert.Equal(t, sf.Measured, q.Points, "series %d: one point per measured run", si)
		assert.Equal(t, len(sf.RunIDs)-sf.Measured, q.UnmeasuredRuns, "series %d: unmeasured runs marked, not drawn as 0", si)
		// Every measured run after the baselined one is checked.
		assert.Equal(t, sf.Measured-1, q.Bands, "series %d: one CI band per drift check", si)
		assert.Equal(t, 1, q.Baselines, "series %d: baseline rule", si)
		g := got.Charts[nSeries+si]
		require.Contains(t, g.Class, "grid")
		assert.Equal(t, len(sf.Cases)*min(len(sf.RunIDs), opts.GridRuns), g.Cells, "series %d: cases x runs cells", si)
	}
	// The regressed run is marked, as significant, in the first series only.
	assert.Equal(t, 1, got.Charts[0].Regressed)
	assert.Equal(t, 1, got.Charts[0].Significant)
	require.Len(t, got.Charts[0].RegressedTitles, 1)
	assert.Contains(t, got.Charts[0].RegressedTitles[0], facts.RegressedRunID)
	assert.Contains(t, got.Charts[0].RegressedTitles[0], "significant")
	assert.Zero(t, got.Charts[1].Regressed)
	// The unmeasured case is a grey cell naming its reason, and the case
	// flipped between the last two runs, so it is listed first.
	grid0 := got.Charts[nSeries]
	assert.Equal(t, len(facts.Series[0].Cases)+1, grid0.UnmeasuredCells, "the unmeasured run's cells and the one unmeasured case")
	found := false
	for _, title := range grid0.UnmeasuredCellTitles {
		if strings.HasPrefix(title, facts.UnmeasuredCase+" · run "+facts.UnmeasuredCaseRun) {
			found = true
			assert.Contains(t, title, "unmeasured: ")
		}
	}
	assert.True(t, found, "unmeasured case cell has a title naming it")
	assert.Contains(t, got.FailureFlipped, facts.UnmeasuredCase)
	assert.Contains(t, got.FirstFailure, "(flipped)", "flipped cases come first")
	// Cost: one bar per outcome, and the headline figure.
	cost := got.Charts[2*nSeries]
	require.Contains(t, cost.Class, "cost")
	assert.Equal(t, len(costRep.Groups[0].Outcomes), cost.Bars)
	assert.Contains(t, got.Headline, "per resolved outcome")
	assert.Contains(t, got.Headline, "$", "headline is a dollar figure")
	// SLOs: a bar per measured indicator; unmeasured ones say so, never 0.
	slo, err := traces.SLO(sloOptions(in), nil)
	require.NoError(t, err)
	measured, unmeasured := 0, 0
	for _, s := range slo.Subjects {
		for _, ind := range s.Indicators {
			if ind.Measured {
				measured++
			} else {
				unmeasured++
			}
		}
	}
	sloC := got.Charts[2*nSeries+1]
	require.Contains(t, sloC.Class, "slo")
	assert.Equal(t, measured, sloC.SLOBars)
	assert.Equal(t, unmeasured, sloC.SLONone)
	require.Len(t, got.NotMeasuredRows, unmeasured)
	for _, row := range got.NotMeasuredRows {
		assert.Contains(t, row, "not measured")
		assert.NotContains(t, row, "0.0000", "an unmeasured indicator shows no number")
	}
	// Provenance.
	for _, sf := range facts.Series {
		assert.Contains(t, got.ProvenanceText, "eval set "+sf.EvalSetID)
	}
	assert.Contains(t, got.ProvenanceText, "corpus digests")
	assert.Contains(t, got.ProvenanceText, "index generations")
	// Nothing left the page: no request but the page itself, and no
	// element that could fetch.
	assert.Empty(t, got.External, "no element references a URL")
	assert.Zero(t, got.ScriptsOrLinks, "no script, link, iframe, object, embed or img")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, requests, "the network listener saw the page load")
	for _, u := range requests {
		assert.Equal(t, pageURL, u, "only the page itself was requested")
	}
}
