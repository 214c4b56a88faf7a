package grading

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/verdryx/verdryx/envelope"
)

// Store is what Execute needs from the eval store (store.Store implements
// it).
type Store interface {
	SaveRun(ctx context.Context, run Run) error
	Run(ctx context.Context, id string) (Run, error)
	// Baseline loads a baseline by id or label (store.Store resolves
	// both; an id wins).
	Baseline(ctx context.Context, idOrLabel string) (Baseline, error)
	RecentRuns(ctx context.Context, evalSetID, model string, n int, exclude ...string) ([]Run, error)
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
// that is also a RunTracer records the eval run live, with its cases and
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
	Set *EvalSet `json:"-"`
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
	// Seed fixes the drift check's random draws; nil derives one from the
	// baseline and window run ids (recorded in the report either way).
	Seed *uint64 `json:"seed,omitempty"`
	// Alpha is the drift check's significance level (0: DefaultAlpha).
	Alpha float64 `json:"alpha,omitempty"`
}

// Deps are the collaborators of Execute. Store, Events and Spans may be nil
// (nothing saved, no events, no spans); a drift check needs a Store.
type Deps struct {
	Store  Store
	Events EventSink
	Spans  SpanSink
	// Models resolves a model id to the model under evaluation; nil
	// accepts only "stub".
	Models func(id string) (Model, error)
	// Judge grades llm_judge cases; nil uses the stub judge.
	Judge *Judge
	// Typed grades typed cases with typryx; nil refuses a set that has
	// one (ErrBadRequest): no typed case is graded unless the caller
	// enabled typryx.
	Typed *Typed
	// RAG builds the pipeline that answers rag cases for a set's corpus
	// and a model; nil uses the offline pipeline for the stub model and
	// leaves rag cases unmeasured for any other.
	RAG func(ctx context.Context, corpusPath string, model Model) (RAGAsker, error)
	// Concurrency bounds cases in flight; <= 0 means 4.
	Concurrency int
	Prices      PriceBook
	Version     string
	Now         func() time.Time
	Logger      *slog.Logger
	// OnCase, when set, is called as each case finishes (see Runner.OnCase).
	OnCase func(i int, s Score)
	// ReadFile, when set, reads every file a request names (eval set,
	// corpus, golden) instead of os.ReadFile; the worker passes a
	// confine.Reader so nothing outside its roots is read. With ReadFile
	// set and RAG nil, rag cases are answered from the corpus already read
	// through it, so no file is opened twice.
	ReadFile ReadFileFunc
}

// RunSummary is a run with its derived figures, as printed by --json and
// replied to requesters.
type RunSummary struct {
	Run
	Cases      int `json:"case_count"`
	GradedN    int `json:"graded"`
	Unanswered int `json:"unmeasured"`
	// MeanScore is nil when no case was graded ("unmeasured").
	MeanScore    *float64 `json:"mean_score"`
	TotalTokens  int64    `json:"total_tokens"`
	TotalCostUSD float64  `json:"total_cost_usd"`
	// Typed counts the typed cases asked, answered and unanswered (with
	// typryx's reasons and answer ids) and the labels posted; nil when no
	// typed case was asked.
	Typed *TypedSummary `json:"typed,omitempty"`
}

// Summarize derives a run's summary.
func Summarize(run Run) RunSummary {
	s := RunSummary{Run: run, Cases: len(run.Scores)}
	s.GradedN = len(run.Graded())
	s.Unanswered = s.Cases - s.GradedN
	if m, ok := run.Mean(); ok {
		s.MeanScore = &m
	}
	s.TotalTokens, s.TotalCostUSD = run.Totals()
	s.Typed = summarizeTyped(run.Scores)
	return s
}

// Result is what Execute did. It is JSON-serialisable.
type Result struct {
	Run   RunSummary   `json:"run"`
	Drift *DriftReport `json:"drift,omitempty"`
	// Saved is true when the run is in the store.
	Saved         bool     `json:"saved"`
	EventsWritten int      `json:"events_written"`
	EventsSkipped int      `json:"events_skipped"`
	Problems      []string `json:"problems,omitempty"`
	// traced is true when the run's span was recorded live while grading
	// (Deps.Spans is a RunTracer): Spans then records only the drift check.
	traced bool
}

// ErrBadRequest marks a request that can never succeed as sent (bad eval
// set, unknown model, unknown baseline, changed set): do not retry it.
var ErrBadRequest = errors.New("grading: bad eval request")

// Plan is a validated eval request, ready to grade: every check that can
// refuse the request as sent (the eval set, the model, the baseline) has
// passed, and nothing has been stored or emitted.
type Plan struct {
	deps   Deps
	req    Request
	set    *EvalSet
	runner *Runner
	logger *slog.Logger
	now    func() time.Time
}

// Prepare validates req and builds what grading it needs. Request mistakes
// wrap ErrBadRequest; typryx failing to list the typed template wraps
// ErrTypedService; nothing is stored and no question is asked.
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
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	modelID := req.Model
	if modelID == "" {
		modelID = StubID
	}
	var model Model
	switch {
	case deps.Models != nil:
		model, err = deps.Models(modelID)
	case modelID == StubID:
		model = &Stub{}
	default:
		err = fmt.Errorf("unknown model %q (only stub is configured)", modelID)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if req.BaselineID != "" {
		if deps.Store == nil {
			return nil, fmt.Errorf("%w: drift against %s needs a store", ErrBadRequest, req.BaselineID)
		}
		if _, err := deps.Store.Baseline(ctx, req.BaselineID); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
	}
	var typed *typedPlan
	if set.hasTyped() {
		if deps.Typed == nil {
			return nil, fmt.Errorf("%w: eval set %s has typed cases, and typryx is not enabled here (give --typed-url to eval or serve)", ErrBadRequest, set.ID)
		}
		if typed, err = deps.Typed.resolve(ctx, set); err != nil {
			return nil, err
		}
	}
	judge := deps.Judge
	if judge == nil {
		judge = &Judge{Model: &Stub{}, Prices: deps.Prices}
	}
	runner := &Runner{Model: model, Judge: judge, Concurrency: deps.Concurrency, Prices: deps.Prices,
		Version: deps.Version, Now: now, Logger: logger, OnCase: deps.OnCase, typed: typed}
	if rt, ok := deps.Spans.(RunTracer); ok {
		runner.Tracer = rt
	}
	if set.rag != nil {
		build := deps.RAG
		offline := build == nil
		if offline {
			build = set.rag.offlineBuilder(deps.ReadFile)
		}
		asker, err := build(ctx, set.resolve(set.Corpus), model)
		if err != nil {
			if offline && ctx.Err() == nil {
				// The offline pipeline depends on nothing but the corpus the
				// request names: it will fail the same way every time.
				return nil, fmt.Errorf("%w: rag pipeline for %s: %w", ErrBadRequest, set.Corpus, err)
			}
			return nil, fmt.Errorf("rag pipeline for %s: %w", set.Corpus, err)
		}
		runner.RAG = asker
	}
	return &Plan{deps: deps, req: req, set: set, runner: runner, logger: logger, now: now}, nil
}

// Grade grades the set and, when the request names a baseline, checks
// drift over the window that ends with the new run. runID, when not empty,
// is the run's id (a request recorded before grading keeps the id it was
// recorded with); otherwise a new one is made. Grade stores and emits
// nothing: the caller commits the run (Deps.Store.SaveRun, or with the
// request in one transaction) and then emits Events.
func (p *Plan) Grade(ctx context.Context, runID string) (Result, error) {
	run, err := p.runner.run(ctx, p.set, p.req.AgentID, runID)
	if err != nil {
		if p.runner.typed != nil {
			err = p.runner.typed.typed.Client.Redactor().Error(err)
		}
		return Result{}, err
	}
	run.RequestID = p.req.RequestID
	if p.runner.typed != nil {
		redactRun(&run, p.runner.typed.typed.Client.Redactor())
	} else {
		redactRun(&run)
	}
	res := Result{Run: Summarize(run), traced: p.runner.Tracer != nil}
	if p.req.BaselineID == "" {
		return res, nil
	}
	window := p.req.Window
	if window <= 0 {
		window = 1
	}
	rep, err := CheckDrift(ctx, withRun{p.deps.Store, run}, DriftRequest{
		BaselineID: p.req.BaselineID, Window: window, Threshold: p.req.Threshold,
		AllowChangedSet: p.req.AllowChangedSet, Seed: p.req.Seed, Alpha: p.req.Alpha,
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
	run Run
}

func (w withRun) Run(ctx context.Context, id string) (Run, error) {
	if id == w.run.ID {
		return w.run, nil
	}
	return w.Store.Run(ctx, id)
}

func (w withRun) RecentRuns(ctx context.Context, evalSetID, model string, n int, exclude ...string) ([]Run, error) {
	stored, err := w.Store.RecentRuns(ctx, evalSetID, model, n, append(exclude, w.run.ID)...)
	if err != nil || w.run.EvalSetID != evalSetID || w.run.Model != model || slices.Contains(exclude, w.run.ID) {
		return stored, err
	}
	out := append([]Run{w.run}, stored...)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// Events returns the envelopes a graded result emits, in order: one
// quality_score per graded case, the eval_run, and a quality_drift when
// the drift verdict is regressed. They are a pure function of the result
// (timestamps are the run's finish time), so a result emitted again after a
// crash yields the same events, which sinks drop as already stored.
func Events(res Result) []envelope.Event {
	run := res.Run.Run
	var evs []envelope.Event
	for _, sc := range run.Scores {
		if sc.Graded() {
			evs = append(evs, envelope.New("quality_score", run.AgentID, run.ID, QualityScoreData(sc), run.FinishedAt))
		}
	}
	evs = append(evs, envelope.New("eval_run", run.AgentID, run.ID, EvalRunData(res.Run), run.FinishedAt))
	if res.Drift != nil {
		evs = append(evs, DriftEvents(*res.Drift, run.AgentID, run.FinishedAt)...)
	}
	return evs
}

// Spans records the result's spans after grading: the eval run (unless
// it was recorded live, see RunTracer), and the drift check when there was
// one. It does not block on the network.
func Spans(ctx context.Context, sink SpanSink, res Result, driftStart, driftEnd time.Time) {
	if sink == nil {
		return
	}
	run := res.Run
	if !res.traced {
		sink.Span(ctx, SpanEval, run.ID, run.AgentID, run.StartedAt, run.FinishedAt, EvalRunData(run))
	}
	if res.Drift != nil {
		sink.Span(ctx, SpanDrift, res.Drift.BaselineRunID, run.AgentID, driftStart, driftEnd, DriftData(*res.Drift))
	}
}

// Execute runs one eval request end to end: Prepare, Grade, save the run,
// then emit its Events and record its Spans. Event and span failures do
// not fail the request: they are listed in Result.Problems (the run is
// already saved). Errors that the request itself caused wrap
// ErrBadRequest. The worker runs the same steps itself, committing the run
// with the request and emitting events exactly once across crashes.
func Execute(ctx context.Context, deps Deps, req Request) (Result, error) {
	plan, err := Prepare(ctx, deps, req)
	if err != nil {
		return Result{}, err
	}
	gradeEnd := plan.now()
	res, err := plan.Grade(ctx, "")
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

func loadRequestSet(req Request, read ReadFileFunc) (*EvalSet, error) {
	switch {
	case req.Set != nil:
		return req.Set, nil
	case req.EvalSetPath != "" && len(req.EvalSet) > 0:
		return nil, errors.New("eval request names both eval_set_path and an inline eval_set")
	case req.EvalSetPath != "":
		return LoadEvalSetWith(req.EvalSetPath, read)
	case len(req.EvalSet) > 0:
		return ParseEvalSetWith(req.EvalSet, "", read)
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
	Seed            *uint64
	// Alpha is the paired test's significance level; 0 means DefaultAlpha.
	Alpha float64
}

// CheckDrift loads the baseline, its run and the Window most recent runs of
// the same eval set and model (the baseline's own run left out) and computes
// drift. Request mistakes (unknown baseline, changed set, empty window)
// wrap ErrBadRequest.
func CheckDrift(ctx context.Context, st Store, dr DriftRequest) (DriftReport, error) {
	bl, err := st.Baseline(ctx, dr.BaselineID)
	if err != nil {
		return DriftReport{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	baseRun, err := st.Run(ctx, bl.RunID)
	if err != nil {
		return DriftReport{}, fmt.Errorf("baseline %s: %w", bl.ID, err)
	}
	n := dr.Window
	if n <= 0 {
		n = 1
	}
	window, err := st.RecentRuns(ctx, baseRun.EvalSetID, baseRun.Model, n, baseRun.ID)
	if err != nil {
		return DriftReport{}, err
	}
	if len(window) == 0 {
		return DriftReport{}, fmt.Errorf("%w: no run of eval set %s with model %s since baseline %s", ErrBadRequest, baseRun.EvalSetID, baseRun.Model, bl.ID)
	}
	ids := make([]string, len(window))
	for i := range window {
		ids[i] = window[i].ID
	}
	seed := DefaultSeed(bl.ID, ids)
	if dr.Seed != nil {
		seed = *dr.Seed
	}
	rep, err := ComputeDrift(bl, baseRun, window, DriftOptions{
		Threshold: dr.Threshold, Seed: seed, AllowChangedSet: dr.AllowChangedSet, Alpha: dr.Alpha,
	})
	if err != nil {
		if errors.Is(err, ErrChangedSet) || errors.Is(err, ErrNoWindow) {
			return DriftReport{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return DriftReport{}, err
	}
	return rep, nil
}

// QualityScoreData is the data of a quality_score envelope.
func QualityScoreData(s Score) map[string]any {
	return map[string]any{"case_id": s.CaseID, "value": s.Value, "tokens": s.Tokens, "cost_usd": s.CostUSD}
}

// EvalRunData is the data of an eval_run envelope: the contract keys plus
// the run's provenance. mean_score is null for an unmeasured run.
// unanswered counts every case not graded, typed cases typryx left
// unanswered included; typed (present when typed cases were asked) counts
// those asked, answered and unanswered by reason, and the labels posted.
func EvalRunData(s RunSummary) map[string]any {
	var mean any
	if s.MeanScore != nil {
		mean = *s.MeanScore
	}
	d := map[string]any{
		"model":           s.Model,
		"cases":           s.Cases,
		"mean_score":      mean,
		"total_tokens":    s.TotalTokens,
		"total_cost_usd":  s.TotalCostUSD,
		"unanswered":      s.Unanswered,
		"eval_set_id":     s.EvalSetID,
		"eval_set_digest": s.EvalSetDigest,
		"verdryx_version": s.Version,
	}
	if s.Judge != "" {
		d["judge"] = s.Judge
	}
	if s.Provenance.CorpusDigest != "" {
		d["corpus_digest"] = s.Provenance.CorpusDigest
	}
	if s.Provenance.IndexGeneration != "" {
		d["index_generation"] = s.Provenance.IndexGeneration
	}
	if s.Typed != nil {
		t := *s.Typed
		t.UnansweredCases = nil // the event counts; the stored run lists them
		if raw, err := json.Marshal(t); err == nil {
			d["typed"] = json.RawMessage(raw)
		}
	}
	if len(s.Provenance.Graders) > 0 {
		raw, err := json.Marshal(s.Provenance.Graders)
		if err == nil {
			d["graders"] = json.RawMessage(raw)
		}
	}
	return d
}

// DriftData is the data of a quality_drift envelope and drift span.
func DriftData(r DriftReport) map[string]any {
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
	return d
}

// DriftEvents returns the envelopes of a drift check: one quality_drift
// when the verdict is regressed, none when on-track. run_id is the
// baseline's run, so the event joins the run's trace.
func DriftEvents(r DriftReport, agentID string, ts time.Time) []envelope.Event {
	if r.Verdict != VerdictRegressed {
		return nil
	}
	return []envelope.Event{envelope.New("quality_drift", agentID, r.BaselineRunID, DriftData(r), ts)}
}
