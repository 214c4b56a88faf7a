package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/outcome"
)

// Store is what the report reads from the eval store; *store.Store
// satisfies it. Every method only reads.
type Store interface {
	// RunsSince returns the runs started at or after since (zero: all),
	// oldest first, with their scores; checks only for the checksFor most
	// recent runs of each eval set and model (< 0: all).
	RunsSince(ctx context.Context, since time.Time, checksFor int) ([]grading.Run, error)
	// Baselines returns every baseline.
	Baselines(ctx context.Context) ([]drift.Baseline, error)
	// Run loads one run (a baseline's run started before since).
	Run(ctx context.Context, id string) (grading.Run, error)
	// AgentScores feeds the quality_floor SLI.
	AgentScores(ctx context.Context) (map[string][]float64, error)
}

// Input is everything a report is drawn from.
type Input struct {
	// Runs are the eval runs to show, any order.
	Runs []grading.Run
	// Baselines are every known baseline; BaselineRuns holds the runs
	// they snapshot (needed for drift checks) by run id. A baseline whose
	// run is missing from both Runs and BaselineRuns is shown as a rule but
	// checks nothing.
	Baselines    []drift.Baseline
	BaselineRuns map[string]grading.Run
	// Traces is the reduction of the trace calls; nil means no traces were
	// given and the cost and SLO sections say "not measured".
	Traces *outcome.Reducer
	// TraceSource names where the traces came from (a directory, the
	// worker's store), for the page.
	TraceSource string
	// AgentScores are the eval scores per agent id for quality_floor; nil
	// leaves quality_floor not measured.
	AgentScores map[string][]float64
	// Sources names the inputs (store path, trace directory) for the
	// provenance footer.
	Sources []string
	// Since is the --since cut, shown on the page; zero means none.
	Since time.Time
}

// Options tune the page. Zero values take the defaults.
type Options struct {
	// Version is the verdryx version that renders the page.
	Version string
	// Now is the generation time; zero means time.Now().
	Now time.Time
	// PassMark is the score a case must reach to pass in the grid; 0
	// means 1.0 (as eval's JUnit output).
	PassMark float64
	// GridRuns is the number of most recent runs per eval set and model in
	// the cases x runs grid; 0 means 30.
	GridRuns int
	// DriftChecks is the number of most recent runs per eval set and model
	// that get a drift check (and a CI band); 0 means 60. Each check is a
	// full bootstrap (drift.DefaultResamples), so this bounds the time.
	DriftChecks int
	// Threshold is the drift threshold; 0 means drift.DefaultThreshold.
	Threshold float64
	// SLO configures the SLO section; the zero value means
	// outcome.DefaultSLOOptions().
	SLO *outcome.SLOOptions
}

func (o Options) withDefaults() Options {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.PassMark <= 0 {
		o.PassMark = 1
	}
	if o.GridRuns <= 0 {
		o.GridRuns = 30
	}
	if o.DriftChecks <= 0 {
		o.DriftChecks = 60
	}
	if o.Threshold <= 0 {
		o.Threshold = drift.DefaultThreshold
	}
	if o.Version == "" {
		o.Version = "unknown"
	}
	return o
}

// Load reads the runs started at or after since, every baseline and the
// runs baselines snapshot, and the agent scores, from st. Checks (shown
// only in the grid) are read for the gridRuns most recent runs of each eval
// set and model; gridRuns <= 0 means the default of Options.GridRuns. Pass
// the same value as Options.GridRuns.
func Load(ctx context.Context, st Store, since time.Time, gridRuns int) (Input, error) {
	in := Input{Since: since, BaselineRuns: map[string]grading.Run{}}
	if gridRuns <= 0 {
		gridRuns = Options{}.withDefaults().GridRuns
	}
	var err error
	if in.Runs, err = st.RunsSince(ctx, since, gridRuns); err != nil {
		return Input{}, fmt.Errorf("report: load runs: %w", err)
	}
	if in.Baselines, err = st.Baselines(ctx); err != nil {
		return Input{}, fmt.Errorf("report: load baselines: %w", err)
	}
	have := make(map[string]bool, len(in.Runs))
	for i := range in.Runs {
		have[in.Runs[i].ID] = true
	}
	for _, b := range in.Baselines {
		if have[b.RunID] {
			continue
		}
		if _, ok := in.BaselineRuns[b.RunID]; ok {
			continue
		}
		r, err := st.Run(ctx, b.RunID)
		if err != nil {
			return Input{}, fmt.Errorf("report: baseline %s: load run %s: %w", b.ID, b.RunID, err)
		}
		in.BaselineRuns[b.RunID] = r
	}
	if in.AgentScores, err = st.AgentScores(ctx); err != nil {
		return Input{}, fmt.Errorf("report: load agent scores: %w", err)
	}
	return in, nil
}

// Cell states of the grid.
const (
	StatePass       = "pass"
	StateFail       = "fail"
	StateUnmeasured = "unmeasured"
	// StateUnanswered is a typed case typryx answered unanswered: counted
	// apart, never a fail.
	StateUnanswered = "unanswered"
	StateAbsent     = "absent"
)

// point is one run of a series.
type point struct {
	Run  *grading.Run
	Mean float64
	// Measured is false when the run graded no case.
	Measured bool
	Graded   int
	Check    *check // nil: no drift check for this run
}

// check is one drift check of a run against a baseline.
type check struct {
	Report   drift.Report
	Baseline drift.Baseline
	// Significant is the drift report's own verdict on significance (the
	// bootstrap CI below 0, or the paired test's p below alpha).
	Significant bool
	Regressed   bool
	// Err says why a run could not be checked (a changed eval set).
	Err string
}

// series is the runs of one eval set and model, oldest first.
type series struct {
	EvalSetID, Model string
	Points           []point
	Baselines        []drift.Baseline
	baseRuns         map[string]*grading.Run
}

func (s *series) key() string { return s.EvalSetID + " / " + s.Model }

// gridRow is one case of a series' grid.
type gridRow struct {
	CaseID  string
	Flipped bool
	Cells   []gridCell
}

type gridCell struct {
	State string
	Score *grading.Score
}

// grid is the cases x runs grid of one series.
type grid struct {
	Series *series
	Runs   []*grading.Run // oldest left, newest right
	Rows   []gridRow
}

// model is the computed page.
type model struct {
	opts    Options
	in      Input
	Series  []*series
	Grids   []grid
	Cost    *outcome.Report
	CostErr string
	SLO     *outcome.SLOReport
	SLOErr  string
}

// build groups the runs into series, runs the drift checks and lays out
// the grids, the cost and the SLO reports.
func build(ctx context.Context, in Input, opts Options) (*model, error) {
	m := &model{opts: opts, in: in}
	bySeries := map[[2]string]*series{}
	runs := make([]*grading.Run, len(in.Runs))
	for i := range in.Runs {
		runs[i] = &in.Runs[i]
	}
	slices.SortStableFunc(runs, func(a, b *grading.Run) int { return a.StartedAt.Compare(b.StartedAt) })
	for _, r := range runs {
		k := [2]string{r.EvalSetID, r.Model}
		s := bySeries[k]
		if s == nil {
			s = &series{EvalSetID: r.EvalSetID, Model: r.Model, baseRuns: map[string]*grading.Run{}}
			bySeries[k] = s
			m.Series = append(m.Series, s)
		}
		p := point{Run: r}
		if mean, ok := r.Mean(); ok {
			p.Mean, p.Measured = mean, true
		}
		p.Graded = len(r.Graded())
		s.Points = append(s.Points, p)
	}
	slices.SortFunc(m.Series, func(a, b *series) int {
		return cmp.Or(cmp.Compare(a.EvalSetID, b.EvalSetID), cmp.Compare(a.Model, b.Model))
	})
	runByID := map[string]*grading.Run{}
	for _, r := range runs {
		runByID[r.ID] = r
	}
	for id, r := range in.BaselineRuns {
		if _, ok := runByID[id]; !ok {
			r := r
			runByID[id] = &r
		}
	}
	for _, b := range in.Baselines {
		br := runByID[b.RunID]
		if br == nil {
			continue
		}
		if s := bySeries[[2]string{br.EvalSetID, br.Model}]; s != nil {
			s.Baselines = append(s.Baselines, b)
			s.baseRuns[b.ID] = br
		}
	}
	if err := m.driftChecks(ctx); err != nil {
		return nil, err
	}
	for _, s := range m.Series {
		m.Grids = append(m.Grids, layoutGrid(s, opts))
	}
	m.traces()
	return m, nil
}

// baselineFor picks the baseline a run is checked against: of the series'
// baselines whose run started before the run, the most recently created.
func (s *series) baselineFor(r *grading.Run) (drift.Baseline, *grading.Run, bool) {
	var best drift.Baseline
	var bestRun *grading.Run
	for _, b := range s.Baselines {
		br := s.baseRuns[b.ID]
		if br.ID == r.ID || !br.StartedAt.Before(r.StartedAt) {
			continue
		}
		if bestRun == nil || b.CreatedAt.After(best.CreatedAt) || (b.CreatedAt.Equal(best.CreatedAt) && b.ID > best.ID) {
			best, bestRun = b, br
		}
	}
	return best, bestRun, bestRun != nil
}

// driftChecks checks each of the DriftChecks most recent measured runs of
// every series against its baseline, as `verdryx drift --window 1` would
// (same default seed), spreading the checks over the CPUs.
func (m *model) driftChecks(ctx context.Context) error {
	type job struct {
		p   *point
		b   drift.Baseline
		br  *grading.Run
		out *check
	}
	var jobs []job
	for _, s := range m.Series {
		n := 0
		for i := len(s.Points) - 1; i >= 0 && n < m.opts.DriftChecks; i-- {
			p := &s.Points[i]
			if !p.Measured {
				continue
			}
			b, br, ok := s.baselineFor(p.Run)
			if !ok {
				continue
			}
			n++
			jobs = append(jobs, job{p: p, b: b, br: br})
		}
	}
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make([]error, len(jobs))
	for range min(runtime.GOMAXPROCS(0), max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := &jobs[i]
				seed := drift.DefaultSeed(j.b.ID, []string{j.p.Run.ID})
				rep, err := drift.Compute(j.b, *j.br, []grading.Run{*j.p.Run},
					drift.Options{Threshold: m.opts.Threshold, Seed: seed})
				c := &check{Baseline: j.b}
				switch {
				case errors.Is(err, drift.ErrChangedSet), errors.Is(err, drift.ErrChangedSettings):
					c.Err = err.Error()
				case err != nil:
					errs[i] = fmt.Errorf("report: drift check of run %s against baseline %s: %w", j.p.Run.ID, j.b.ID, err)
					continue
				default:
					c.Report = rep
					c.Regressed = rep.Verdict == drift.VerdictRegressed
					c.Significant = rep.Significant
				}
				j.out = c
			}
		}()
	}
	for i := range jobs {
		if err := ctx.Err(); err != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("report: drift checks: %w", err)
	}
	for i := range jobs {
		if errs[i] != nil {
			return errs[i]
		}
		jobs[i].p.Check = jobs[i].out
	}
	return nil
}

// cellState classifies a case score against the pass mark.
func cellState(sc *grading.Score, passMark float64) string {
	switch {
	case sc == nil:
		return StateAbsent
	case sc.Unanswered():
		return StateUnanswered
	case !sc.Graded():
		return StateUnmeasured
	case sc.Value >= passMark:
		return StatePass
	}
	return StateFail
}

// layoutGrid lays out the GridRuns most recent runs of s. Rows are the
// cases of those runs: the ones whose state differs between the last two
// runs (flipped) first, then the rest, each group in the newest run's case
// order (cases absent from it after, by id).
func layoutGrid(s *series, opts Options) grid {
	from := max(0, len(s.Points)-opts.GridRuns)
	g := grid{Series: s}
	for _, p := range s.Points[from:] {
		g.Runs = append(g.Runs, p.Run)
	}
	order := map[string]int{}
	var ids []string
	byRun := make([]map[string]*grading.Score, len(g.Runs))
	for i, r := range g.Runs {
		byRun[i] = make(map[string]*grading.Score, len(r.Scores))
		for j := range r.Scores {
			sc := &r.Scores[j]
			byRun[i][sc.CaseID] = sc
			if _, ok := order[sc.CaseID]; !ok {
				order[sc.CaseID] = len(ids)
				ids = append(ids, sc.CaseID)
			}
		}
	}
	rank := map[string]int{}
	if n := len(g.Runs); n > 0 {
		for j, sc := range g.Runs[n-1].Scores {
			rank[sc.CaseID] = j
		}
	}
	for _, id := range ids {
		row := gridRow{CaseID: id}
		for i := range g.Runs {
			sc := byRun[i][id]
			row.Cells = append(row.Cells, gridCell{State: cellState(sc, opts.PassMark), Score: sc})
		}
		if n := len(row.Cells); n >= 2 && row.Cells[n-1].State != row.Cells[n-2].State {
			row.Flipped = true
		}
		g.Rows = append(g.Rows, row)
	}
	sort.SliceStable(g.Rows, func(a, b int) bool {
		ra, rb := g.Rows[a], g.Rows[b]
		if ra.Flipped != rb.Flipped {
			return ra.Flipped
		}
		ia, oka := rank[ra.CaseID]
		ib, okb := rank[rb.CaseID]
		switch {
		case oka && okb:
			return ia < ib
		case oka != okb:
			return oka
		}
		return ra.CaseID < rb.CaseID
	})
	return g
}

// traces computes the cost-per-outcome and SLO reports.
func (m *model) traces() {
	if m.in.Traces == nil {
		return
	}
	rep, err := m.in.Traces.CheckedReport()
	if err != nil {
		m.CostErr = err.Error()
	} else {
		m.Cost = rep
	}
	sopts := outcome.DefaultSLOOptions()
	if m.opts.SLO != nil {
		sopts = *m.opts.SLO
	}
	if m.in.AgentScores != nil && sopts.Scores == nil {
		sopts.Scores = m.in.AgentScores
	}
	slo, err := m.in.Traces.SLO(sopts, envelope.ValidAgentID)
	if err != nil {
		m.SLOErr = err.Error()
		return
	}
	m.SLO = slo
}
