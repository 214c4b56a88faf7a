package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/compare"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/junit"
)

// compareLong is compare's help.
const compareLong = "Compare models on one eval set: which model should the gateway route to?\n" +
	"Grades the set once per --model (each a stored run, as eval stores it, tagged with one comparison id), one model after another,\n" +
	"with eval's judge rules (no --judge: each model judges its own llm_judge cases) and one --cost-limit-usd over the whole comparison.\n" +
	"A model whose latest stored run is of the same eval set digest, judge and semantic judge is not called again unless --fresh;\n" +
	"--runs R1,R2,... compares stored runs only, making no call. The output names the runs reused.\n" +
	"Per model: mean with its 95% interval, cases measured and unmeasured, passes, spend, cost per correct answer (spend / passing\n" +
	"cases; unmeasured cases are not correct and their spend counts; n/a when none passed), tokens, latency p50/p95 per case.\n" +
	"Every model is tested against the best by mean, paired on the cases both measured (sign-flip test, bootstrap interval), with\n" +
	"Holm's correction across the tests: better, worse or not distinguishable at --alpha; under --min-pairs paired cases no verdict.\n" +
	"The recommendation is the cheapest model per correct answer not distinguishable from the best (a tie on cost goes to the higher\n" +
	"mean), with its saving per correct answer, and the quality-cost frontier.\n" +
	"Exit 0: compared; 1: events could not be written to --events; 2: usage or input error; 3: a model or judge failed every case\n" +
	"of its run (the run is stored and compared), or the OTLP collector refused the spans."

// newCompareCmd compares models on an eval set.
func newCompareCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compare [EVALSET] --model A --model B [--model C ...] | compare --runs R1,R2,...",
		Short: "compare models on one eval set by quality, significance and cost per correct answer",
		Long:  compareLong,
	}
	fs := cmd.Flags()
	c := addEvalFlags(fs, g)
	models := fs.StringArray("model", nil, "a model to compare (repeat; at least two): stub, an Anthropic model id, or openai:<id>")
	runs := fs.StringSlice("runs", nil, "compare these stored runs (comma-separated ids) instead of grading; no call is made")
	fresh := fs.Bool("fresh", false, "grade every model again, even one whose latest stored run could be reused")
	mf := addModelFlags(fs, "timeout per model or judge call (never retried)")
	junitPath := fs.String("junit", "", "write JUnit XML (a testsuite per model, one testcase per case and model) to this file")
	conc := fs.Int("concurrency", 4, "cases graded at once (models are graded one after another)")
	alpha := fs.Float64("alpha", compare.DefaultAlpha, "family-wise significance level of the tests against the best (Holm)")
	minPairs := fs.Int("min-pairs", compare.DefaultMinPairs, "fewest cases measured by both models that a verdict is given on")
	sp := spendFlags{
		prices:       fs.String("prices", "", "JSON file of model id -> {\"input_usd_per_mtok\": N, \"output_usd_per_mtok\": N}; overrides and extends the built-in price book"),
		costLimit:    fs.Float64("cost-limit-usd", 0, "stop paid calls once the whole comparison's priced spend reaches this many US dollars; models not reached are not graded. 0: no cap"),
		semThreshold: new(float64),
		semantic:     new(bool),
	}
	*sp.semThreshold = grader.DefaultSemanticThreshold
	lf := addLogFlags(fs, "warn")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		if *alpha <= 0 || *alpha >= 1 {
			return usageErrorf("compare: --alpha must be in (0, 1)")
		}
		if *minPairs < 2 {
			return usageErrorf("compare: --min-pairs must be at least 2")
		}
		if *conc < 1 {
			return usageErrorf("compare: --concurrency must be at least 1")
		}
		opts := compare.Options{Alpha: *alpha, MinPairs: *minPairs}
		if len(*runs) > 0 {
			if len(pos) != 0 || len(*models) != 0 || *fresh {
				return usageErrorf("compare: --runs compares stored runs: give no EVALSET, --model or --fresh with it")
			}
			return compareStored(cmd, g, c, *runs, opts, *junitPath)
		}
		if len(pos) != 1 {
			return usageErrorf("compare: want exactly one EVALSET (or --runs), have %d arguments", len(pos))
		}
		if len(*models) < 2 {
			return usageErrorf("compare: want at least two --model, have %d", len(*models))
		}
		return compareModels(cmd, c, pos[0], compareArgs{models: *models, fresh: *fresh, conc: *conc, junit: *junitPath, opts: opts}, sp, mf, lf)
	}
	return cmd
}

// compareArgs are compare's flags for grading models.
type compareArgs struct {
	models []string
	fresh  bool
	conc   int
	junit  string
	opts   compare.Options
}

// compareModels grades the set with each model (evalrun.Compare) and
// prints the comparison.
func compareModels(cmd *cobra.Command, c evalFlags, setPath string, a compareArgs, sp spendFlags, mf *modelFlags, lf *logFlags) error {
	book, err := sp.book()
	if err != nil {
		return err
	}
	logger, err := lf.logger(cmd.ErrOrStderr(), nil)
	if err != nil {
		return err
	}
	if err := checkNotEmpty(setPath, "eval set"); err != nil {
		return err
	}
	set, err := grading.LoadEvalSet(setPath)
	if err != nil {
		return inputError(err)
	}
	if err := mf.check(); err != nil {
		return err
	}
	resolve, _, err := mf.resolver()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	s, err := openEvalSinks(ctx, cmd.ErrOrStderr(), c, storeWrite)
	if err != nil {
		return err
	}
	deps := s.deps()
	deps.Models, deps.Prices, deps.Concurrency, deps.Logger = resolve, book, a.conc, logger
	res, runErr := evalrun.Compare(ctx, deps, evalrun.CompareRequest{Set: set, Models: a.models, Judge: *mf.judge, Fresh: a.fresh,
		MaxCostUSD: *sp.costLimit, AgentID: *c.agentID, Options: a.opts})
	closeErr := s.close(ctx)
	if runErr != nil {
		return evalRunError(runErr)
	}
	return finishCompare(cmd, s, res, closeErr, *c.asJSON, a.junit)
}

// compareStored is compare --runs: stored runs only, no call.
func compareStored(cmd *cobra.Command, g *globals, c evalFlags, ids []string, opts compare.Options, junitPath string) error {
	ctx := cmd.Context()
	st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *c.db, *c.data, storeRead)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := evalrun.CompareStored(ctx, st, ids, opts)
	if err != nil {
		return evalRunError(err)
	}
	return printCompare(cmd.OutOrStdout(), res, *c.asJSON, junitPath)
}

// finishCompare prints the comparison, then decides the exit: 3 when a
// run graded for it measured no case or the spans were refused, 1 when
// events were lost.
func finishCompare(cmd *cobra.Command, s *evalSinks, res evalrun.CompareResult, closeErr error, asJSON bool, junitPath string) error {
	stderr := cmd.ErrOrStderr()
	printWarnings(stderr, res.Problems)
	if closeErr != nil {
		fmt.Fprintf(stderr, "verdryx: warning: %v\n", closeErr)
	}
	unwritten := s.eventsNotWritten(stderr)
	if err := printCompare(cmd.OutOrStdout(), res, asJSON, junitPath); err != nil {
		return err
	}
	for _, r := range res.Runs {
		graded := slices.Contains(res.GradedRuns, r.ID)
		if graded && r.Cases > 0 && r.GradedN == 0 {
			un := r.Unmeasured()
			return serviceError(fmt.Errorf("model %s: no case could be graded: every one of the %d cases is unmeasured (first: %s: %s); the run is stored and compared",
				r.Model, r.Cases, un[0].CaseID, un[0].Unmeasured))
		}
	}
	if s.spansErr != nil {
		return serviceError(s.spansErr)
	}
	if unwritten > 0 || len(res.Problems) > 0 {
		return failed()
	}
	return nil
}

// printCompare writes the JUnit file and prints the comparison.
func printCompare(w io.Writer, res evalrun.CompareResult, asJSON bool, junitPath string) error {
	if junitPath != "" {
		var b bytes.Buffer
		name := "compare " + res.Comparison.EvalSetID
		if err := junit.WriteComparison(&b, name, res.Runs, res.Comparison.PassMark); err != nil {
			return err
		}
		if err := os.WriteFile(junitPath, b.Bytes(), 0o644); err != nil {
			return inputError(fmt.Errorf("--junit: %w", err))
		}
	}
	if asJSON {
		return writeJSON(w, res)
	}
	printCompareText(w, res)
	return nil
}

// usdOrNA is a cost per correct answer, "n/a (none correct)" when none
// passed.
func usdOrNA(v *float64) string {
	if v == nil {
		return "n/a (none correct)"
	}
	return fmt.Sprintf("$%.6f", *v)
}

func printCompareText(w io.Writer, res evalrun.CompareResult) {
	r := res.Comparison
	id := r.ComparisonID
	if id == "" {
		id = "(stored runs of several comparisons)"
	}
	fmt.Fprintf(w, "Comparison %s  (eval set %s %s, %d models)\n", id, r.EvalSetID, evalShortDigest(r.EvalSetDigest), len(r.Models))
	fmt.Fprintf(w, "reused runs (no call): %s\n", listOrNone(res.ReusedRuns))
	fmt.Fprintf(w, "graded runs: %s\n", listOrNone(res.GradedRuns))
	for _, ng := range res.NotGraded {
		fmt.Fprintf(w, "not graded: %s: %s\n", ng.Model, ng.Reason)
	}
	if res.CostLimitUSD > 0 {
		fmt.Fprintf(w, "cost limit $%.6f: spent $%.6f\n", res.CostLimitUSD, res.SpentUSD)
	}
	fmt.Fprintln(w)
	printCompareTable(w, r)
	fmt.Fprintf(w, "\ntests against the best (%s), paired on the cases both measured, Holm-adjusted, alpha %.3g, at least %d pairs:\n", r.Best, r.Alpha, r.MinPairs)
	for _, t := range r.Tests {
		line := fmt.Sprintf("  %-24s %s", t.Model, strings.ToUpper(t.Verdict))
		if t.CILow != nil {
			line += fmt.Sprintf(": delta %+.4f [95%% %+.4f, %+.4f], %d pairs", t.MeanDelta, *t.CILow, *t.CIHigh, t.Pairs)
		} else {
			line += fmt.Sprintf(": %d pairs", t.Pairs)
		}
		if t.PValue != nil {
			line += fmt.Sprintf(", p %.4f (Holm %.4f)", *t.PValue, *t.AdjustedP)
		}
		fmt.Fprintln(w, line)
		if t.Note != "" {
			fmt.Fprintf(w, "  %-24s %s\n", "", t.Note)
		}
	}
	fmt.Fprintf(w, "\nfrontier (no other model at least as good and cheaper per correct answer): %s\n", strings.Join(r.Frontier, ", "))
	printRecommendation(w, r.Recommendation)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "NOTE: %s\n", n)
	}
	printDisagreements(w, r.Disagreements)
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func printCompareTable(w io.Writer, r compare.Report) {
	fmt.Fprintf(w, "%-24s  %-26s  %8s  %6s  %5s  %10s  %18s  %8s  %13s  %s\n",
		"MODEL", "MEAN [95% CI]", "MEASURED", "UNMEAS", "PASS", "SPEND", "COST/CORRECT", "TOKENS", "P50/P95 ms", "VERDICT")
	for _, m := range r.Models {
		mean := "unmeasured"
		if m.Mean != nil {
			mean = fmt.Sprintf("%.3f", *m.Mean)
			if m.CILow != nil {
				mean += fmt.Sprintf(" [%.3f, %.3f]", *m.CILow, *m.CIHigh)
			}
		}
		verdict := m.Verdict
		if m.Reused {
			verdict += " (reused " + m.RunID + ")"
		}
		fmt.Fprintf(w, "%-24s  %-26s  %8d  %6d  %5d  %10s  %18s  %8d  %13s  %s\n", m.Model, mean, m.Measured, m.Unmeasured, m.Passed,
			fmt.Sprintf("$%.6f", m.SpendUSD), usdOrNA(m.CostPerCorrectUSD), m.Tokens,
			fmt.Sprintf("%.1f/%.1f", m.LatencyP50MS, m.LatencyP95MS), verdict)
	}
}

func printRecommendation(w io.Writer, rec compare.Recommendation) {
	switch {
	case rec.Candidate == "":
		fmt.Fprintf(w, "recommendation: none\n")
	case rec.Candidate == rec.Best:
		fmt.Fprintf(w, "recommendation: route to %s, the best, at %s per correct answer\n", rec.Candidate, usdOrNA(rec.CandidateCostPerCorrectUSD))
	default:
		saving := "n/a"
		if rec.SavingPerCorrectUSD != nil {
			saving = fmt.Sprintf("$%.6f", *rec.SavingPerCorrectUSD)
			if rec.SavingPct != nil {
				saving += fmt.Sprintf(" (%.1f%%)", *rec.SavingPct)
			}
		}
		fmt.Fprintf(w, "recommendation: route to %s at %s per correct answer (best %s at %s): saves %s per correct answer\n",
			rec.Candidate, usdOrNA(rec.CandidateCostPerCorrectUSD), rec.Best, usdOrNA(rec.BestCostPerCorrectUSD), saving)
	}
	for _, y := range rec.Why {
		fmt.Fprintf(w, "  %s\n", y)
	}
}

// maxDisagreements bounds the disagreements printed; --json and the
// report list them all.
const maxDisagreements = 10

func printDisagreements(w io.Writer, ds []compare.Disagreement) {
	fmt.Fprintf(w, "\ndisagreements: %d cases one model passed and another failed", len(ds))
	if len(ds) > maxDisagreements {
		fmt.Fprintf(w, " (first %d; --json and verdryx report list every one)", maxDisagreements)
	}
	fmt.Fprintln(w)
	for _, d := range ds[:min(len(ds), maxDisagreements)] {
		fmt.Fprintf(w, "  %s\n", d.CaseID)
		for _, a := range d.Answers {
			line := fmt.Sprintf("    %-24s %-10s %q", a.Model, strings.ToUpper(a.State), clip(a.Output, 60))
			if len(a.Failed) > 0 {
				line += "  x " + strings.Join(a.Failed, "; ")
			}
			fmt.Fprintln(w, line)
		}
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
