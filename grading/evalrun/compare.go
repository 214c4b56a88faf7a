package evalrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/compare"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/internal/ids"
)

// SpanCompare names the span of a model comparison.
const SpanCompare = "verdryx.compare"

// ParentTracer is a grading.RunTracer that can also start the span of
// a group of runs, a model comparison (producer.Spans implements it). The
// returned context carries the group's span: a run span StartRun (or a
// finished SpanSink span) starts from that context, or one derived from
// it, is the group span's child in the group's trace (its trace id
// derived from id) instead of a root. The returned function ends the
// group span as StartRun's does.
type ParentTracer interface {
	grading.RunTracer
	StartParent(ctx context.Context, name, id, agentID string, start time.Time) (context.Context, func(end time.Time, data map[string]any, err error))
}

// CompareRequest is a comparison of models on one eval set.
type CompareRequest struct {
	Set *grading.EvalSet
	// Models are the model ids compared, at least two, each once.
	Models []string
	// Judge, when set, judges every model's llm_judge cases; "" lets
	// each model judge its own (as eval does without --judge).
	Judge string
	// Fresh grades every model again, even one with a reusable run.
	Fresh bool
	// MaxCostUSD caps the priced spend of the whole comparison (0: no
	// cap). Models are graded one after another, each under what is left;
	// once nothing is left the rest are not graded (CompareResult.NotGraded).
	MaxCostUSD float64
	// ComparisonID is recorded on every run graded; "" makes one.
	ComparisonID string
	AgentID      string
	Options      compare.Options
	// Journal, when set, journals the paid calls of each model graded
	// (the worker's spend ledger, one per request and model): the model's
	// plan is resumed from what earlier attempts recorded (Plan.Resume),
	// their spend counting against what is left of the cap.
	Journal func(ctx context.Context, model string) (Journal, Prior, error)
}

// NotGraded is a model a comparison did not grade, and why.
type NotGraded struct {
	Model  string `json:"model"`
	Reason string `json:"reason"`
}

// CompareResult is a comparison and how its runs were obtained.
type CompareResult struct {
	Comparison compare.Report `json:"comparison"`
	// ReusedRuns are the stored runs compared without a call; GradedRuns
	// the runs graded (and stored) for this comparison.
	ReusedRuns []string    `json:"reused_runs"`
	GradedRuns []string    `json:"graded_runs"`
	NotGraded  []NotGraded `json:"not_graded,omitempty"`
	// CostLimitUSD is the comparison's cap (0: none) and SpentUSD what the
	// runs graded for it spent.
	CostLimitUSD float64 `json:"cost_limit_usd,omitempty"`
	SpentUSD     float64 `json:"spent_usd"`
	// Problems are event and span failures of the runs graded (they are
	// stored all the same).
	Problems []string `json:"problems,omitempty"`
	// Runs are the compared runs, in Comparison.Models order.
	Runs []grading.RunSummary `json:"-"`
}

// Reusable reports whether a stored run can stand for grading set with
// a model judged by judge (its id; the model itself when the request has
// none): the same eval set digest and, as the new run would record them,
// the same judge and semantic judge. A run that records no settings is
// not reusable.
func Reusable(run grading.Run, set *grading.EvalSet, judge string) bool {
	if run.EvalSetDigest != set.Digest || run.Settings == nil {
		return false
	}
	var hasJudge, hasRAG bool
	for i := range set.Cases {
		switch set.Cases[i].Kind() {
		case grading.GraderLLMJudge:
			hasJudge = true
		case grading.GraderRAG:
			hasRAG = true
		}
	}
	want := ""
	if hasJudge {
		want = judge
	}
	sem := ""
	if hasRAG && set.Semantic {
		sem = judge
	}
	return run.Settings.Judge == want && run.Settings.SemanticJudge == sem
}

// Compare grades the set with every model, one after another, reusing
// each model's latest stored run when it is Reusable (unless Fresh), and
// compares the runs. Each run graded is stored and emitted as Execute
// does, tagged with the comparison id. A model whose latest stored run
// is tagged with req.ComparisonID was graded for this very comparison (an
// earlier attempt of it): it is not graded again, even with Fresh, is
// listed as graded and its spend counts against the cap. Request
// mistakes (fewer than two models, a model or judge that does not
// resolve, a cap over an unpriced model) wrap grading.ErrBadRequest and
// nothing is graded.
//
// When deps.Spans is a ParentTracer the comparison's span is
// started first and every run graded for it is its child, in its trace;
// otherwise one finished span is recorded after the comparison.
func Compare(ctx context.Context, deps Deps, req CompareRequest) (res CompareResult, err error) {
	judges, err := checkCompare(deps, req)
	if err != nil {
		return CompareResult{}, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	cid := req.ComparisonID
	if cid == "" {
		cid = ids.New("cmp", start)
	}
	if pt, ok := deps.Spans.(ParentTracer); ok {
		var end func(time.Time, map[string]any, error)
		ctx, end = pt.StartParent(ctx, SpanCompare, cid, req.AgentID, start)
		defer func() {
			if err != nil {
				end(now(), nil, fmt.Errorf("compare %s: %w", req.Set.ID, err))
				return
			}
			end(now(), compareSpanData(res), nil)
		}()
	} else if deps.Spans != nil {
		defer func() {
			if err == nil {
				deps.Spans.Span(ctx, SpanCompare, cid, req.AgentID, start, now(), compareSpanData(res))
			}
		}()
	}
	return compareModels(ctx, deps, req, judges, cid, now)
}

// compareModels grades or reuses each model's run and compares them.
func compareModels(ctx context.Context, deps Deps, req CompareRequest, judges []llm.Model, cid string, now func() time.Time) (CompareResult, error) {
	res := CompareResult{ReusedRuns: []string{}, GradedRuns: []string{}, CostLimitUSD: req.MaxCostUSD}
	limit := int64(math.Round(req.MaxCostUSD * 1e6))
	var spent int64
	var runs []grading.Run
	for i, model := range req.Models {
		if deps.Store != nil && (!req.Fresh || req.ComparisonID != "") {
			latest, err := deps.Store.RecentRuns(ctx, req.Set.ID, model, 1)
			if err != nil {
				return res, fmt.Errorf("compare: latest run of %s: %w", model, err)
			}
			if len(latest) == 1 && req.ComparisonID != "" && latest[0].ComparisonID == req.ComparisonID {
				// Graded for this comparison by an earlier attempt.
				spent += runSpend(grading.Summarize(latest[0]))
				res.GradedRuns = append(res.GradedRuns, latest[0].ID)
				runs = append(runs, latest[0])
				continue
			}
			if !req.Fresh && len(latest) == 1 && Reusable(latest[0], req.Set, judges[i].ID()) {
				res.ReusedRuns = append(res.ReusedRuns, latest[0].ID)
				runs = append(runs, latest[0])
				continue
			}
		}
		left := 0.0
		if limit > 0 {
			if limit-spent < 1 {
				res.NotGraded = append(res.NotGraded, NotGraded{Model: model,
					Reason: fmt.Sprintf("the comparison's cost limit $%.6f was reached", req.MaxCostUSD)})
				continue
			}
			left = float64(limit-spent) / 1e6
		}
		d := deps
		d.Judge = &grader.Judge{Model: judges[i], Prices: deps.Prices}
		sem := &grader.Semantic{Model: judges[i], Prices: deps.Prices}
		if deps.Semantic != nil {
			sem.Threshold = deps.Semantic.Threshold
		}
		d.Semantic = sem
		plan, err := Prepare(ctx, d, Request{Set: req.Set, Model: model, AgentID: req.AgentID, MaxCostUSD: left,
			RunID: ids.New("run", now()), ComparisonID: cid})
		if err != nil {
			return res, fmt.Errorf("compare: model %s: %w", model, err)
		}
		if req.Journal != nil {
			j, prior, err := req.Journal(ctx, model)
			if err != nil {
				return res, fmt.Errorf("compare: model %s: spend ledger: %w", model, err)
			}
			plan.Resume(j, prior)
		}
		r, err := plan.execute(ctx)
		if err != nil {
			return res, fmt.Errorf("compare: model %s: %w", model, err)
		}
		spent += runSpend(r.Run)
		res.GradedRuns = append(res.GradedRuns, r.Run.ID)
		res.Problems = append(res.Problems, r.Problems...)
		runs = append(runs, r.Run.Run)
	}
	res.SpentUSD = float64(spent) / 1e6
	if len(runs) < 2 {
		return res, fmt.Errorf("%w: compare: only %d of %d models graded before the cost limit $%.6f: nothing to compare (raise --cost-limit-usd)",
			grading.ErrBadRequest, len(runs), len(req.Models), req.MaxCostUSD)
	}
	if err := res.compute(runs, req.Options, cid); err != nil {
		return res, err
	}
	return res, nil
}

// compute fills the comparison of runs, marking the reused ones.
func (res *CompareResult) compute(runs []grading.Run, opts compare.Options, cid string) error {
	rep, err := compare.Compute(runs, opts)
	if err != nil {
		return fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
	}
	rep.ComparisonID = cid
	for i := range rep.Models {
		rep.Models[i].Reused = slices.Contains(res.ReusedRuns, rep.Models[i].RunID)
	}
	res.Comparison = rep
	for _, r := range runs {
		res.Runs = append(res.Runs, grading.Summarize(r))
	}
	return nil
}

// CompareStored compares stored runs by id, making no call: every run is
// reused. An unknown run or runs that cannot be compared wrap
// grading.ErrBadRequest.
func CompareStored(ctx context.Context, st Store, ids []string, opts compare.Options) (CompareResult, error) {
	res := CompareResult{ReusedRuns: ids, GradedRuns: []string{}}
	var runs []grading.Run
	for _, id := range ids {
		r, err := st.Run(ctx, id)
		if err != nil {
			return res, fmt.Errorf("%w: compare: %w", grading.ErrBadRequest, err)
		}
		runs = append(runs, r)
	}
	cid := ""
	for _, r := range runs {
		if r.ComparisonID != "" && (cid == "" || cid == r.ComparisonID) {
			cid = r.ComparisonID
		} else {
			cid = ""
			break
		}
	}
	return res, res.compute(runs, opts, cid)
}

// checkCompare refuses a request that cannot work and resolves each
// model's judge, before anything is graded.
func checkCompare(deps Deps, req CompareRequest) ([]llm.Model, error) {
	if req.Set == nil {
		return nil, errors.New("compare: no eval set")
	}
	if len(req.Models) < 2 {
		return nil, fmt.Errorf("compare: want at least two models, have %d", len(req.Models))
	}
	resolve := deps.Models
	if resolve == nil {
		resolve = func(id string) (llm.Model, error) {
			if id == llm.StubID {
				return &llm.Stub{}, nil
			}
			return nil, fmt.Errorf("unknown model %q (only stub is configured)", id)
		}
	}
	prices := deps.Prices
	if prices == nil {
		prices = llm.DefaultPriceBook()
	}
	var judges []llm.Model
	for i, m := range req.Models {
		if slices.Contains(req.Models[:i], m) {
			return nil, fmt.Errorf("compare: model %s is named twice", m)
		}
		if _, err := resolve(m); err != nil {
			return nil, fmt.Errorf("model %s: %w", m, err)
		}
		jid := req.Judge
		if jid == "" {
			jid = m
		}
		j, err := resolve(jid)
		if err != nil {
			return nil, fmt.Errorf("judge %s: %w", jid, err)
		}
		judges = append(judges, j)
		if req.MaxCostUSD > 0 {
			for _, id := range []string{m, jid} {
				if !prices.Priced(id) {
					return nil, fmt.Errorf("cost limit $%v: model %s has no price, so its spend cannot be capped (give it one with --prices)", req.MaxCostUSD, id)
				}
			}
		}
	}
	return judges, nil
}

// runSpend is what a run's paid calls cost, in micro-dollars: the cap's
// count when it had one, else its cases' costs.
func runSpend(r grading.RunSummary) int64 {
	if cl := r.Provenance.CostLimit; cl != nil {
		return int64(math.Round(cl.SpentUSD * 1e6))
	}
	return int64(math.Round(r.TotalCostUSD * 1e6))
}

// compareSpanData is the data of a comparison's span.
func compareSpanData(res CompareResult) map[string]any {
	c := res.Comparison
	var models []string
	for _, m := range c.Models {
		models = append(models, m.Model+"="+m.RunID)
	}
	return map[string]any{
		"eval_set_id":     c.EvalSetID,
		"models":          strings.Join(models, ","),
		"best":            c.Best,
		"candidate":       c.Recommendation.Candidate,
		"reused_runs":     len(res.ReusedRuns),
		"graded_runs":     len(res.GradedRuns),
		"spent_usd":       res.SpentUSD,
		"eval_set_digest": c.EvalSetDigest,
	}
}
