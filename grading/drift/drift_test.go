package drift

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/verdryx/verdryx/grading"
)

// mkRun builds a run of one eval set whose case i scores vals[i].
func mkRun(id, digest string, vals []float64) grading.Run {
	r := grading.Run{ID: id, EvalSetID: "set", EvalSetDigest: digest, Model: "m",
		Provenance: grading.Provenance{CaseDigests: map[string]string{}}}
	for i, v := range vals {
		cid := fmt.Sprintf("case-%02d", i)
		r.Scores = append(r.Scores, grading.Score{CaseID: cid, Value: v})
		r.Provenance.CaseDigests[cid] = digest + "/" + cid
	}
	return r
}

// spread returns n scores in [0.6, 1] with a fixed, uneven pattern.
func spread(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 0.6 + 0.4*float64((i*7)%11)/10
		out[i] = math.Min(out[i], 1)
	}
	return out
}

func baselineOf(r grading.Run) Baseline {
	m, _ := r.Mean()
	return Baseline{ID: "bl-1", RunID: r.ID, MeanScore: m}
}

func TestDriftPlantedRegression(t *testing.T) {
	base := mkRun("base", "d1", spread(30))
	lowered := spread(30)
	for i := 0; i < 10; i++ { // a real regression on a third of the cases
		lowered[i] = math.Max(0, lowered[i]-0.4)
	}
	window := []grading.Run{mkRun("w3", "d1", lowered), mkRun("w2", "d1", lowered), mkRun("w1", "d1", lowered)}
	rep, err := Compute(baselineOf(base), base, window, Options{Seed: 7})
	require.NoError(t, err)
	assert.Equal(t, VerdictRegressed, rep.Verdict)
	require.NotNil(t, rep.CIHigh)
	assert.Less(t, *rep.CIHigh, 0.0, "the bootstrap interval lies below zero")
	assert.Less(t, *rep.TStatistic, 0.0)
	assert.Equal(t, 90, rep.WindowN, "every window score is pooled")
	assert.Equal(t, 30, rep.BaselineN)
	assert.Equal(t, []string{"w3", "w2", "w1"}, rep.WindowRunIDs)
	require.NotNil(t, rep.Paired)
	assert.Equal(t, 30, rep.Paired.Cases)
	assert.Less(t, rep.Paired.CIHigh, 0.0)
	assert.Less(t, rep.Paired.PValue, 0.01)
	assert.InDelta(t, rep.Delta, rep.Paired.MeanDelta, 1e-12, "same cases each side: paired mean delta equals the pooled delta")
}

func TestDriftIdenticalRunsOnTrack(t *testing.T) {
	base := mkRun("base", "d1", spread(30))
	window := []grading.Run{mkRun("w2", "d1", spread(30)), mkRun("w1", "d1", spread(30))}
	rep, err := Compute(baselineOf(base), base, window, Options{Seed: 7})
	require.NoError(t, err)
	assert.Equal(t, VerdictOnTrack, rep.Verdict)
	assert.InDelta(t, 0, rep.Delta, 1e-12)
	assert.LessOrEqual(t, *rep.CILow, 0.0)
	assert.GreaterOrEqual(t, *rep.CIHigh, 0.0)
	assert.InDelta(t, 0, *rep.TStatistic, 1e-12)
	assert.Equal(t, 0.0, rep.Paired.MeanDelta)
	assert.Equal(t, 1.0, rep.Paired.PValue)
}

func TestDriftSmallConsistentDropCaughtByCI(t *testing.T) {
	b := make([]float64, 40)
	w := make([]float64, 40)
	for i := range b {
		jitter := 0.01 * float64(i%3)
		b[i] = 0.90 + jitter
		w[i] = 0.87 + jitter // 0.03 lower: under the 0.05 threshold
	}
	base := mkRun("base", "d1", b)
	rep, err := Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", w)}, Options{Seed: 1})
	require.NoError(t, err)
	assert.Greater(t, rep.Delta, -DefaultThreshold, "the flat threshold alone would pass it")
	assert.Less(t, *rep.CIHigh, 0.0)
	assert.Equal(t, VerdictRegressed, rep.Verdict)
	assert.Contains(t, rep.Why[0], "ci_high")
}

func TestDriftThresholdWithoutSignificance(t *testing.T) {
	base := mkRun("base", "d1", []float64{1})
	rep, err := Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", []float64{0.9})}, Options{})
	require.NoError(t, err)
	assert.Equal(t, VerdictRegressed, rep.Verdict, "delta -0.1 <= -0.05")
	assert.Nil(t, rep.CIHigh, "one score a side: no interval")
	assert.Nil(t, rep.TStatistic)
	assert.Nil(t, rep.Paired)

	rep, err = Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", []float64{0.95})}, Options{})
	require.NoError(t, err)
	assert.Equal(t, VerdictRegressed, rep.Verdict, "delta exactly -threshold is regressed")
	rep, err = Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", []float64{0.96})}, Options{})
	require.NoError(t, err)
	assert.Equal(t, VerdictOnTrack, rep.Verdict)
}

func TestDriftReproducibleFromSeed(t *testing.T) {
	base := mkRun("base", "d1", spread(25))
	lowered := spread(25)
	lowered[3], lowered[4] = 0, 0.1
	window := []grading.Run{mkRun("w", "d1", lowered)}
	a, err := Compute(baselineOf(base), base, window, Options{Seed: 42})
	require.NoError(t, err)
	b, err := Compute(baselineOf(base), base, window, Options{Seed: 42})
	require.NoError(t, err)
	assert.Equal(t, a, b, "same inputs and seed, same report")
	c, err := Compute(baselineOf(base), base, window, Options{Seed: 43})
	require.NoError(t, err)
	assert.NotEqual(t, *a.CILow+*a.CIHigh, *c.CILow+*c.CIHigh, "the seed drives the draws")
	assert.Equal(t, DefaultSeed("bl", []string{"a", "b"}), DefaultSeed("bl", []string{"a", "b"}))
	assert.NotEqual(t, DefaultSeed("bl", []string{"a", "b"}), DefaultSeed("bl", []string{"ab"}))
}

func TestWelchT(t *testing.T) {
	v, df, ok := welchT([]float64{1, 0, 1, 1}, []float64{0, 0, 1, 0})
	require.True(t, ok)
	assert.InDelta(t, 0.5/math.Sqrt(0.125), v, 1e-12)
	assert.InDelta(t, 6, df, 1e-12, "equal variances and sizes: n1+n2-2")
	// Unequal variances: Welch-Satterthwaite, not the pooled n1+n2-2.
	_, df, ok = welchT([]float64{1, 0, 1, 1, 0, 1}, []float64{1, 1, 1, 0})
	require.True(t, ok)
	qa, qb := 0.26666666666666666/6, 0.25/4
	assert.InDelta(t, (qa+qb)*(qa+qb)/(qa*qa/5+qb*qb/3), df, 1e-12)
	_, _, ok = welchT([]float64{1, 1}, []float64{0, 0})
	assert.False(t, ok, "both variances 0")
}

func TestPercentileIdx(t *testing.T) {
	for _, tc := range []struct{ b, lo, hi int }{{2000, 50, 1950}, {10, 0, 9}, {1, 0, 0}, {100, 2, 97}} {
		lo, hi := percentileIdx(tc.b)
		assert.Equal(t, [2]int{tc.lo, tc.hi}, [2]int{lo, hi}, "B=%d", tc.b)
	}
}

func TestDriftRefusesChangedSet(t *testing.T) {
	base := mkRun("base", "d1", spread(5))
	changed := mkRun("w", "d2", spread(5))
	changed.Provenance.CaseDigests = map[string]string{}
	for k, v := range base.Provenance.CaseDigests {
		changed.Provenance.CaseDigests[k] = v
	}
	changed.Provenance.CaseDigests["case-02"] = "edited"
	delete(changed.Provenance.CaseDigests, "case-04")

	_, err := Compute(baselineOf(base), base, []grading.Run{changed}, Options{})
	var cse *ChangedSetError
	require.True(t, errors.As(err, &cse))
	assert.ErrorIs(t, err, ErrChangedSet)
	assert.Equal(t, []string{"case-02", "case-04"}, cse.Cases)
	assert.Contains(t, err.Error(), "--allow-changed-set")

	rep, err := Compute(baselineOf(base), base, []grading.Run{changed}, Options{AllowChangedSet: true})
	require.NoError(t, err)
	assert.True(t, rep.ChangedSet)
	assert.Equal(t, []string{"case-02", "case-04"}, rep.ChangedCases)
	assert.Equal(t, true, Data(rep)["changed_set"])
}

func TestDriftNothingGraded(t *testing.T) {
	base := mkRun("base", "d1", spread(3))
	w := mkRun("w", "d1", spread(3))
	for i := range w.Scores {
		w.Scores[i].Unmeasured = "judge down"
	}
	_, err := Compute(baselineOf(base), base, []grading.Run{w}, Options{})
	assert.ErrorIs(t, err, ErrNoWindow)
}

func TestDriftEventsOnlyWhenRegressed(t *testing.T) {
	on := Report{Verdict: VerdictOnTrack}
	assert.Empty(t, Events(on, "agent://a.example/b", timeZero()))
	ci := -0.1
	reg := Report{Verdict: VerdictRegressed, BaselineID: "bl", BaselineRunID: "run-1", Window: 3, CIHigh: &ci, CILow: &ci}
	evs := Events(reg, "agent://a.example/b", timeZero())
	require.Len(t, evs, 1)
	assert.Equal(t, "quality_drift", evs[0].Type)
	assert.Equal(t, "high", evs[0].Severity)
	assert.Equal(t, "run-1", evs[0].RunID)
	for _, k := range []string{"baseline_id", "window", "mean_score", "delta", "verdict", "baseline_n", "t_statistic", "ci_low", "ci_high"} {
		assert.Contains(t, evs[0].Data, k)
	}
	assert.Nil(t, evs[0].Data["t_statistic"], "an undefined t is null, not 0")
}

func timeZero() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }

// TestDriftSignificance keeps the contract's verdict and adds whether the
// drop is significant: five cases losing two is regressed by the threshold
// but not significant; forty cases losing twelve is significant.
func TestDriftSignificance(t *testing.T) {
	ones := func(n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	drop := func(n, k int) []float64 {
		out := ones(n)
		for i := range k {
			out[i*n/k] = 0
		}
		return out
	}
	base := mkRun("base", "d1", ones(5))
	rep, err := Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", drop(5, 2))}, Options{Seed: 3})
	require.NoError(t, err)
	assert.Equal(t, VerdictRegressed, rep.Verdict, "the contract's rule: delta -0.4 <= -0.05")
	assert.False(t, rep.Significant)
	assert.Equal(t, DefaultAlpha, rep.Alpha)
	require.NotNil(t, rep.CIHigh)
	assert.GreaterOrEqual(t, *rep.CIHigh, 0.0)
	assert.Regexp(t, `^regressed \(not significant: CI \[-?\d\.\d\d, -?\d\.\d\d\] includes 0, n=5, paired p 0\.\d{4} >= 0\.05\)$`, rep.VerdictText())

	base = mkRun("base", "d1", ones(40))
	rep, err = Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", drop(40, 12))}, Options{Seed: 3})
	require.NoError(t, err)
	assert.Equal(t, VerdictRegressed, rep.Verdict)
	assert.True(t, rep.Significant)
	assert.Less(t, *rep.CIHigh, 0.0)
	assert.Less(t, rep.Paired.PValue, 0.05)
	assert.Regexp(t, `^regressed \(significant: CI \[-0\.\d\d, -0\.\d\d\] below 0, n=40, paired p 0\.\d{4} < 0\.05\)$`, rep.VerdictText())

	// A tighter alpha alone does not make the 40-case drop insignificant:
	// its CI already lies below 0.
	rep, err = Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", drop(40, 12))}, Options{Seed: 3, Alpha: 1e-9})
	require.NoError(t, err)
	assert.True(t, rep.Significant)
	assert.Equal(t, 1e-9, rep.Alpha)

	// An improvement is never a significant drop.
	low := mkRun("base", "d1", drop(40, 12))
	rep, err = Compute(baselineOf(low), low, []grading.Run{mkRun("w", "d1", ones(40))}, Options{Seed: 3})
	require.NoError(t, err)
	assert.Equal(t, VerdictOnTrack, rep.Verdict)
	assert.False(t, rep.Significant)
}

// TestDriftWelchPValue checks the reported degrees of freedom and p-value
// against Welch's formulas on scores with unequal variances.
func TestDriftWelchPValue(t *testing.T) {
	base := mkRun("base", "d1", spread(30))
	w := spread(20)
	for i := range 8 {
		w[i] = 0.2
	}
	rep, err := Compute(baselineOf(base), base, []grading.Run{mkRun("w", "d1", w)}, Options{Seed: 1})
	require.NoError(t, err)
	require.NotNil(t, rep.WelchDF)
	require.NotNil(t, rep.WelchP)
	_, df, ok := welchT(w, spread(30))
	require.True(t, ok)
	assert.InDelta(t, df, *rep.WelchDF, 1e-12)
	assert.Less(t, *rep.WelchDF, 48.0, "Welch's df is below the pooled n1+n2-2 when variances differ")
	p := 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Survival(math.Abs(*rep.TStatistic))
	assert.InDelta(t, p, *rep.WelchP, 1e-12)
	assert.Greater(t, *rep.WelchP, 0.0)
	assert.Less(t, *rep.WelchP, 0.05)
}
