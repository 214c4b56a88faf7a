package grading

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/internal/ids"
)

// Provenance records what a run measured, so runs are compared only when
// they measured the same thing.
type Provenance struct {
	EvalSetDigest string            `json:"eval_set_digest"`
	CaseDigests   map[string]string `json:"case_digests"`
	// Graders maps each grader used to its configuration.
	Graders map[string]map[string]any `json:"graders"`
	// CorpusDigest and IndexGeneration are set when the set has rag cases.
	CorpusDigest    string `json:"corpus_digest,omitempty"`
	IndexGeneration string `json:"index_generation,omitempty"`
	Model           string `json:"model"`
	Judge           string `json:"judge,omitempty"`
	Version         string `json:"verdryx_version"`
	// Unpriced lists the model and judge ids called by this run that have
	// no price in the book: their calls are recorded at cost 0.
	Unpriced []string `json:"unpriced,omitempty"`
	// CostLimit is the run's spending cap and what it stopped; nil when
	// the run had no cap.
	CostLimit *CostLimit `json:"cost_limit,omitempty"`
}

// CostLimit is a capped run's spend: the cap, what the paid calls of the
// model and the judges cost, and the cases left unmeasured (reason
// llm.ReasonCostLimit) because the cap was reached.
type CostLimit struct {
	LimitUSD float64 `json:"limit_usd"`
	SpentUSD float64 `json:"spent_usd"`
	// PaidCalls counts the paid calls made; RefusedCalls those not made.
	PaidCalls    int `json:"paid_calls"`
	RefusedCalls int `json:"refused_calls"`
	// StoppedAtCase is the first case, in set order, left unmeasured by
	// the cap; "" when the cap stopped nothing.
	StoppedAtCase string `json:"stopped_at_case,omitempty"`
	// StoppedCases counts the cases left unmeasured by the cap.
	StoppedCases int `json:"stopped_cases"`
}

// Run is one graded pass over an eval set.
type Run struct {
	ID            string `json:"run_id"`
	EvalSetID     string `json:"eval_set_id"`
	EvalSetDigest string `json:"eval_set_digest"`
	AgentID       string `json:"agent_id,omitempty"`
	Model         string `json:"model"`
	Judge         string `json:"judge,omitempty"`
	Version       string `json:"verdryx_version"`
	RequestID     string `json:"request_id,omitempty"`
	// ComparisonID is the model comparison (verdryx compare) that graded
	// the run; "" for a run graded on its own.
	ComparisonID string     `json:"comparison_id,omitempty"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   time.Time  `json:"finished_at"`
	Provenance   Provenance `json:"provenance"`
	// Settings are the settings that changed the run's scores; nil when
	// the run records none (the Python verdryx's, or stored before
	// settings were recorded).
	Settings *Settings `json:"settings,omitempty"`
	// Scores holds one Score per case, in eval set order, graded or not.
	Scores []Score `json:"cases"`
}

// Graded returns the values of the graded cases, in case order.
func (r *Run) Graded() []float64 {
	var out []float64
	for _, s := range r.Scores {
		if s.Graded() {
			out = append(out, s.Value)
		}
	}
	return out
}

// Mean is the mean over graded cases; ok is false when none was graded
// (the run is unmeasured, never 0).
func (r *Run) Mean() (mean float64, ok bool) {
	vals := r.Graded()
	if len(vals) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	return sum / float64(len(vals)), true
}

// Unmeasured returns the scores of the cases that could not be graded.
func (r *Run) Unmeasured() []Score {
	var out []Score
	for _, s := range r.Scores {
		if !s.Graded() {
			out = append(out, s)
		}
	}
	return out
}

// totals returns the tokens and cost of every case, graded or not.
func (r *Run) totals() (tokens int64, costUSD float64) {
	for _, s := range r.Scores {
		tokens += s.Tokens
		costUSD += s.CostUSD
	}
	return tokens, costUSD
}

// Runner grades eval sets. Configure it, then call Run; a Runner may be used
// by several goroutines at once.
type Runner struct {
	// Model answers each case (not used for outcome_tag cases).
	Model llm.Model
	// Judge grades llm_judge cases; nil makes them unmeasured.
	Judge *grader.Judge
	// RAG answers rag cases; nil makes them unmeasured.
	RAG RAGAsker
	// Concurrency bounds the cases in flight; <= 0 means 4.
	Concurrency int
	// Prices prices model calls; nil means llm.DefaultPriceBook.
	Prices llm.PriceBook
	// Semantic, when set, adds the faithfulness and answer_relevance
	// checks to the rag cases of a set with "semantic": true, or to every
	// rag case with SemanticAll. Its Model should be wrapped by Budget too.
	Semantic    *grader.Semantic
	SemanticAll bool
	// Budget, when set, is the cap the Model and Judge's model were
	// wrapped with (llm.Budget.Wrap); the run records its spend and the
	// cases it stopped in Provenance.CostLimit. Nil means no cap.
	Budget *llm.Budget
	// Version is the verdryx version recorded with each run.
	Version string
	// Now returns the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Tracer, when set, records the run as it is graded: a run span, a
	// child span per case with its gen_ai.evaluation.result event, and
	// under each case the GenAI spans of its model and judge calls (made
	// by the adapters from the context). Nil records nothing.
	Tracer RunTracer
	// OnCase, when set, is called as each case finishes, with the case's
	// index in the set and its score. Calls are serialised (never two at
	// once) but come in completion order, not case order.
	OnCase func(i int, s Score)
	// Prior holds, by case id, the scores of cases an earlier attempt of
	// this run finished or lost (reason ReasonLostInCrash): they are not
	// graded again, and their scores are the run's.
	Prior map[string]Score
	// CaseDone, when set, is called as each case graded here finishes,
	// before its slot goes to the next case (the eval worker records it
	// durably, so a later attempt keeps it).
	CaseDone func(ctx context.Context, s Score)
	// Failed, when set, is asked after grading whether recording the
	// run's spend failed (llm.Budget.Err): the run then fails with it.
	Failed func() error

	// typed grades typed cases (set by UseTyped once typryx listed the
	// template); nil leaves them unmeasured.
	typed *typedPlan
}

// RunWithID grades every case of set and returns the run, whose id is
// runID: a run recorded before it is graded keeps the id it was recorded
// with; "" makes a new id. The run span's trace id derives from the id.
// It returns an error when ctx is done before every case finished, or
// when typryx failed a typed case (ErrTypedService: the other cases are
// abandoned); other per-case failures are recorded as unmeasured scores
// with their reason.
func (r *Runner) RunWithID(ctx context.Context, set *EvalSet, agentID, runID string) (Run, error) {
	return r.run(ctx, set, agentID, runID)
}

// run is Run with the run's id given (a new one when runID is empty), so
// the run span's trace id derives from the id the run is stored under.
func (r *Runner) run(ctx context.Context, set *EvalSet, agentID, runID string) (_ Run, err error) {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	conc := r.Concurrency
	if conc <= 0 {
		conc = 4
	}
	run := Run{
		EvalSetID:     set.ID,
		EvalSetDigest: set.Digest,
		AgentID:       agentID,
		Model:         r.Model.ID(),
		Version:       r.Version,
		StartedAt:     now().UTC(),
	}
	run.ID = runID
	if run.ID == "" {
		run.ID = ids.New("run", run.StartedAt)
	}
	if r.Judge != nil && slices.ContainsFunc(set.Cases, func(c Case) bool { return c.Kind() == GraderLLMJudge }) {
		run.Judge = r.Judge.Model.ID() // recorded only when it grades something
	}
	run.Provenance = r.provenance(set, run)
	run.Settings = r.settings(set, run)
	run.Scores = make([]Score, len(set.Cases))
	ctx, runSpan := r.startRun(ctx, &run)
	defer func() { endRun(runSpan, run, now().UTC(), err) }()

	// A case that fails the whole run (typryx refusing) cancels the rest
	// with its error as the cause.
	gctx, abandon := context.WithCancelCause(ctx)
	defer abandon(nil)
	failed := func() error {
		if err := context.Cause(gctx); err != nil && ctx.Err() == nil {
			return err
		}
		return fmt.Errorf("eval %s: %w", set.ID, ctx.Err())
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var onCase sync.Mutex
	for i := range set.Cases {
		if s, ok := r.Prior[set.Cases[i].ID]; ok {
			run.Scores[i] = s
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-gctx.Done():
			wg.Wait()
			return Run{}, failed()
		}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			start := now()
			cctx, span := startCase(gctx, &set.Cases[i], start)
			cctx = llm.WithCase(cctx, set.Cases[i].ID)
			s, err := r.gradeCase(cctx, set, &set.Cases[i], run.ID)
			if err != nil {
				abandon(fmt.Errorf("eval %s: %w", set.ID, err))
				failCase(span, err, now())
				return
			}
			end := now()
			s.Duration = end.Sub(start)
			endCase(span, s, end)
			run.Scores[i] = s
			if r.CaseDone != nil {
				r.CaseDone(cctx, s)
			}
			logger.Debug("case graded", "case", s.CaseID, "value", s.Value, "unmeasured", s.Unmeasured)
			if r.OnCase != nil {
				onCase.Lock()
				r.OnCase(i, s)
				onCase.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if gctx.Err() != nil {
		return Run{}, failed()
	}
	if r.Failed != nil {
		if err := r.Failed(); err != nil {
			return Run{}, fmt.Errorf("eval %s: %w", set.ID, err)
		}
	}
	if r.typed != nil {
		r.typed.postLabels(ctx, &run, func(caseID string, err error) {
			logger.Warn("typed label not posted", "case", caseID, "err", err)
		})
	}
	if r.Budget != nil {
		run.Provenance.CostLimit = costLimit(r.Budget, run.Scores)
	}
	run.FinishedAt = now().UTC()
	return run, nil
}

// costLimit summarises a capped run's spend and the cases the cap stopped.
func costLimit(b *llm.Budget, scores []Score) *CostLimit {
	cl := &CostLimit{LimitUSD: b.Limit(), SpentUSD: b.Spent()}
	cl.PaidCalls, cl.RefusedCalls = b.Counts()
	for _, s := range scores {
		if s.Unmeasured == llm.ReasonCostLimit {
			if cl.StoppedCases == 0 {
				cl.StoppedAtCase = s.CaseID
			}
			cl.StoppedCases++
		}
	}
	return cl
}

func (r *Runner) provenance(set *EvalSet, run Run) Provenance {
	p := Provenance{
		EvalSetDigest: set.Digest,
		CaseDigests:   set.CaseDigests,
		Graders:       map[string]map[string]any{},
		Model:         run.Model,
		Judge:         run.Judge,
		Version:       r.Version,
	}
	for i := range set.Cases {
		kind := set.Cases[i].Kind()
		if _, ok := p.Graders[kind]; ok {
			continue
		}
		cfg := map[string]any{}
		switch kind {
		case GraderOutcomeTag:
			table := set.OutcomeScores
			if table == nil {
				table = grader.DefaultOutcomeScores()
			}
			cfg["scores"] = table
		case GraderLLMJudge:
			cfg["judge"] = run.Judge
			cfg["answer"] = "one number in [0,1], clamped; unparseable is unmeasured"
		case GraderToolTrace:
			cfg["partial"] = "lcs/max_len"
		case GraderRAG:
			cfg["score"] = "1 when every golden check passes, else 0"
			if r.Semantic != nil && (r.SemanticAll || set.Semantic) {
				cfg["score"] = "1 when every golden check and both semantic checks pass, else 0"
				cfg["semantic"] = map[string]any{"judge": r.Semantic.Model.ID(), "threshold": r.Semantic.PassAt(),
					"checks":      []string{grader.CheckFaithfulness, grader.CheckAnswerRelevance},
					"unparseable": "the case is unmeasured, never 0"}
			}
		case GraderTyped:
			if r.typed != nil {
				cfg = r.typed.config()
			}
		}
		p.Graders[kind] = cfg
	}
	prices := r.Prices
	if prices == nil {
		prices = llm.DefaultPriceBook()
	}
	for kind := range p.Graders {
		id := ""
		switch kind {
		case GraderExact, GraderRegex, GraderToolTrace, GraderLLMJudge, GraderRAG, GraderTyped:
			id = run.Model
		}
		if _, ok := prices.Cost(id, 0, 0); id != "" && !ok && !slices.Contains(p.Unpriced, id) {
			p.Unpriced = append(p.Unpriced, id)
		}
	}
	if _, ok := p.Graders[GraderLLMJudge]; ok && r.Judge != nil {
		if _, priced := prices.Cost(run.Judge, 0, 0); !priced && !slices.Contains(p.Unpriced, run.Judge) {
			p.Unpriced = append(p.Unpriced, run.Judge)
		}
	}
	sort.Strings(p.Unpriced)
	if set.rag != nil {
		p.CorpusDigest = set.rag.corpusDigest
		if r.RAG != nil {
			p.IndexGeneration = r.RAG.Generation()
		}
	}
	return p
}

// settings returns the settings that change run's scores: each recorded
// only when the set has cases it applies to.
func (r *Runner) settings(set *EvalSet, run Run) *Settings {
	s := &Settings{Judge: run.Judge}
	hasRAG := slices.ContainsFunc(set.Cases, func(c Case) bool { return c.Kind() == GraderRAG })
	if hasRAG && r.Semantic != nil && (r.SemanticAll || set.Semantic) {
		s.SemanticJudge, s.SemanticThreshold = r.Semantic.Model.ID(), r.Semantic.PassAt()
	}
	if hasRAG && set.rag != nil && r.RAG != nil {
		s.IndexGeneration = r.RAG.Generation()
		if d, ok := r.RAG.(settingsDescriber); ok {
			s.Embedder = d.Embedder()
			s.Retrieval, s.TopK, s.Generator = d.Describe()
		}
	}
	if r.typed != nil {
		s.TypedTemplate = r.typed.tmpl.ID + "@" + string(r.typed.tmpl.Version)
	}
	return s
}

// gradeCase calls the model (when the grader needs one) and grades. The
// error is not nil only when the case fails the whole run: typryx failed a
// typed case (ErrTypedService).
func (r *Runner) gradeCase(ctx context.Context, set *EvalSet, c *Case, runID string) (Score, error) {
	s := Score{CaseID: c.ID, Grader: c.Kind()}
	unmeasured := func(reason, format string, args ...any) (Score, error) {
		s.Reason, s.Unmeasured = reason, fmt.Sprintf(format, args...)
		s.Value = 0
		return s, nil
	}
	switch c.Kind() {
	case GraderOutcomeTag:
		s.Output = c.Prompt
		s.Value, s.Checks = grader.GradeOutcome(set.OutcomeScores, c.Prompt)
		return s, nil
	case GraderRAG:
		if r.RAG == nil || set.rag == nil {
			return unmeasured(ReasonNoRAGPipeline, "no rag pipeline for model %s", r.Model.ID())
		}
		return r.gradeRAG(llm.WithRole(ctx, "model"), set, c, s), nil
	}
	comp, err := r.Model.Complete(llm.WithRole(ctx, "model"), llm.Call{Prompt: c.Prompt, Tools: c.Tools})
	if errors.Is(err, llm.ErrCostLimit) {
		return unmeasured(llm.ReasonCostLimit, llm.ReasonCostLimit)
	}
	if err != nil {
		return unmeasured(ReasonModelError, "model %s: %v", r.Model.ID(), err)
	}
	s.Output = comp.Text
	s.Tokens = comp.InputTokens + comp.OutputTokens
	prices := r.Prices
	if prices == nil {
		prices = llm.DefaultPriceBook()
	}
	// An unpriced model costs 0 here; the run's provenance lists it.
	s.CostUSD, _ = prices.Cost(r.Model.ID(), comp.InputTokens, comp.OutputTokens)
	switch c.Kind() {
	case GraderExact:
		s.Value, s.Checks = grader.GradeExact(*c.Expected, comp.Text)
	case GraderRegex:
		s.Value, s.Checks = grader.GradeRegex(c.re, comp.Text)
	case GraderToolTrace:
		s.Value, s.Checks = grader.GradeToolTrace(*c.ExpectedTools, comp.ToolCalls)
	case GraderLLMJudge:
		if r.Judge == nil {
			return unmeasured(ReasonNoJudge, "no judge configured")
		}
		jr, err := r.Judge.Grade(ctx, c.Rubric, c.Prompt, comp.Text)
		s.Tokens += jr.Tokens
		s.CostUSD += jr.CostUSD
		if errors.Is(err, llm.ErrCostLimit) {
			return unmeasured(llm.ReasonCostLimit, llm.ReasonCostLimit)
		}
		if err != nil {
			s.Checks = jr.Checks
			return unmeasured(ReasonJudgeError, "%v", err)
		}
		s.Value, s.Checks = jr.Value, jr.Checks
	case GraderTyped:
		if r.typed == nil {
			return unmeasured(ReasonTypedDisabled, "typed grader not enabled (no typryx URL configured)")
		}
		return r.typed.grade(llm.WithRole(ctx, "typed"), c, comp.Text, runID, s)
	}
	return s, nil
}
