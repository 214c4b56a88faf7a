package compare

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
)

func TestHolmHandComputed(t *testing.T) {
	// Sorted: 0.005 x4 = 0.02; 0.01 x3 = 0.03; 0.03 x2 = 0.06; 0.04 x1 =
	// 0.04, raised to the running maximum 0.06.
	got := Holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-12, "p[%d]", i)
	}
	// Capped at 1, and monotone: 0.6 x2 = 1.2 -> 1; 0.7 x1 = 0.7 -> 1.
	assert.Equal(t, []float64{1, 1}, Holm([]float64{0.6, 0.7}))
	// One test is not adjusted.
	assert.Equal(t, []float64{0.02}, Holm([]float64{0.02}))
	assert.Empty(t, Holm(nil))
}

func f(v float64) *float64 { return &v }

func TestFrontierHandComputed(t *testing.T) {
	ms := []Model{
		{Model: "A", Mean: f(0.90), CostPerCorrectUSD: f(0.020)},
		{Model: "B", Mean: f(0.88), CostPerCorrectUSD: f(0.010)},
		{Model: "C", Mean: f(0.60), CostPerCorrectUSD: f(0.015)}, // B is better and cheaper
		{Model: "D", Mean: f(0.90), CostPerCorrectUSD: f(0.030)}, // A is as good and cheaper
		{Model: "E", Mean: f(0.95)},                              // no correct answer is infinitely dear, but the best mean
		{Model: "F", Mean: f(0.88), CostPerCorrectUSD: f(0.010)}, // ties B: neither dominates
		{Model: "G"}, // unmeasured: not on it
	}
	assert.Equal(t, []string{"B", "F", "A", "E"}, frontier(ms))
}

func TestRecommendBreaksACostTieByQuality(t *testing.T) {
	ms := []Model{
		{Model: "best", Mean: f(0.9), CostPerCorrectUSD: f(0.004), Verdict: VerdictBest},
		{Model: "x", Mean: f(0.85), CostPerCorrectUSD: f(0.002), Verdict: VerdictSame},
		{Model: "y", Mean: f(0.87), CostPerCorrectUSD: f(0.002), Verdict: VerdictSame},
		{Model: "z", Mean: f(0.5), CostPerCorrectUSD: f(0.001), Verdict: VerdictWorse},
	}
	r := recommend(ms, 0)
	assert.Equal(t, "y", r.Candidate, "equal cost: the higher mean wins")
	require.NotNil(t, r.SavingPerCorrectUSD)
	assert.InDelta(t, 0.002, *r.SavingPerCorrectUSD, 1e-12)
	assert.InDelta(t, 50, *r.SavingPct, 1e-9)
	assert.Contains(t, fmt.Sprint(r.Why), "tie on cost per correct answer ($0.002000) with x (mean 0.8500): broken by quality")
	assert.Contains(t, fmt.Sprint(r.Why), "left out: z (worse)")
}

// synthRun is a run of n exact cases, passing those pass(i) says, each
// costing costUSD and taking 1+i%7 ms.
func synthRun(model string, n int, costUSD float64, pass func(i int) bool) grading.Run {
	r := grading.Run{ID: "run-" + model, Model: model, EvalSetID: "held-out", EvalSetDigest: "sha256:abc"}
	for i := range n {
		s := grading.Score{CaseID: fmt.Sprintf("c%03d", i), Grader: "exact", CostUSD: costUSD, Tokens: 12,
			Duration: time.Duration(1+i%7) * time.Millisecond, Output: fmt.Sprintf("%s says %d", model, i)}
		if pass(i) {
			s.Value = 1
			s.Checks = []grader.Check{{Name: "exact", OK: true}}
		} else {
			s.Checks = []grader.Check{{Name: "exact", OK: false, Detail: "want a-" + fmt.Sprint(i)}}
		}
		r.Scores = append(r.Scores, s)
	}
	return r
}

func TestComputeVerdictsFrontierAndCandidate(t *testing.T) {
	const n = 200
	a := synthRun("a", n, 0.002, func(i int) bool { return i%10 != 0 })                                                                          // 180 pass
	b := synthRun("b", n, 0.001, func(i int) bool { return (i%10 != 0 || i == 0 || i == 10) && i%50 != 3 })                                      // 178 pass
	c := synthRun("c", n, 0.0005, func(i int) bool { return i%2 == 0 })                                                                          // 100 pass
	c.Scores[1] = grading.Score{CaseID: c.Scores[1].CaseID, Grader: "exact", CostUSD: 0.0005, Unmeasured: "model failed", Reason: "model_error"} // unmeasured: its spend counts
	rep, err := Compute([]grading.Run{c, a, b}, Options{})
	require.NoError(t, err)

	assert.Equal(t, "a", rep.Best)
	byModel := map[string]Model{}
	for _, m := range rep.Models {
		byModel[m.Model] = m
	}
	assert.Equal(t, 180, byModel["a"].Passed)
	assert.InDelta(t, 0.4/180, *byModel["a"].CostPerCorrectUSD, 1e-12)
	assert.InDelta(t, 0.2/178, *byModel["b"].CostPerCorrectUSD, 1e-12)
	assert.Equal(t, 199, byModel["c"].Measured)
	assert.Equal(t, 1, byModel["c"].Unmeasured)
	assert.InDelta(t, 0.1/100, *byModel["c"].CostPerCorrectUSD, 1e-12, "the unmeasured case's spend counts, and it is not correct")
	assert.InDelta(t, 4.0, byModel["a"].LatencyP50MS, 1e-9)
	assert.InDelta(t, 7.0, byModel["a"].LatencyP95MS, 1e-9)
	assert.InDelta(t, 0.9, *byModel["a"].Mean, 1e-12)
	assert.True(t, *byModel["a"].CILow < 0.9 && *byModel["a"].CIHigh > 0.9 && *byModel["a"].CIHigh <= 1)

	verdicts := map[string]Test{}
	for _, tt := range rep.Tests {
		verdicts[tt.Model] = tt
	}
	assert.Equal(t, VerdictWorse, verdicts["c"].Verdict)
	assert.Equal(t, 199, verdicts["c"].Pairs, "paired on the cases both measured")
	assert.Equal(t, VerdictSame, verdicts["b"].Verdict)
	assert.Equal(t, n, verdicts["b"].Pairs)
	assert.InDelta(t, -0.01, verdicts["b"].MeanDelta, 1e-12)
	assert.GreaterOrEqual(t, *verdicts["b"].AdjustedP, *verdicts["b"].PValue, "Holm never lowers a p-value")

	assert.Equal(t, []string{"c", "b", "a"}, rep.Frontier)
	assert.Equal(t, "b", rep.Recommendation.Candidate)
	assert.InDelta(t, 0.4/180-0.2/178, *rep.Recommendation.SavingPerCorrectUSD, 1e-12)

	// Disagreements: every case where one passed and another failed, each
	// with every model's answer and failed checks.
	want := 0
	for i := range n {
		pa, pb, pc := a.Scores[i].Value == 1, b.Scores[i].Value == 1, c.Scores[i].Graded() && c.Scores[i].Value == 1
		measuredC := c.Scores[i].Graded()
		anyPass := pa || pb || pc
		anyFail := !pa || !pb || (measuredC && !pc)
		if anyPass && anyFail {
			want++
		}
	}
	assert.Len(t, rep.Disagreements, want)
	d := rep.Disagreements[0]
	assert.Equal(t, "c000", d.CaseID)
	require.Len(t, d.Answers, 3)
	assert.Equal(t, StatePass, d.Answers[0].State)
	assert.Equal(t, StateFail, d.Answers[1].State)
	assert.Equal(t, []string{"exact: want a-0"}, d.Answers[1].Failed)
	assert.Equal(t, "a says 0", d.Answers[1].Output)

	again, err := Compute([]grading.Run{c, a, b}, Options{})
	require.NoError(t, err)
	assert.Equal(t, rep, again, "the same runs give the same report")
}

func TestComputeSaysWhenThereAreTooFewCases(t *testing.T) {
	a := synthRun("a", 8, 0.002, func(i int) bool { return true })
	b := synthRun("b", 8, 0.001, func(i int) bool { return i < 2 })
	rep, err := Compute([]grading.Run{a, b}, Options{})
	require.NoError(t, err)
	require.Len(t, rep.Tests, 1)
	assert.Equal(t, VerdictTooFew, rep.Tests[0].Verdict)
	assert.Nil(t, rep.Tests[0].PValue)
	assert.Contains(t, rep.Tests[0].Note, "8 cases measured by both, fewer than 10")
	assert.Equal(t, "a", rep.Recommendation.Candidate, "a model without a verdict is not recommended")
	assert.Contains(t, fmt.Sprint(rep.Recommendation.Why), "left out: b (too few cases)")
}

func TestComputeRefusesRunsItCannotCompare(t *testing.T) {
	a := synthRun("a", 3, 0, func(int) bool { return true })
	b := synthRun("b", 3, 0, func(int) bool { return true })
	other := b
	other.EvalSetDigest = "sha256:other"
	for name, runs := range map[string][]grading.Run{
		"one run":     {a},
		"same model":  {a, a},
		"another set": {a, other},
	} {
		_, err := Compute(runs, Options{})
		assert.True(t, errors.Is(err, ErrInput), "%s: %v", name, err)
	}
}
