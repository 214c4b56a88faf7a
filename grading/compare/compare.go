package compare

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
)

// Verdicts of a model tested against the best.
const (
	// VerdictBest is the best model's own row.
	VerdictBest = "best"
	// VerdictBetter and VerdictWorse: the paired difference is
	// significant at Alpha after Holm's correction.
	VerdictBetter = "better"
	VerdictWorse  = "worse"
	// VerdictSame: the difference is not significant. It does not show the
	// models equal; the interval says how large a difference stays
	// possible.
	VerdictSame = "not distinguishable"
	// VerdictTooFew: fewer than MinPairs cases measured by both; no
	// verdict is given.
	VerdictTooFew = "too few cases"
	// VerdictUnmeasured: the model measured no case.
	VerdictUnmeasured = "unmeasured"
)

// Case states in a disagreement.
const (
	StatePass       = "pass"
	StateFail       = "fail"
	StateUnmeasured = "unmeasured"
)

// Defaults.
const (
	DefaultAlpha = drift.DefaultAlpha
	// DefaultMinPairs is the fewest cases measured by both models that a
	// verdict is given on. With binary scores only the cases where the
	// two disagree carry information, and a two-sided sign-flip test
	// needs at least 6 of them, all one way, to reach p < 0.05; under 10
	// paired cases the interval of the difference is wider than most
	// differences worth routing on.
	DefaultMinPairs = 10
	// WideInterval is the width of the difference's 95% interval above
	// which a "not distinguishable" verdict carries a note: the set is too
	// small to tell apart differences of that size.
	WideInterval = 0.2
)

// Options tune Compute. Zero values take the defaults.
type Options struct {
	// Alpha is the family-wise significance level of the tests; it must
	// be in (0, 1); 0 means DefaultAlpha.
	Alpha float64
	// PassMark is the score a case must reach to be correct; 0 means 1.
	PassMark float64
	// MinPairs is the fewest paired cases a verdict is given on; 0 means
	// DefaultMinPairs.
	MinPairs int
	// Resamples of each bootstrap and permutation test; 0 means
	// drift.DefaultResamples.
	Resamples int
	// Seed, when not nil, drives every draw; nil derives one from the run
	// ids, so the same runs give the same report.
	Seed *uint64
}

// Model is one model's row of the table.
type Model struct {
	Model string `json:"model"`
	RunID string `json:"run_id"`
	// Reused is set by the caller for a run it did not grade for this
	// comparison (a stored run, no call made).
	Reused bool `json:"reused"`
	// Judge graded its llm_judge cases ("" when the set has none).
	Judge string `json:"judge,omitempty"`
	// Mean over the measured cases, with its 95% bootstrap interval; nil
	// when no case was measured (the interval also with one).
	Mean   *float64 `json:"mean"`
	CILow  *float64 `json:"ci_low"`
	CIHigh *float64 `json:"ci_high"`
	Cases  int      `json:"cases"`
	// Measured and Unmeasured split Cases; Passed counts the measured
	// cases at or above the pass mark (the correct answers).
	Measured   int `json:"measured"`
	Unmeasured int `json:"unmeasured"`
	Passed     int `json:"passed"`
	// SpendUSD is what every case cost, unmeasured ones included.
	SpendUSD float64 `json:"spend_usd"`
	// CostPerCorrectUSD is SpendUSD / Passed; nil when no case passed
	// (no correct answer: infinitely dear).
	CostPerCorrectUSD *float64 `json:"cost_per_correct_usd"`
	Tokens            int64    `json:"tokens"`
	// LatencyP50MS and LatencyP95MS are nearest-rank percentiles of the
	// cases' wall times (the model call plus grading), in milliseconds.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP95MS float64 `json:"latency_p95_ms"`
	// Unpriced lists the models its run called that have no price: their
	// calls count $0, so its spend is a lower bound.
	Unpriced []string `json:"unpriced,omitempty"`
	// Verdict is its test against the best (VerdictBest for the best).
	Verdict string `json:"verdict"`
	// OnFrontier: no other model is at least as good and at most as dear
	// per correct answer, and strictly one of them.
	OnFrontier bool `json:"on_frontier"`
}

// Test is one model tested against the best, paired on the cases both
// measured: the difference is the model's score minus the best's.
type Test struct {
	Model   string `json:"model"`
	Against string `json:"against"`
	Pairs   int    `json:"pairs"`
	// MeanDelta and its 95% paired bootstrap interval; the interval is
	// set with at least 2 pairs.
	MeanDelta float64  `json:"mean_delta"`
	CILow     *float64 `json:"ci_low"`
	CIHigh    *float64 `json:"ci_high"`
	// PValue is the two-sided sign-flip p-value; AdjustedP its Holm
	// adjustment across the tests that have a verdict. Both nil for
	// VerdictTooFew.
	PValue    *float64 `json:"p_value"`
	AdjustedP *float64 `json:"adjusted_p"`
	Verdict   string   `json:"verdict"`
	// Note qualifies the verdict (too few pairs, a wide interval).
	Note string `json:"note,omitempty"`
}

// Recommendation is the routing candidate: the cheapest model per
// correct answer that is not distinguishable from the best (or better,
// or the best itself).
type Recommendation struct {
	// Candidate is "" when no model answered a case correctly.
	Candidate string `json:"candidate"`
	Best      string `json:"best"`
	// CandidateCostPerCorrectUSD and BestCostPerCorrectUSD; nil when
	// infinite.
	CandidateCostPerCorrectUSD *float64 `json:"candidate_cost_per_correct_usd"`
	BestCostPerCorrectUSD      *float64 `json:"best_cost_per_correct_usd"`
	// SavingPerCorrectUSD is the best's cost per correct answer minus the
	// candidate's (0 when the best is the candidate); SavingPct is it as
	// a percentage of the best's. Nil when the best's is infinite.
	SavingPerCorrectUSD *float64 `json:"saving_per_correct_usd"`
	SavingPct           *float64 `json:"saving_pct"`
	// Why says how the candidate was chosen: the models considered, those
	// left out and why, and any tie on cost and how it was broken.
	Why []string `json:"why"`
}

// Answer is one model's answer to a case where the models disagree.
type Answer struct {
	Model string   `json:"model"`
	State string   `json:"state"`
	Value *float64 `json:"value"`
	// Output is the model's answer; Failed lists each failed check with
	// its detail, or why the case was not measured.
	Output string   `json:"output"`
	Failed []string `json:"failed,omitempty"`
}

// Disagreement is a case that at least one model passed and another
// failed (a measured score under the pass mark), with every model's answer.
type Disagreement struct {
	CaseID  string   `json:"case_id"`
	Answers []Answer `json:"answers"`
}

// Report is one comparison.
type Report struct {
	ComparisonID  string  `json:"comparison_id,omitempty"`
	EvalSetID     string  `json:"eval_set_id"`
	EvalSetDigest string  `json:"eval_set_digest"`
	Alpha         float64 `json:"alpha"`
	PassMark      float64 `json:"pass_mark"`
	MinPairs      int     `json:"min_pairs"`
	Resamples     int     `json:"resamples"`
	Seed          uint64  `json:"seed,string"`
	// Models are the table's rows in the order the runs were given.
	Models []Model `json:"models"`
	// Best is the model with the highest mean ("" when none measured a
	// case); Tests test every other model against it, in Models order.
	Best  string `json:"best"`
	Tests []Test `json:"tests"`
	// Frontier names the models on the quality-cost frontier, cheapest
	// per correct answer first.
	Frontier       []string       `json:"frontier"`
	Recommendation Recommendation `json:"recommendation"`
	Disagreements  []Disagreement `json:"disagreements"`
	// Notes are warnings about the whole comparison (judges that differ,
	// unpriced models, ties).
	Notes []string `json:"notes,omitempty"`
}

// ErrInput marks runs that cannot be compared: fewer than two, two of
// one model, or runs of different eval sets.
var ErrInput = errors.New("compare")

// Compute compares runs (one per model, of one eval set digest). The
// best is the highest mean; a tie on the mean goes to the lower cost per
// correct answer, then the model id, and a note says so.
func Compute(runs []grading.Run, opts Options) (Report, error) {
	if err := checkRuns(runs); err != nil {
		return Report{}, err
	}
	opts = withDefaults(opts)
	ids := make([]string, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
	}
	seed := drift.DefaultSeed("compare", ids)
	if opts.Seed != nil {
		seed = *opts.Seed
	}
	rep := Report{
		EvalSetID: runs[0].EvalSetID, EvalSetDigest: runs[0].EvalSetDigest,
		Alpha: opts.Alpha, PassMark: opts.PassMark, MinPairs: opts.MinPairs, Resamples: opts.Resamples, Seed: seed,
	}
	for i := range runs {
		rep.Models = append(rep.Models, row(&runs[i], opts, seed+uint64(i)))
	}
	best := bestIndex(rep.Models)
	if best < 0 {
		rep.Notes = append(rep.Notes, "no model measured a case: nothing to compare")
		for i := range rep.Models {
			rep.Models[i].Verdict = VerdictUnmeasured
		}
		rep.Recommendation.Why = []string{"no model measured a case"}
		rep.Disagreements = []Disagreement{}
		rep.Frontier = []string{}
		rep.Tests = []Test{}
		return rep, nil
	}
	rep.Best = rep.Models[best].Model
	rep.Models[best].Verdict = VerdictBest
	rep.Notes = append(rep.Notes, tieNotes(rep.Models, best)...)
	rep.Tests = tests(runs, rep.Models, best, opts, seed)
	for _, t := range rep.Tests {
		for i := range rep.Models {
			if rep.Models[i].Model == t.Model {
				rep.Models[i].Verdict = t.Verdict
			}
		}
	}
	rep.Frontier = frontier(rep.Models)
	for i := range rep.Models {
		rep.Models[i].OnFrontier = slices.Contains(rep.Frontier, rep.Models[i].Model)
	}
	rep.Recommendation = recommend(rep.Models, best)
	rep.Disagreements = disagreements(runs, opts.PassMark)
	rep.Notes = append(rep.Notes, runNotes(rep.Models)...)
	return rep, nil
}

func withDefaults(o Options) Options {
	if o.Alpha <= 0 || o.Alpha >= 1 {
		o.Alpha = DefaultAlpha
	}
	if o.PassMark <= 0 {
		o.PassMark = 1
	}
	if o.MinPairs <= 0 {
		o.MinPairs = DefaultMinPairs
	}
	if o.Resamples <= 0 {
		o.Resamples = drift.DefaultResamples
	}
	return o
}

func checkRuns(runs []grading.Run) error {
	if len(runs) < 2 {
		return fmt.Errorf("%w: want runs of at least two models, have %d", ErrInput, len(runs))
	}
	seen := map[string]string{}
	for _, r := range runs {
		if prev, ok := seen[r.Model]; ok {
			return fmt.Errorf("%w: runs %s and %s are both of model %s: compare one run per model", ErrInput, prev, r.ID, r.Model)
		}
		seen[r.Model] = r.ID
		if r.EvalSetDigest == "" {
			return fmt.Errorf("%w: run %s records no eval set digest (the Python verdryx's): its cases cannot be matched", ErrInput, r.ID)
		}
		if r.EvalSetDigest != runs[0].EvalSetDigest {
			return fmt.Errorf("%w: run %s graded eval set %s (%s), run %s graded %s (%s): compare runs of one eval set", ErrInput,
				runs[0].ID, runs[0].EvalSetID, short(runs[0].EvalSetDigest), r.ID, r.EvalSetID, short(r.EvalSetDigest))
		}
	}
	return nil
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// row is a run's figures.
func row(r *grading.Run, opts Options, seed uint64) Model {
	m := Model{Model: r.Model, RunID: r.ID, Judge: r.Judge, Cases: len(r.Scores), Unpriced: r.Provenance.Unpriced}
	vals := make([]float64, 0, len(r.Scores))
	durs := make([]time.Duration, 0, len(r.Scores))
	micro := int64(0)
	for _, s := range r.Scores {
		micro += int64(math.Round(s.CostUSD * 1e6))
		m.Tokens += s.Tokens
		if s.Duration > 0 {
			durs = append(durs, s.Duration)
		}
		if !s.Graded() {
			continue
		}
		vals = append(vals, s.Value)
		if s.Value >= opts.PassMark {
			m.Passed++
		}
	}
	m.SpendUSD = float64(micro) / 1e6
	m.Measured, m.Unmeasured = len(vals), len(r.Scores)-len(vals)
	if m.Passed > 0 {
		c := m.SpendUSD / float64(m.Passed)
		m.CostPerCorrectUSD = &c
	}
	if len(vals) > 0 {
		sum := 0.0
		for _, v := range vals {
			sum += v
		}
		mean := sum / float64(len(vals))
		m.Mean = &mean
	}
	if len(vals) >= 2 {
		lo, hi := meanCI(vals, opts.Resamples, seed)
		m.CILow, m.CIHigh = &lo, &hi
	}
	slices.Sort(durs)
	m.LatencyP50MS, m.LatencyP95MS = percentileMS(durs, 0.50), percentileMS(durs, 0.95)
	return m
}

// meanCI is the 95% percentile bootstrap interval of the mean of xs.
func meanCI(xs []float64, resamples int, seed uint64) (float64, float64) {
	rng := rand.New(rand.NewPCG(seed, 4))
	means := make([]float64, resamples)
	n := len(xs)
	for i := range means {
		s := 0.0
		for range n {
			s += xs[rng.IntN(n)]
		}
		means[i] = s / float64(n)
	}
	sort.Float64s(means)
	lo, hi := int(0.025*float64(resamples)), min(int(0.975*float64(resamples)), resamples-1)
	return means[lo], means[hi]
}

// percentileMS is the nearest-rank percentile q of sorted durations, in
// milliseconds; 0 with none.
func percentileMS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return float64(sorted[k]) / 1e6
}

// cost is a model's cost per correct answer, +Inf when none passed.
func cost(m Model) float64 {
	if m.CostPerCorrectUSD == nil {
		return math.Inf(1)
	}
	return *m.CostPerCorrectUSD
}

// bestIndex is the model with the highest mean, then the lowest cost per
// correct answer, then the smallest id; -1 when none is measured.
func bestIndex(ms []Model) int {
	best := -1
	for i, m := range ms {
		if m.Mean == nil {
			continue
		}
		if best < 0 || better(m, ms[best]) {
			best = i
		}
	}
	return best
}

func better(a, b Model) bool {
	if *a.Mean != *b.Mean {
		return *a.Mean > *b.Mean
	}
	if ca, cb := cost(a), cost(b); ca != cb {
		return ca < cb
	}
	return a.Model < b.Model
}

func tieNotes(ms []Model, best int) []string {
	var tied []string
	for i, m := range ms {
		if i != best && m.Mean != nil && *m.Mean == *ms[best].Mean {
			tied = append(tied, m.Model)
		}
	}
	if len(tied) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("best: %s ties %s on the mean (%.4f); the tie goes to the lower cost per correct answer, then the model id",
		ms[best].Model, strings.Join(tied, ", "), *ms[best].Mean)}
}

// tests tests every measured model against the best, paired on the cases
// both measured, Holm-adjusting the p-values of those with enough pairs.
func tests(runs []grading.Run, ms []Model, best int, opts Options, seed uint64) []Test {
	bestVals := map[string]float64{}
	for _, s := range runs[best].Scores {
		if s.Graded() {
			bestVals[s.CaseID] = s.Value
		}
	}
	out := []Test{}
	var family []int // indexes into out with a p-value
	var ps []float64
	for i := range runs {
		if i == best {
			continue
		}
		t := Test{Model: ms[i].Model, Against: ms[best].Model}
		if ms[i].Mean == nil {
			t.Verdict = VerdictUnmeasured
			t.Note = "measured no case"
			out = append(out, t)
			continue
		}
		var deltas []float64
		for _, s := range runs[i].Scores {
			if b, ok := bestVals[s.CaseID]; ok && s.Graded() {
				deltas = append(deltas, s.Value-b)
			}
		}
		t.Pairs = len(deltas)
		if len(deltas) > 0 {
			p := drift.Paired(deltas, opts.Resamples, seed^uint64(i+1)*0x9e3779b97f4a7c15)
			t.MeanDelta = p.MeanDelta
			if len(deltas) >= 2 {
				t.CILow, t.CIHigh = &p.CILow, &p.CIHigh
			}
			if len(deltas) >= opts.MinPairs {
				t.PValue = &p.PValue
				family = append(family, len(out))
				ps = append(ps, p.PValue)
			}
		}
		if len(deltas) < opts.MinPairs {
			t.Verdict = VerdictTooFew
			t.Note = fmt.Sprintf("%d cases measured by both, fewer than %d: no verdict (a larger set is needed)", len(deltas), opts.MinPairs)
		}
		out = append(out, t)
	}
	adj := Holm(ps)
	for k, j := range family {
		t := &out[j]
		a := adj[k]
		t.AdjustedP = &a
		switch {
		case a < opts.Alpha && t.MeanDelta > 0:
			t.Verdict = VerdictBetter
		case a < opts.Alpha && t.MeanDelta < 0:
			t.Verdict = VerdictWorse
		default:
			t.Verdict = VerdictSame
			if t.CILow != nil && *t.CIHigh-*t.CILow > WideInterval {
				t.Note = fmt.Sprintf("wide interval [%+.3f, %+.3f] over %d pairs: differences of that size cannot be told apart on this set", *t.CILow, *t.CIHigh, t.Pairs)
			}
		}
	}
	return out
}

// Holm returns Holm's step-down adjustment of the p-values ps, in their
// order: sorted ascending p(1) <= ... <= p(m), the adjusted value of p(k)
// is max over j <= k of min(1, (m-j+1) p(j)). A hypothesis is rejected at
// family-wise level alpha when its adjusted value is below alpha.
func Holm(ps []float64) []float64 {
	m := len(ps)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ps[order[a]] < ps[order[b]] })
	out := make([]float64, m)
	run := 0.0
	for k, i := range order {
		v := math.Min(1, float64(m-k)*ps[i])
		run = math.Max(run, v)
		out[i] = run
	}
	return out
}

// frontier names the measured models no other dominates (at least as
// good a mean and at most the cost per correct answer, strictly better
// in one), cheapest first, then by mean, then id.
func frontier(ms []Model) []string {
	var on []Model
	for i, m := range ms {
		if m.Mean == nil {
			continue
		}
		dominated := false
		for j, n := range ms {
			if i == j || n.Mean == nil {
				continue
			}
			if *n.Mean >= *m.Mean && cost(n) <= cost(m) && (*n.Mean > *m.Mean || cost(n) < cost(m)) {
				dominated = true
				break
			}
		}
		if !dominated {
			on = append(on, m)
		}
	}
	slices.SortFunc(on, func(a, b Model) int {
		return cmp.Or(cmp.Compare(cost(a), cost(b)), cmp.Compare(*b.Mean, *a.Mean), cmp.Compare(a.Model, b.Model))
	})
	names := make([]string, len(on))
	for i, m := range on {
		names[i] = m.Model
	}
	return names
}

// recommend picks the cheapest per correct answer of the best and the
// models better than or not distinguishable from it; a tie on cost goes
// to the higher mean, then the model id, and Why says so.
func recommend(ms []Model, best int) Recommendation {
	r := Recommendation{Best: ms[best].Model, BestCostPerCorrectUSD: ms[best].CostPerCorrectUSD}
	var eligible []Model
	var left []string
	for _, m := range ms {
		switch m.Verdict {
		case VerdictBest, VerdictBetter, VerdictSame:
			eligible = append(eligible, m)
		default:
			left = append(left, fmt.Sprintf("%s (%s)", m.Model, m.Verdict))
		}
	}
	names := make([]string, len(eligible))
	for i, m := range eligible {
		names[i] = m.Model
	}
	r.Why = append(r.Why, "considered: "+strings.Join(names, ", ")+" (the best and the models not distinguishable from it)")
	if len(left) > 0 {
		r.Why = append(r.Why, "left out: "+strings.Join(left, ", "))
	}
	slices.SortFunc(eligible, func(a, b Model) int {
		return cmp.Or(cmp.Compare(cost(a), cost(b)), cmp.Compare(*b.Mean, *a.Mean), cmp.Compare(a.Model, b.Model))
	})
	c := eligible[0]
	if math.IsInf(cost(c), 1) {
		r.Why = append(r.Why, "no model considered answered a case correctly: no candidate")
		return r
	}
	r.Candidate, r.CandidateCostPerCorrectUSD = c.Model, c.CostPerCorrectUSD
	var tied []string
	for _, m := range eligible[1:] {
		if cost(m) == cost(c) {
			tied = append(tied, fmt.Sprintf("%s (mean %.4f)", m.Model, *m.Mean))
		}
	}
	if len(tied) > 0 {
		r.Why = append(r.Why, fmt.Sprintf("tie on cost per correct answer ($%.6f) with %s: broken by quality, %s has the higher mean %.4f (then the model id)",
			cost(c), strings.Join(tied, ", "), c.Model, *c.Mean))
	}
	if b := ms[best].CostPerCorrectUSD; b != nil {
		s := *b - cost(c)
		r.SavingPerCorrectUSD = &s
		if *b > 0 {
			pct := 100 * s / *b
			r.SavingPct = &pct
		}
	}
	if c.Model == ms[best].Model {
		r.Why = append(r.Why, "the best is also the cheapest per correct answer of those considered")
	}
	return r
}

// disagreements lists the cases some model passed and another failed, in
// the first run's case order.
func disagreements(runs []grading.Run, passMark float64) []Disagreement {
	byCase := make([]map[string]*grading.Score, len(runs))
	for i := range runs {
		byCase[i] = make(map[string]*grading.Score, len(runs[i].Scores))
		for j := range runs[i].Scores {
			byCase[i][runs[i].Scores[j].CaseID] = &runs[i].Scores[j]
		}
	}
	out := []Disagreement{}
	for _, s0 := range runs[0].Scores {
		pass, fail := false, false
		for i := range runs {
			s := byCase[i][s0.CaseID]
			if s == nil || !s.Graded() {
				continue
			}
			if s.Value >= passMark {
				pass = true
			} else {
				fail = true
			}
		}
		if !pass || !fail {
			continue
		}
		d := Disagreement{CaseID: s0.CaseID}
		for i := range runs {
			d.Answers = append(d.Answers, answer(runs[i].Model, byCase[i][s0.CaseID], passMark))
		}
		out = append(out, d)
	}
	return out
}

func answer(model string, s *grading.Score, passMark float64) Answer {
	a := Answer{Model: model, State: StateUnmeasured}
	if s == nil {
		a.Failed = []string{"no score for this case"}
		return a
	}
	a.Output = s.Output
	if !s.Graded() {
		a.Failed = []string{"unmeasured: " + s.Unmeasured}
		return a
	}
	v := s.Value
	a.Value = &v
	a.State = StateFail
	if v >= passMark {
		a.State = StatePass
	}
	for _, ch := range s.Checks {
		if !ch.OK {
			line := ch.Name
			if ch.Detail != "" {
				line += ": " + ch.Detail
			}
			a.Failed = append(a.Failed, line)
		}
	}
	return a
}

// runNotes warns about what weakens the comparison: models judged by
// different judges, unpriced calls.
func runNotes(ms []Model) []string {
	var notes []string
	judges := map[string]bool{}
	for _, m := range ms {
		if m.Judge != "" {
			judges[m.Judge] = true
		}
	}
	if len(judges) > 1 {
		notes = append(notes, "the llm_judge cases were judged by different judges (with no --judge each model judges its own answers); pass --judge to judge every model alike")
	}
	for _, m := range ms {
		if len(m.Unpriced) > 0 {
			notes = append(notes, fmt.Sprintf("%s: no price for %s, counted $0: its spend and cost per correct answer are lower bounds (give prices with --prices)",
				m.Model, strings.Join(m.Unpriced, ", ")))
		}
	}
	return notes
}
