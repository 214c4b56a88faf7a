package report_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/internal/ids"
	"github.com/verdryx/verdryx/report"
)

// comparisonRun is a stored run of model in comparison cmp over n exact
// cases, passing those pass says, each costing costUSD.
func comparisonRun(cmp, model string, at time.Time, n int, costUSD float64, pass func(i int) bool) grading.Run {
	run := grading.Run{ID: ids.New("run", at), ComparisonID: cmp, EvalSetID: "held-out", EvalSetDigest: "sha256:h", Model: model,
		Version: "test", StartedAt: at, FinishedAt: at.Add(time.Second), Settings: &grading.Settings{},
		Provenance: grading.Provenance{EvalSetDigest: "sha256:h", Model: model, Version: "test"}}
	for i := range n {
		sc := grading.Score{CaseID: fmt.Sprintf("case-%02d", i), Grader: grading.GraderExact, CostUSD: costUSD, Tokens: 12,
			Output: fmt.Sprintf("a-%d", i), Checks: []grader.Check{{Name: "exact", OK: true}}}
		if !pass(i) {
			sc.Output = model + " got it wrong"
			sc.Checks = []grader.Check{{Name: "exact", OK: false, Detail: fmt.Sprintf("want %q", fmt.Sprintf("a-%d", i))}}
		} else {
			sc.Value = 1
		}
		run.Scores = append(run.Scores, sc)
	}
	return run
}

// TestBrowserReportShowsAComparison renders, in headless Chromium, a
// store holding one comparison of three models (one clearly worse, two
// within noise at different prices) and a run graded on its own. From the
// live DOM: one comparison section, a dot and an interval per model, the
// frontier drawn between the frontier models, the verdicts, the
// recommendation with its saving, and the disagreement table with each
// model's answer and failed check.
func TestBrowserReportShowsAComparison(t *testing.T) {
	chromium := findChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "verdryx.db"))
	const n, cmp = 60, "cmp-20261207T050000Z-0badcafe"
	t0 := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	runs := []grading.Run{
		comparisonRun(cmp, "openai:pricey", t0, n, 0.004, func(i int) bool { return i%10 != 0 || i == 0 }),       // 55 pass
		comparisonRun(cmp, "openai:cheap", t0.Add(time.Minute), n, 0.001, func(i int) bool { return i%10 != 1 }), // 54 pass
		comparisonRun(cmp, "openai:worse", t0.Add(2*time.Minute), n, 0.0005, func(i int) bool { return i%2 == 0 }),
		comparisonRun("", "stub", t0.Add(3*time.Minute), n, 0, func(int) bool { return true }),
	}
	for _, r := range runs {
		require.NoError(t, st.SaveRun(ctx, r))
	}
	in, err := report.Load(ctx, st, time.Time{}, 0)
	require.NoError(t, err)
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	require.NoError(t, err)
	require.NoError(t, report.Render(ctx, f, in, report.Options{Version: "test", DriftChecks: 5}))
	require.NoError(t, f.Close())

	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1200, 900))...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate((&url.URL{Scheme: "file", Path: page}).String())))
	tctx, cancelT := context.WithTimeout(bctx, 60*time.Second)
	defer cancelT()
	type facts struct {
		Sections, Models, Intervals, Frontier int
		ModelTitles                           []string
		ChartWidth                            float64
		Verdicts                              []string
		Recommendation, Text                  string
		DisagreeRows                          int
	}
	got, err := chromedp.Run(tctx, chromedp.Evaluate[facts](`(() => {
  const sec = document.getElementById("compare");
  const svg = sec.querySelector("svg.chart.comparison");
  return {Sections: sec.querySelectorAll("div.comparison").length,
    Models: svg ? svg.querySelectorAll(".mark.model").length : 0,
    Intervals: svg ? svg.querySelectorAll(".mark.interval").length : 0,
    Frontier: svg ? svg.querySelectorAll(".mark.frontier").length : 0,
    ModelTitles: svg ? [...svg.querySelectorAll(".mark.model title")].map(t => t.textContent) : [],
    ChartWidth: svg ? svg.getBoundingClientRect().width : 0,
    Verdicts: [...sec.querySelectorAll("table.comparison td.verdict")].map(t => t.textContent),
    Recommendation: (sec.querySelector(".recommendation") || {}).textContent || "",
    Text: sec.textContent,
    DisagreeRows: sec.querySelectorAll("table.disagreements tbody tr").length};
})()`))
	require.NoError(t, err)

	assert.Equal(t, 1, got.Sections, "one comparison; the run graded on its own is not one")
	assert.Equal(t, 3, got.Models)
	assert.Equal(t, 3, got.Intervals)
	assert.Greater(t, got.ChartWidth, 300.0, "the chart is laid out")
	assert.Equal(t, []string{"best", "not distinguishable", "worse"}, got.Verdicts)
	// Frontier: worse ($0.001/correct) - cheap ($0.0011) - pricey ($0.0044), as drawn segments.
	assert.Equal(t, 2, got.Frontier)
	cheapCPC := 0.001 * n / 54
	pricyCPC := 0.004 * n / 55
	assert.Contains(t, got.Recommendation, "route to openai:cheap")
	assert.Contains(t, got.Recommendation, fmt.Sprintf("saves $%.6f per correct answer", pricyCPC-cheapCPC))
	assert.True(t, strings.Contains(strings.Join(got.ModelTitles, "\n"), "openai:cheap (not distinguishable): mean 0.900"), "%q", got.ModelTitles)
	// Disagreements: every case one passed and another failed, a row per model.
	want := 0
	for i := range n {
		p := []bool{i%10 != 0 || i == 0, i%10 != 1, i%2 == 0}
		if (p[0] || p[1] || p[2]) && !(p[0] && p[1] && p[2]) {
			want++
		}
	}
	assert.Equal(t, 3*want, got.DisagreeRows)
	assert.Contains(t, got.Text, "openai:worse got it wrong")
	assert.Contains(t, got.Text, `exact: want "a-1"`)
}
