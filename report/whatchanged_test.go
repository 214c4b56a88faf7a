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

// TestBrowserReportShowsWhatChanged renders, in headless Chromium, a store
// of four runs started within one minute, graded with a semantic judge
// (and no llm_judge case), whose case ids are long and whose newest run
// fails a faithfulness check on an unsupported claim. From the live DOM:
// the grid's run labels all differ, the full case id, the newest answer,
// the failed check and the unsupported claim are on the page, and the
// provenance names the judge and the settings.
func TestBrowserReportShowsWhatChanged(t *testing.T) {
	chromium := findChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "verdryx.db"))
	const judge = "openai:fake-chat-1"
	longID := "rust-book/ch08-02-strings/" + strings.Repeat("indexing-into-strings-", 4) + "bytes-scalar-values-and-grapheme-clusters"
	cases := []string{longID, "short-case"}
	t0 := time.Date(2026, 12, 7, 4, 46, 1, 0, time.UTC)
	const answer = "Rust strings are UTF-8. The keepers repaint the lantern gallery vermilion."
	const claim = "The keepers repaint the lantern gallery vermilion."
	settings := &grading.Settings{SemanticJudge: judge, SemanticThreshold: 0.7, IndexGeneration: "memory:0123abcd",
		Embedder: "hash/v1", Retrieval: "vector", TopK: 2, Generator: "offline-extractive"}
	var runIDs []string
	for i := range 4 {
		at := t0.Add(time.Duration(i*11) * time.Second)
		run := grading.Run{ID: ids.New("run", at), EvalSetID: "book", EvalSetDigest: "sha256:b", Model: "stub", Version: "test",
			StartedAt: at, FinishedAt: at.Add(time.Second), Settings: settings,
			Provenance: grading.Provenance{EvalSetDigest: "sha256:b", Graders: map[string]map[string]any{"rag": {}}, Model: "stub", Version: "test"}}
		for _, c := range cases {
			sc := grading.Score{CaseID: c, Grader: grading.GraderRAG, Value: 1, Output: fmt.Sprintf("answer %d to %s", i, c),
				Checks: []grader.Check{{Name: grader.CheckFaithfulness, OK: true}}}
			if i == 3 && c == longID {
				sc.Value, sc.Output = 0, answer
				sc.Checks = []grader.Check{{Name: grader.CheckFaithfulness, OK: false, Detail: "1 of 2 claims supported",
					Claims: []grader.Claim{{Claim: "Rust strings are UTF-8.", Supported: true}, {Claim: claim, Supported: false}}}}
			}
			run.Scores = append(run.Scores, sc)
		}
		require.NoError(t, st.SaveRun(ctx, run))
		runIDs = append(runIDs, run.ID)
	}
	in, err := report.Load(ctx, st, time.Time{}, 0)
	require.NoError(t, err)
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	require.NoError(t, err)
	require.NoError(t, report.Render(ctx, f, in, report.Options{Version: "test", GridRuns: 30, DriftChecks: 5}))
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
		GridTexts  []string
		CellTitles []string
		GridText   string
		Provenance string
	}
	got, err := chromedp.Run(tctx, chromedp.Evaluate[facts](`(() => {
  const g = document.querySelector("#grid svg.chart");
  return {GridTexts: g ? [...g.querySelectorAll("text")].map(t => t.textContent) : [],
    CellTitles: g ? [...g.querySelectorAll(".mark.cell title")].map(t => t.textContent) : [],
    GridText: document.getElementById("grid").textContent,
    Provenance: document.getElementById("provenance").textContent};
})()`))
	require.NoError(t, err)

	// Four distinct run labels, each naming its run's short id.
	var labels []string
	for _, id := range runIDs {
		for _, tx := range got.GridTexts {
			if strings.HasSuffix(tx, id[len(id)-8:]) {
				labels = append(labels, tx)
			}
		}
	}
	require.Len(t, labels, 4, "one label per run: %q", got.GridTexts)
	seen := map[string]bool{}
	for _, l := range labels {
		assert.False(t, seen[l], "label %q repeats", l)
		seen[l] = true
	}
	assert.Contains(t, labels[0], "04:46:01")
	// The full case id is on the page (the answers list) and in the cells'
	// titles, however the axis shortens it.
	assert.Contains(t, got.GridText, longID)
	assert.True(t, strings.HasPrefix(got.CellTitles[0], longID) || strings.HasPrefix(got.CellTitles[len(got.CellTitles)-1], longID))
	// The newest run's answer, failed check and unsupported claim.
	assert.Contains(t, got.GridText, answer)
	assert.Contains(t, got.GridText, grader.CheckFaithfulness+": 1 of 2 claims supported")
	assert.Contains(t, got.GridText, "unsupported claim ("+grader.CheckFaithfulness+"): "+claim)
	assert.NotContains(t, got.GridText, "unsupported claim ("+grader.CheckFaithfulness+"): Rust strings", "a supported claim is not listed")
	// Provenance names the judge the runs used and their settings.
	assert.Contains(t, got.Provenance, judge)
	assert.NotContains(t, got.Provenance, "judgesnone recorded")
	assert.Contains(t, got.Provenance, "semantic_judge="+judge)
	assert.Contains(t, got.Provenance, "(4 runs)")
}
