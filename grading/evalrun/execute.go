package evalrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
)

// Store is what Execute needs from the eval store (store.Store implements
// it).
type Store interface {
	SaveRun(ctx context.Context, run grading.Run) error
	Run(ctx context.Context, id string) (grading.Run, error)
	// Baseline loads a baseline by id or label (store.Store resolves
	// both; an id wins).
	Baseline(ctx context.Context, idOrLabel string) (drift.Baseline, error)
	RecentRuns(ctx context.Context, evalSetID, model string, n int, exclude ...string) ([]grading.Run, error)
	// RecentRunsWhere is RecentRuns taking only the runs keep accepts
	// (given each candidate's id and settings, most recent first).
	RecentRunsWhere(ctx context.Context, evalSetID, model string, n int, keep func(id string, settings *grading.Settings) bool, exclude ...string) ([]grading.Run, error)
}

// EventSink takes envelopes (producer.File and producer.NATSChain
// implement it). Append returns false with a nil error for an event it
// skipped (no agent id). It may block until the event is durable or ctx
// is done.
type EventSink interface {
	Append(ctx context.Context, ev envelope.Event) (bool, error)
}

// SpanSink records one finished span per eval run and drift check
// (producer.Spans implements it). It must not block on the network. A sink
// that is also a grading.RunTracer records the eval run live, with its cases and
// model calls, instead of one finished span after it.
type SpanSink interface {
	Span(ctx context.Context, name, runID, agentID string, start, end time.Time, data map[string]any)
}

// Request is one eval request: from the CLI or from an eval-request
// message on the bus.
type Request struct {
	// RequestID is the caller's id for deduplication; stored with the run.
	RequestID string `json:"request_id,omitempty"`
	// EvalSetPath or EvalSet (inline JSON) names the set; exactly one.
	EvalSetPath string          `json:"eval_set_path,omitempty"`
	EvalSet     json.RawMessage `json:"eval_set,omitempty"`
	// Set is an already loaded set (in-process callers that validated it
	// first); it wins over EvalSetPath and EvalSet. Not serialised.
	Set *grading.EvalSet `json:"-"`
	// Model is "stub" or a provider model id; "" means stub.
	Model   string `json:"model,omitempty"`
	AgentID string `json:"agent_id,omitempty"`
	// BaselineID (a baseline id or label), when set, runs a drift check
	// after the run over the
	// Window most recent runs (0 means 1: the new run alone).
	BaselineID      string  `json:"baseline_id,omitempty"`
	Window          int     `json:"window,omitempty"`
	Threshold       float64 `json:"threshold,omitempty"`
	AllowChangedSet bool    `json:"allow_changed_set,omitempty"`
	// AllowChangedSettings pools runs graded under other settings than
	// the baseline's run (DriftRequest.AllowChangedSettings).
	AllowChangedSettings bool `json:"allow_changed_settings,omitempty"`
	// Seed fixes the drift check's random draws; nil derives one from the
	// baseline and window run ids (recorded in the report either way).
	Seed *uint64 `json:"seed,omitempty"`
	// Alpha is the drift check's significance level (0: drift.DefaultAlpha).
	Alpha float64 `json:"alpha,omitempty"`
	// MaxCostUSD caps the priced spend of the run's paid calls (model and
	// judges), in US dollars; 0 means no cap. Once the spend reaches it no
	// further paid call is made and the remaining cases are unmeasured
	// with reason llm.ReasonCostLimit (llm.Budget states the bound). A
	// capped run whose model or judge has no price is refused.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Semantic adds the faithfulness and answer_relevance checks to every
	// rag case (as "semantic": true on the eval set does).
	Semantic bool `json:"semantic,omitempty"`
	// RunID, when set, is the new run's id (an in-process caller that
	// prints it before grading); "" makes one. Not serialised.
	RunID string `json:"-"`
	// ComparisonID, when set, is recorded on the run: the model
	// comparison it is graded for (Compare). Not serialised.
	ComparisonID string `json:"-"`
}

// Deps are the collaborators of Execute. Store, Events and Spans may be nil
// (nothing saved, no events, no spans); a drift check needs a Store.
type Deps struct {
	Store  Store
	Events EventSink
	Spans  SpanSink
	// Models resolves a model id to the model under evaluation; nil
	// accepts only "stub".
	Models func(id string) (llm.Model, error)
	// Judge grades llm_judge cases; nil uses the stub judge.
	Judge *grader.Judge
	// Typed grades typed cases with typryx; nil refuses a set that has
	// one (grading.ErrBadRequest): no typed case is graded unless the caller
	// enabled typryx.
	Typed *grading.Typed
	// Semantic judges the faithfulness and answer_relevance checks of rag
	// cases when the request or the set asks for them (Request.Semantic,
	// "semantic": true); nil uses the stub's lexical stand-in at
	// grader.DefaultSemanticThreshold. Its model's paid calls count
	// against the request's cap.
	Semantic *grader.Semantic
	// RAG builds the pipeline that answers rag cases for a set's corpus
	// and a model; nil uses the offline pipeline for the stub model and
	// leaves rag cases unmeasured for any other.
	RAG func(ctx context.Context, corpusPath string, model llm.Model) (grading.RAGAsker, error)
	// Concurrency bounds cases in flight; <= 0 means 4.
	Concurrency int
	Prices      llm.PriceBook
	Version     string
	Now         func() time.Time
	Logger      *slog.Logger
	// OnCase, when set, is called as each case finishes (see grading.Runner.OnCase).
	OnCase func(i int, s grading.Score)
	// ReadFile, when set, reads every file a request names (eval set,
	// corpus, golden) instead of os.ReadFile; the worker passes a
	// confine.Reader so nothing outside its roots is read. With ReadFile
	// set and RAG nil, rag cases are answered from the corpus already read
	// through it, so no file is opened twice.
	ReadFile grading.ReadFileFunc
}

// Result is what Execute did. It is JSON-serialisable.
type Result struct {
	Run   grading.RunSummary `json:"run"`
	Drift *drift.Report      `json:"drift,omitempty"`
	// Saved is true when the run is in the store.
	Saved         bool     `json:"saved"`
	EventsWritten int      `json:"events_written"`
	EventsSkipped int      `json:"events_skipped"`
	Problems      []string `json:"problems,omitempty"`
	// traced is true when the run's span was recorded live while grading
	// (Deps.Spans is a grading.RunTracer): Spans then records only the drift check.
	traced bool
}

// Plan is a validated eval request, ready to grade: every check that can
// refuse the request as sent (the eval set, the model, the baseline) has
// passed, and nothing has been stored or emitted.
type Plan struct {
	deps   Deps
	req    Request
	set    *grading.EvalSet
	runner *grading.Runner
	// typed is Deps.Typed when the set has typed cases, else nil.
	typed  *grading.Typed
	logger *slog.Logger
	now    func() time.Time
	// meter wraps every model of the plan: the request's cap, or a budget
	// without a limit (it records paid calls once the plan is Resumed).
	meter *llm.Budget
}

// Prepare validates req and builds what grading it needs. Request mistakes
// wrap grading.ErrBadRequest; typryx failing to list the typed template wraps
// grading.ErrTypedService; nothing is stored and no question is asked.
func Prepare(ctx context.Context, deps Deps, req Request) (*Plan, error) {
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	set, err := loadRequestSet(req, deps.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
	}
	modelID := req.Model
	if modelID == "" {
		modelID = llm.StubID
	}
	var model llm.Model
	switch {
	case deps.Models != nil:
		model, err = deps.Models(modelID)
	case modelID == llm.StubID:
		model = &llm.Stub{}
	default:
		err = fmt.Errorf("unknown model %q (only stub is configured)", modelID)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
	}
	if req.BaselineID != "" {
		if deps.Store == nil {
			return nil, fmt.Errorf("%w: drift against %s needs a store", grading.ErrBadRequest, req.BaselineID)
		}
		if _, err := deps.Store.Baseline(ctx, req.BaselineID); err != nil {
			return nil, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
		}
	}
	var typed *grading.Typed
	if set.HasTyped() {
		if deps.Typed == nil {
			return nil, fmt.Errorf("%w: eval set %s has typed cases, and typryx is not enabled here (give --typed-url to eval or serve)", grading.ErrBadRequest, set.ID)
		}
		typed = deps.Typed
	}
	judge := deps.Judge
	if judge == nil {
		judge = &grader.Judge{Model: &llm.Stub{}, Prices: deps.Prices}
	}
	semantic := deps.Semantic
	if semantic == nil {
		semantic = &grader.Semantic{Model: &llm.Stub{}, Prices: deps.Prices}
	}
	capped := []llm.Model{model, judge.Model}
	if req.Semantic || set.Semantic {
		capped = append(capped, semantic.Model)
	}
	budget, err := newBudget(req.MaxCostUSD, deps.Prices, capped...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
	}
	meter := budget
	if meter == nil {
		meter = llm.NewMeter(deps.Prices)
	}
	model = meter.Wrap(model)
	judge = &grader.Judge{Model: meter.Wrap(judge.Model), Prices: judge.Prices}
	semantic = &grader.Semantic{Model: meter.Wrap(semantic.Model), Prices: semantic.Prices, Threshold: semantic.Threshold}
	runner := &grading.Runner{Model: model, Judge: judge, Concurrency: deps.Concurrency, Prices: deps.Prices,
		Semantic: semantic, SemanticAll: req.Semantic,
		Budget: budget, Version: deps.Version, Now: now, Logger: logger, OnCase: deps.OnCase}
	if typed != nil {
		// Lists the template before anything else is built that could fail.
		if err := runner.UseTyped(ctx, typed, set); err != nil {
			return nil, err
		}
	}
	if rt, ok := deps.Spans.(grading.RunTracer); ok {
		runner.Tracer = rt
	}
	if _, corpusPath, ok := set.RAGCorpus(); ok {
		build := deps.RAG
		offline := build == nil
		if offline {
			build = set.RAGBuilder(deps.ReadFile)
		}
		asker, err := build(ctx, corpusPath, model)
		if err != nil {
			if offline && ctx.Err() == nil {
				// The offline pipeline depends on nothing but the corpus the
				// request names: it will fail the same way every time.
				return nil, fmt.Errorf("%w: rag pipeline for %s: %w", grading.ErrBadRequest, set.Corpus, err)
			}
			return nil, fmt.Errorf("rag pipeline for %s: %w", set.Corpus, err)
		}
		runner.RAG = asker
	}
	return &Plan{deps: deps, req: req, set: set, runner: runner, typed: typed, logger: logger, now: now, meter: meter}, nil
}

// Journal records a request's grading durably as it goes (the eval
// worker's claim ledger): every paid call before it is made and once it
// returned (llm.Ledger), and every case that made one as it finishes.
type Journal interface {
	llm.Ledger
	// CaseDone records a case graded, with the digest of the case; a
	// failure is the journal's to log (the case is then lost if the
	// attempt dies, and its spend still counted).
	CaseDone(ctx context.Context, s grading.Score, digest string)
}

// Prior is what a request's earlier attempts recorded in its Journal.
type Prior struct {
	// Spend is every paid call they made (llm.Spend).
	Spend llm.Spend
	// Cases are the cases they graded, by case id.
	Cases map[string]PriorCase
	// Lost are the cases whose paid calls were made and whose answers
	// were not recorded, by case id, with what those calls cost
	// (micro-dollars; a call whose outcome was lost at its reservation).
	Lost map[string]int64
}

// PriorCase is a case an earlier attempt graded: its score, and the
// digest of the case it graded.
type PriorCase struct {
	Digest string        `json:"digest"`
	Score  grading.Score `json:"score"`
}

// Resume makes the plan continue a request's earlier attempts: their
// spend counts against the cap (the cap covers every attempt's calls),
// the cases they graded are kept (a case whose digest changed since is
// graded again), the cases they lost are unmeasured with reason
// grading.ReasonLostInCrash and their cost, and from now on every paid call
// and graded case is recorded in j. A failure to record a paid call fails
// Grade (wrapping llm.ErrLedger) and no paid call starts after it. Call
// it before Grade.
func (p *Plan) Resume(j Journal, prior Prior) {
	p.meter.Resume(prior.Spend, j)
	kept := map[string]grading.Score{}
	for i := range p.set.Cases {
		c := &p.set.Cases[i]
		if pc, ok := prior.Cases[c.ID]; ok && pc.Digest == p.set.CaseDigests[c.ID] && pc.Score.CaseID == c.ID {
			kept[c.ID] = pc.Score
			continue
		}
		if micro, ok := prior.Lost[c.ID]; ok {
			usd := float64(micro) / 1e6
			kept[c.ID] = grading.Score{CaseID: c.ID, Grader: c.Kind(), CostUSD: usd, Reason: grading.ReasonLostInCrash,
				Unmeasured: fmt.Sprintf("lost in a crash: an earlier attempt made its paid calls ($%.6f) and died before recording the answer", usd)}
		}
	}
	p.runner.Prior = kept
	digests := p.set.CaseDigests
	p.runner.CaseDone = func(ctx context.Context, s grading.Score) { j.CaseDone(ctx, s, digests[s.CaseID]) }
	p.runner.Failed = p.meter.Err
}

// Grade grades the set and, when the request names a baseline, checks
// drift over the window that ends with the new run. runID, when not empty,
// is the run's id (a request recorded before grading keeps the id it was
// recorded with); otherwise a new one is made. Grade stores and emits
// nothing: the caller commits the run (Deps.Store.SaveRun, or with the
// request in one transaction) and then emits Events.
func (p *Plan) Grade(ctx context.Context, runID string) (Result, error) {
	run, err := p.runner.RunWithID(ctx, p.set, p.req.AgentID, runID)
	if err != nil {
		if p.typed != nil {
			err = p.typed.Client.Redactor().Error(err)
		}
		return Result{}, err
	}
	run.RequestID = p.req.RequestID
	run.ComparisonID = p.req.ComparisonID
	if p.typed != nil {
		grading.RedactRun(&run, p.typed.Client.Redactor())
	} else {
		grading.RedactRun(&run)
	}
	res := Result{Run: grading.Summarize(run), traced: p.runner.Tracer != nil}
	if p.req.BaselineID == "" {
		return res, nil
	}
	window := p.req.Window
	if window <= 0 {
		window = 1
	}
	rep, err := CheckDrift(ctx, withRun{p.deps.Store, run}, DriftRequest{
		BaselineID: p.req.BaselineID, Window: window, Threshold: p.req.Threshold,
		AllowChangedSet: p.req.AllowChangedSet, AllowChangedSettings: p.req.AllowChangedSettings, Seed: p.req.Seed, Alpha: p.req.Alpha,
		Include: run.ID,
	})
	if err != nil {
		return res, err
	}
	res.Drift = &rep
	return res, nil
}

// withRun is a store that also holds one run not yet committed: the newest
// run, so a drift window includes it before it is saved.
type withRun struct {
	Store
	run grading.Run
}

func (w withRun) Run(ctx context.Context, id string) (grading.Run, error) {
	if id == w.run.ID {
		return w.run, nil
	}
	return w.Store.Run(ctx, id)
}

func (w withRun) RecentRuns(ctx context.Context, evalSetID, model string, n int, exclude ...string) ([]grading.Run, error) {
	return w.RecentRunsWhere(ctx, evalSetID, model, n, nil, exclude...)
}

func (w withRun) RecentRunsWhere(ctx context.Context, evalSetID, model string, n int, keep func(id string, settings *grading.Settings) bool, exclude ...string) ([]grading.Run, error) {
	mine := w.run.EvalSetID == evalSetID && w.run.Model == model && !slices.Contains(exclude, w.run.ID)
	if mine && (keep == nil || keep(w.run.ID, w.run.Settings)) {
		if n <= 1 {
			return []grading.Run{w.run}, nil
		}
		stored, err := w.Store.RecentRunsWhere(ctx, evalSetID, model, n-1, keep, append(exclude, w.run.ID)...)
		return append([]grading.Run{w.run}, stored...), err
	}
	return w.Store.RecentRunsWhere(ctx, evalSetID, model, n, keep, append(exclude, w.run.ID)...)
}

// Execute runs one eval request end to end: Prepare, Grade, save the run,
// then emit its Events and record its Spans. Event and span failures do
// not fail the request: they are listed in Result.Problems (the run is
// already saved). Errors that the request itself caused wrap
// grading.ErrBadRequest. The worker runs the same steps itself, committing the run
// with the request and emitting events exactly once across crashes.
func Execute(ctx context.Context, deps Deps, req Request) (Result, error) {
	plan, err := Prepare(ctx, deps, req)
	if err != nil {
		return Result{}, err
	}
	return plan.execute(ctx)
}

// execute grades the plan, saves the run, emits its events and records
// its spans (Execute after Prepare, and after Resume when a comparison
// resumes a model).
func (p *Plan) execute(ctx context.Context) (Result, error) {
	deps, req, plan := p.deps, p.req, p
	gradeEnd := plan.now()
	res, err := plan.Grade(ctx, req.RunID)
	if err != nil {
		return res, err
	}
	if deps.Store != nil {
		if err := deps.Store.SaveRun(ctx, res.Run.Run); err != nil {
			return res, fmt.Errorf("eval %s: %w", plan.set.ID, err)
		}
		res.Saved = true
	}
	if deps.Events != nil {
		for _, ev := range Events(res) {
			ok, err := deps.Events.Append(ctx, ev)
			switch {
			case err != nil:
				res.Problems = append(res.Problems, fmt.Sprintf("event %s: %v", ev.Type, err))
				plan.logger.Warn("event not written", "type", ev.Type, "err", err)
			case ok:
				res.EventsWritten++
			default:
				res.EventsSkipped++
			}
		}
	}
	Spans(ctx, deps.Spans, res, gradeEnd, plan.now())
	return res, nil
}

// newBudget returns the budget of a request's cap, nil for no cap. A cap
// that is not a finite amount >= 0 is refused, and so is a cap over a model
// or judge with no price (its spend could not be bounded).
func newBudget(maxUSD float64, prices llm.PriceBook, models ...llm.Model) (*llm.Budget, error) {
	if maxUSD == 0 {
		return nil, nil
	}
	if maxUSD < 0 || math.IsNaN(maxUSD) || math.IsInf(maxUSD, 0) {
		return nil, fmt.Errorf("max_cost_usd %v: want a finite amount of US dollars >= 0 (0: no cap)", maxUSD)
	}
	if prices == nil {
		prices = llm.DefaultPriceBook()
	}
	for _, m := range models {
		if !prices.Priced(m.ID()) {
			return nil, fmt.Errorf("max_cost_usd %v: model %s has no price, so its spend cannot be capped (give it one with --prices)", maxUSD, m.ID())
		}
	}
	return llm.NewBudget(maxUSD, prices)
}

func loadRequestSet(req Request, read grading.ReadFileFunc) (*grading.EvalSet, error) {
	switch {
	case req.Set != nil:
		return req.Set, nil
	case req.EvalSetPath != "" && len(req.EvalSet) > 0:
		return nil, errors.New("eval request names both eval_set_path and an inline eval_set")
	case req.EvalSetPath != "":
		return grading.LoadEvalSetWith(req.EvalSetPath, read)
	case len(req.EvalSet) > 0:
		return grading.ParseEvalSetWith(req.EvalSet, "", read)
	}
	return nil, errors.New("eval request names no eval set (eval_set_path or eval_set)")
}

// DriftRequest selects a drift check in a store.
type DriftRequest struct {
	// BaselineID is a baseline id or label; the report names the id.
	BaselineID      string
	Window          int // runs; <= 0 means 1
	Threshold       float64
	AllowChangedSet bool
	// AllowChangedSettings pools the most recent runs whatever their
	// settings (the report names what differed); without it the window
	// takes only runs graded under the baseline run's settings
	// (grading.DiffSettings empty: a run that records none is skipped)
	// and lists those it skipped. A baseline run that records none has
	// nothing to compare with: the window pools any settings and the
	// report says so (drift.Report.SettingsUnknown).
	AllowChangedSettings bool
	// Include, when set, is a run the window must hold (an eval's own
	// new run): one graded under other settings than the baseline run's
	// refuses the check rather than being skipped.
	Include string
	Seed    *uint64
	// Alpha is the paired test's significance level; 0 means drift.DefaultAlpha.
	Alpha float64
}

// CheckDrift loads the baseline, its run and the Window most recent runs of
// the same eval set and model graded under the baseline run's settings
// (the baseline's own run left out; any settings with
// AllowChangedSettings) and computes drift; the report lists the runs
// skipped for their settings. Request mistakes (unknown baseline, changed
// set, empty window, no run graded under the baseline's settings) wrap
// grading.ErrBadRequest.
func CheckDrift(ctx context.Context, st Store, dr DriftRequest) (drift.Report, error) {
	bl, err := st.Baseline(ctx, dr.BaselineID)
	if err != nil {
		return drift.Report{}, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
	}
	baseRun, err := st.Run(ctx, bl.RunID)
	if err != nil {
		return drift.Report{}, fmt.Errorf("baseline %s: %w", bl.ID, err)
	}
	n := dr.Window
	if n <= 0 {
		n = 1
	}
	var skipped []drift.SettingsChange
	var keep func(string, *grading.Settings) bool
	if !dr.AllowChangedSettings && baseRun.Settings != nil {
		keep = func(id string, s *grading.Settings) bool {
			diff := grading.DiffSettings(baseRun.Settings, s)
			if len(diff) > 0 {
				skipped = append(skipped, drift.SettingsChange{RunID: id, Changes: diff})
			}
			return len(diff) == 0
		}
	}
	window, err := st.RecentRunsWhere(ctx, baseRun.EvalSetID, baseRun.Model, n, keep, baseRun.ID)
	if err != nil {
		return drift.Report{}, err
	}
	for _, sk := range skipped {
		if sk.RunID == dr.Include {
			return drift.Report{}, fmt.Errorf("%w: %w", grading.ErrBadRequest, &drift.ChangedSettingsError{SettingsChange: sk})
		}
	}
	if len(window) == 0 && len(skipped) > 0 {
		return drift.Report{}, fmt.Errorf("%w: %w: no run of eval set %s with model %s was graded under baseline %s's settings (%s): %d skipped, %s; pass --allow-changed-settings to pool them",
			grading.ErrBadRequest, drift.ErrChangedSettings, baseRun.EvalSetID, baseRun.Model, bl.ID, grading.SettingsText(baseRun.Settings, false), len(skipped), skippedText(skipped))
	}
	if len(window) == 0 {
		return drift.Report{}, fmt.Errorf("%w: no run of eval set %s with model %s since baseline %s", grading.ErrBadRequest, baseRun.EvalSetID, baseRun.Model, bl.ID)
	}
	ids := make([]string, len(window))
	for i := range window {
		ids[i] = window[i].ID
	}
	seed := drift.DefaultSeed(bl.ID, ids)
	if dr.Seed != nil {
		seed = *dr.Seed
	}
	rep, err := drift.Compute(bl, baseRun, window, drift.Options{
		Threshold: dr.Threshold, Seed: seed, AllowChangedSet: dr.AllowChangedSet, AllowChangedSettings: dr.AllowChangedSettings, Alpha: dr.Alpha,
	})
	if err != nil {
		if errors.Is(err, drift.ErrChangedSet) || errors.Is(err, drift.ErrNoWindow) || errors.Is(err, drift.ErrChangedSettings) {
			return drift.Report{}, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
		}
		return drift.Report{}, err
	}
	rep.Skipped = skipped
	return rep, nil
}

// skippedText names the first skipped runs and what differed, for an
// error.
func skippedText(skipped []drift.SettingsChange) string {
	const shown = 3
	var parts []string
	for _, s := range skipped[:min(len(skipped), shown)] {
		parts = append(parts, fmt.Sprintf("run %s: %s", s.RunID, strings.Join(s.Changes, ", ")))
	}
	if len(skipped) > shown {
		parts = append(parts, fmt.Sprintf("and %d more", len(skipped)-shown))
	}
	return strings.Join(parts, "; ")
}
