package drift

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
)

// Drift verdicts.
const (
	VerdictOnTrack   = "on-track"
	VerdictRegressed = "regressed"
)

// Drift defaults.
const (
	DefaultThreshold = 0.05
	DefaultResamples = 2000
	// DefaultAlpha is the paired test's significance level.
	DefaultAlpha = 0.05
)

// Baseline is a stored run snapshotted as the reference for drift.
type Baseline struct {
	ID        string    `json:"baseline_id"`
	RunID     string    `json:"run_id"`
	MeanScore float64   `json:"mean_score"`
	CreatedAt time.Time `json:"created_at"`
	Label     string    `json:"label,omitempty"`
}

// Options tune Compute.
type Options struct {
	// Threshold: a pooled mean this far (or more) below the baseline mean
	// is regressed. <= 0 means DefaultThreshold.
	Threshold float64
	// Resamples for each bootstrap and the permutation test; <= 0 means
	// DefaultResamples.
	Resamples int
	// Seed drives every random draw; the same inputs and seed give the
	// same report. DefaultSeed derives one from the inputs.
	Seed uint64
	// AllowChangedSet compares runs whose eval-set digest differs from the
	// baseline run's; the report then says so.
	AllowChangedSet bool
	// AllowChangedSettings pools runs graded under settings other than
	// the baseline run's (grading.Settings: judge, semantic checks, index,
	// retrieval, generator, typed template); the report then names what
	// differed. Without it such a run in the window is refused
	// (ErrChangedSettings).
	AllowChangedSettings bool
	// Alpha is the level below which the paired test's p-value makes a
	// drop significant; <= 0 or >= 1 means DefaultAlpha.
	Alpha float64
}

// PairedTest compares the window with the baseline case by case.
type PairedTest struct {
	// Cases is the number of case ids graded on both sides.
	Cases int `json:"cases"`
	// MeanDelta is the mean over cases of (window case mean - baseline
	// case score).
	MeanDelta float64 `json:"mean_delta"`
	// CILow/CIHigh: 95% paired bootstrap interval of MeanDelta (cases
	// resampled with replacement).
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
	// PValue: two-sided sign-flip permutation p-value of MeanDelta,
	// (hits+1)/(resamples+1).
	PValue float64 `json:"p_value"`
}

// Report is the result of one drift check.
type Report struct {
	BaselineID    string `json:"baseline_id"`
	BaselineRunID string `json:"baseline_run_id"`
	EvalSetID     string `json:"eval_set_id"`
	Model         string `json:"model"`
	// Window is the number of runs pooled; WindowRunIDs names them, most
	// recent first.
	Window       int      `json:"window"`
	WindowRunIDs []string `json:"window_run_ids"`
	WindowN      int      `json:"window_n"`
	MeanScore    float64  `json:"mean_score"`
	BaselineMean float64  `json:"baseline_mean"`
	BaselineN    int      `json:"baseline_n"`
	Delta        float64  `json:"delta"`
	Threshold    float64  `json:"threshold"`
	Verdict      string   `json:"verdict"`
	// Why lists what decided the verdict.
	Why []string `json:"why"`
	// TStatistic, CILow and CIHigh are set when both sides have at least
	// two graded scores. TStatistic is nil too when both variances are 0.
	TStatistic *float64 `json:"t_statistic"`
	// WelchDF is the Welch-Satterthwaite degrees of freedom of TStatistic
	// and WelchP its two-sided p-value (Student's t); nil with it.
	WelchDF   *float64    `json:"welch_df"`
	WelchP    *float64    `json:"welch_p"`
	CILow     *float64    `json:"ci_low"`
	CIHigh    *float64    `json:"ci_high"`
	Paired    *PairedTest `json:"paired,omitempty"`
	Resamples int         `json:"resamples"`
	Seed      uint64      `json:"seed,string"`
	// ChangedCases is set when the window's eval set differs from the
	// baseline run's and AllowChangedSet let the check go ahead.
	ChangedSet   bool     `json:"changed_set"`
	ChangedCases []string `json:"changed_cases,omitempty"`
	// BaselineSettings are the baseline run's settings (nil: not
	// recorded).
	BaselineSettings *grading.Settings `json:"baseline_settings"`
	// Skipped lists the runs left out of the window because they were
	// graded under other settings than the baseline run (the window then
	// reached further back); set by the caller that chose the window
	// (evalrun.CheckDrift).
	Skipped []SettingsChange `json:"skipped_runs,omitempty"`
	// ChangedSettings is set when AllowChangedSettings pooled runs graded
	// under other settings; SettingsChanges names them and what differed.
	ChangedSettings bool             `json:"changed_settings"`
	SettingsChanges []SettingsChange `json:"settings_changes,omitempty"`
	// SettingsUnknown is set when the baseline's run records no
	// settings: nothing to compare with, so the window is pooled
	// whatever its runs' settings (verdryx drift prints a NOTE).
	SettingsUnknown bool `json:"settings_unknown,omitempty"`
	// PooledByModel is set when the baseline's run records no eval set
	// (the Python verdryx wrote it): the window is the model's most recent
	// runs of any set, as the Python verdryx pooled them.
	PooledByModel bool `json:"pooled_by_model,omitempty"`
	// Significant says the drop is statistically significant: the
	// bootstrap CI of the delta lies below 0 (ci_high < 0), or the paired
	// test's mean delta is negative with p < Alpha. It does not change
	// Verdict (the contract's rule); it qualifies it.
	Significant bool    `json:"significant"`
	Alpha       float64 `json:"alpha"`
	// Significance says why, e.g. "not significant: CI [-0.72, 0.03]
	// includes 0, n=5, paired p 0.4798 >= 0.05".
	Significance string `json:"significance"`
}

// VerdictText is the verdict qualified by its significance, e.g.
// "regressed (not significant: CI [-0.72, 0.03] includes 0, n=5, ...)".
func (r Report) VerdictText() string {
	if r.Verdict != VerdictRegressed {
		return r.Verdict
	}
	return r.Verdict + " (" + r.Significance + ")"
}

// ErrChangedSet marks a refused comparison: the window measured a
// different eval set than the baseline run.
var ErrChangedSet = errors.New("grading: eval set changed since the baseline")

// ErrChangedSettings marks a refused comparison: a window run was graded
// under other settings than the baseline run.
var ErrChangedSettings = errors.New("grading: run graded under other settings than the baseline")

// SettingsChange is a run graded under other settings than the baseline
// run, and what differed (grading.DiffSettings).
type SettingsChange struct {
	RunID   string   `json:"run_id"`
	Changes []string `json:"changes"`
}

// ChangedSettingsError names a window run graded under other settings.
type ChangedSettingsError struct {
	SettingsChange
}

func (e *ChangedSettingsError) Error() string {
	return fmt.Sprintf("run %s was graded under other settings than the baseline (%s); pass --allow-changed-settings to pool it anyway",
		e.RunID, strings.Join(e.Changes, ", "))
}

func (e *ChangedSettingsError) Unwrap() error { return ErrChangedSettings }

// ErrNoWindow marks a drift check with nothing graded to compare.
var ErrNoWindow = errors.New("grading: no graded case in the window")

// ChangedSetError names the cases that differ.
type ChangedSetError struct {
	RunID string
	Cases []string
}

func (e *ChangedSetError) Error() string {
	return fmt.Sprintf("run %s measured a different eval set than the baseline (changed cases: %s); pass --allow-changed-set to compare anyway",
		e.RunID, strings.Join(e.Cases, ", "))
}

func (e *ChangedSetError) Unwrap() error { return ErrChangedSet }

// DefaultSeed derives a seed from the baseline and window run ids, so a
// report is reproducible without the caller choosing one.
func DefaultSeed(baselineID string, windowRunIDs []string) uint64 {
	h := sha256.New()
	h.Write([]byte(baselineID))
	for _, id := range windowRunIDs {
		h.Write([]byte{0})
		h.Write([]byte(id))
	}
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// Compute compares window (most recent first) with the baseline and its
// run. It pools every graded case score of the window into one mean (not a
// mean of run means); delta = mean - baseline mean; regressed when
// delta <= -threshold. With at least two graded scores on each side it adds
// Welch's t (informational) and a bootstrap 95% CI of the delta (each group
// resampled at its own size; sorted indices int(0.025*B) and
// min(int(0.975*B), B-1)); ci_high < 0 is regressed too. When the sides
// share case ids a paired per-case test is reported beside it. Every report
// states whether the drop is significant (ci_high < 0, or paired p < alpha
// with a negative paired delta) without changing the verdict, and Welch's
// t comes with its degrees of freedom and two-sided p-value.
func Compute(baseline Baseline, baseRun grading.Run, window []grading.Run, opts Options) (Report, error) {
	if opts.Threshold <= 0 {
		opts.Threshold = DefaultThreshold
	}
	if opts.Resamples <= 0 {
		opts.Resamples = DefaultResamples
	}
	rep := Report{
		BaselineID:       baseline.ID,
		BaselineRunID:    baseline.RunID,
		EvalSetID:        baseRun.EvalSetID,
		Model:            baseRun.Model,
		Window:           len(window),
		BaselineMean:     baseline.MeanScore,
		Threshold:        opts.Threshold,
		Resamples:        opts.Resamples,
		Seed:             opts.Seed,
		BaselineSettings: baseRun.Settings,
	}
	changed := map[string]bool{}
	if baseRun.EvalSetDigest == "" {
		rep.PooledByModel = true
		rep.Why = append(rep.Why, fmt.Sprintf("the baseline's run records no eval set (the Python verdryx wrote it): the window pools model %s's most recent runs of any set, as the Python verdryx did", baseRun.Model))
	}
	for _, w := range window {
		rep.WindowRunIDs = append(rep.WindowRunIDs, w.ID)
		if w.EvalSetDigest == baseRun.EvalSetDigest || rep.PooledByModel {
			continue
		}
		cases := grading.ChangedCases(baseRun.Provenance.CaseDigests, w.Provenance.CaseDigests)
		if !opts.AllowChangedSet {
			return Report{}, &ChangedSetError{RunID: w.ID, Cases: cases}
		}
		for _, c := range cases {
			changed[c] = true
		}
		rep.ChangedSet = true
	}
	if baseRun.Settings == nil {
		rep.SettingsUnknown = true
	}
	for _, w := range window {
		diff := grading.DiffSettings(baseRun.Settings, w.Settings)
		if len(diff) == 0 || rep.SettingsUnknown {
			continue
		}
		ch := SettingsChange{RunID: w.ID, Changes: diff}
		if !opts.AllowChangedSettings {
			return Report{}, &ChangedSettingsError{ch}
		}
		rep.ChangedSettings = true
		rep.SettingsChanges = append(rep.SettingsChanges, ch)
	}
	for c := range changed {
		rep.ChangedCases = append(rep.ChangedCases, c)
	}
	sort.Strings(rep.ChangedCases)

	var pooled []float64
	for i := range window {
		pooled = append(pooled, window[i].Graded()...)
	}
	if len(pooled) == 0 {
		return Report{}, ErrNoWindow
	}
	base := baseRun.Graded()
	rep.WindowN = len(pooled)
	rep.BaselineN = len(base)
	rep.MeanScore = stat.Mean(pooled, nil)
	rep.Delta = rep.MeanScore - baseline.MeanScore
	rep.Verdict = VerdictOnTrack
	if rep.Delta <= -opts.Threshold {
		rep.Verdict = VerdictRegressed
		rep.Why = append(rep.Why, fmt.Sprintf("delta %.4f <= -%.4f", rep.Delta, opts.Threshold))
	}
	if len(pooled) >= 2 && len(base) >= 2 {
		if t, df, ok := welchT(pooled, base); ok {
			p := 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Survival(math.Abs(t))
			rep.TStatistic, rep.WelchDF, rep.WelchP = &t, &df, &p
		}
		lo, hi := bootstrapDeltaCI(pooled, base, opts.Resamples, rand.New(rand.NewPCG(opts.Seed, 1)))
		rep.CILow, rep.CIHigh = &lo, &hi
		if hi < 0 {
			if rep.Verdict != VerdictRegressed {
				rep.Why = append(rep.Why, fmt.Sprintf("bootstrap ci_high %.4f < 0", hi))
			}
			rep.Verdict = VerdictRegressed
		}
	}
	if rep.Verdict == VerdictOnTrack {
		rep.Why = append(rep.Why, fmt.Sprintf("delta %.4f > -%.4f", rep.Delta, opts.Threshold))
		if rep.CIHigh != nil {
			rep.Why = append(rep.Why, fmt.Sprintf("bootstrap ci_high %.4f >= 0", *rep.CIHigh))
		}
	}
	rep.Paired = pairedTest(baseRun, window, opts)
	rep.Alpha = opts.Alpha
	if rep.Alpha <= 0 || rep.Alpha >= 1 {
		rep.Alpha = DefaultAlpha
	}
	rep.Significant, rep.Significance = significance(rep)
	return rep, nil
}

// significance decides whether the report's drop is significant and says
// why in words.
func significance(r Report) (bool, string) {
	n := r.WindowN
	if r.Paired != nil {
		n = r.Paired.Cases
	}
	var parts []string
	sig := false
	if r.CIHigh != nil {
		if *r.CIHigh < 0 {
			sig = true
			parts = append(parts, fmt.Sprintf("CI [%.2f, %.2f] below 0", *r.CILow, *r.CIHigh))
		} else {
			parts = append(parts, fmt.Sprintf("CI [%.2f, %.2f] includes 0", *r.CILow, *r.CIHigh))
		}
	} else {
		parts = append(parts, "no CI (fewer than 2 graded scores on a side)")
	}
	parts = append(parts, fmt.Sprintf("n=%d", n))
	if p := r.Paired; p != nil {
		if p.MeanDelta < 0 && p.PValue < r.Alpha {
			sig = true
			parts = append(parts, fmt.Sprintf("paired p %.4f < %.2f", p.PValue, r.Alpha))
		} else {
			parts = append(parts, fmt.Sprintf("paired p %.4f >= %.2f", p.PValue, r.Alpha))
		}
	}
	if sig {
		return true, "significant: " + strings.Join(parts, ", ")
	}
	return false, "not significant: " + strings.Join(parts, ", ")
}

// welchT is Welch's t of a against b with its Welch-Satterthwaite degrees
// of freedom; ok is false when both variances are 0.
func welchT(a, b []float64) (t, df float64, ok bool) {
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	na, nb := float64(len(a)), float64(len(b))
	qa, qb := va/na, vb/nb
	se := math.Sqrt(qa + qb)
	if se == 0 {
		return 0, 0, false
	}
	df = (qa + qb) * (qa + qb) / (qa*qa/(na-1) + qb*qb/(nb-1))
	return (ma - mb) / se, df, true
}

// percentileIdx returns the contract's 95% interval indices into B sorted
// resamples.
func percentileIdx(b int) (lo, hi int) {
	return int(0.025 * float64(b)), min(int(0.975*float64(b)), b-1)
}

// bootstrapDeltaCI resamples each group at its own size and returns the 95%
// interval of mean(window) - mean(base).
func bootstrapDeltaCI(window, base []float64, resamples int, rng *rand.Rand) (float64, float64) {
	deltas := make([]float64, resamples)
	for i := range deltas {
		deltas[i] = resampleMean(window, rng) - resampleMean(base, rng)
	}
	sort.Float64s(deltas)
	lo, hi := percentileIdx(resamples)
	return deltas[lo], deltas[hi]
}

func resampleMean(xs []float64, rng *rand.Rand) float64 {
	sum := 0.0
	for range xs {
		sum += xs[rng.IntN(len(xs))]
	}
	return sum / float64(len(xs))
}

// pairedTest pairs each case id graded in the baseline run with its mean
// over the window runs that graded it. It returns nil with fewer than two
// pairs.
func pairedTest(baseRun grading.Run, window []grading.Run, opts Options) *PairedTest {
	baseByCase := map[string]float64{}
	for _, s := range baseRun.Scores {
		if s.Graded() {
			baseByCase[s.CaseID] = s.Value
		}
	}
	sum := map[string]float64{}
	n := map[string]int{}
	for i := range window {
		for _, s := range window[i].Scores {
			if _, ok := baseByCase[s.CaseID]; ok && s.Graded() {
				sum[s.CaseID] += s.Value
				n[s.CaseID]++
			}
		}
	}
	ids := make([]string, 0, len(n))
	for id := range n {
		ids = append(ids, id)
	}
	if len(ids) < 2 {
		return nil
	}
	sort.Strings(ids) // map order must not reach the random draws
	deltas := make([]float64, len(ids))
	for i, id := range ids {
		deltas[i] = sum[id]/float64(n[id]) - baseByCase[id]
	}
	p := Paired(deltas, opts.Resamples, opts.Seed)
	return &p
}

// Paired is the paired test of per-case deltas (one value per case, in a
// fixed order: the order reaches the draws): their mean, its 95% bootstrap
// interval (cases resampled with replacement, resamples draws from the PCG
// stream (seed, 2), sorted indices int(0.025*B) and min(int(0.975*B), B-1))
// and the two-sided sign-flip permutation p-value (hits+1)/(resamples+1)
// (stream (seed, 3); a tie with the observed statistic is a hit). deltas
// must hold at least one value; resamples <= 0 means DefaultResamples.
func Paired(deltas []float64, resamples int, seed uint64) PairedTest {
	if resamples <= 0 {
		resamples = DefaultResamples
	}
	obs := stat.Mean(deltas, nil)
	p := PairedTest{Cases: len(deltas), MeanDelta: obs}

	rng := rand.New(rand.NewPCG(seed, 2))
	boot := make([]float64, resamples)
	for i := range boot {
		boot[i] = resampleMean(deltas, rng)
	}
	sort.Float64s(boot)
	lo, hi := percentileIdx(resamples)
	p.CILow, p.CIHigh = boot[lo], boot[hi]

	rng = rand.New(rand.NewPCG(seed, 3))
	hits := 0
	const eps = 1e-12 // ties with the observed statistic count as hits
	for range resamples {
		s := 0.0
		for _, d := range deltas {
			if rng.IntN(2) == 0 {
				s -= d
			} else {
				s += d
			}
		}
		if math.Abs(s/float64(len(deltas))) >= math.Abs(obs)-eps {
			hits++
		}
	}
	p.PValue = float64(hits+1) / float64(resamples+1)
	return p
}

// Data is the data of a quality_drift envelope and drift span.
func Data(r Report) map[string]any {
	opt := func(p *float64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	d := map[string]any{
		"baseline_id": r.BaselineID,
		"window":      r.Window,
		"mean_score":  r.MeanScore,
		"delta":       r.Delta,
		"verdict":     r.Verdict,
		"baseline_n":  r.BaselineN,
		"t_statistic": opt(r.TStatistic),
		"ci_low":      opt(r.CILow),
		"ci_high":     opt(r.CIHigh),
		"seed":        fmt.Sprint(r.Seed),
		"significant": r.Significant,
	}
	if r.ChangedSet {
		d["changed_set"] = true
		d["changed_cases"] = r.ChangedCases
	}
	if r.ChangedSettings {
		d["changed_settings"] = true
	}
	if len(r.Skipped) > 0 {
		d["skipped_runs"] = len(r.Skipped)
	}
	return d
}

// Events returns the envelopes of a drift check: one quality_drift
// when the verdict is regressed, none when on-track. run_id is the
// baseline's run, so the event joins the run's trace.
func Events(r Report, agentID string, ts time.Time) []envelope.Event {
	if r.Verdict != VerdictRegressed {
		return nil
	}
	return []envelope.Event{envelope.New("quality_drift", agentID, r.BaselineRunID, Data(r), ts)}
}
