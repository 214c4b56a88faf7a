package evalreq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/compare"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/internal/ids"
	"github.com/verdryx/verdryx/store"
)

// checkModels refuses a request whose models field cannot be compared,
// or that mixes it with what a comparison does not do; fresh and
// min_pairs go only with models.
func checkModels(req Request) error {
	if len(req.Models) == 0 {
		switch {
		case req.Fresh:
			return errors.New("field fresh: only with models (a comparison)")
		case req.MinPairs != 0:
			return errors.New("field min_pairs: only with models (a comparison)")
		}
		return nil
	}
	if req.Model != "" {
		return errors.New("fields model and models: give one (model grades one model, models compares several)")
	}
	if len(req.Models) < 2 {
		return fmt.Errorf("field models: want at least two models, have %d", len(req.Models))
	}
	for i, m := range req.Models {
		if m == "" {
			return fmt.Errorf("field models[%d]: empty model id", i)
		}
		if slices.Contains(req.Models[:i], m) {
			return fmt.Errorf("field models[%d]: %q is named twice", i, m)
		}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"baseline_id", req.BaselineID != ""}, {"window", req.Window != 0}, {"threshold", req.Threshold != 0},
		{"allow_changed_set", req.AllowChangedSet}, {"allow_changed_settings", req.AllowChangedSettings}, {"seed", req.Seed != nil},
		{"semantic", req.Semantic}} {
		if f.set {
			return fmt.Errorf("field %s: not with models (a comparison checks no drift and takes the set's own semantic setting)", f.name)
		}
	}
	if req.Alpha != 0 && (req.Alpha <= 0 || req.Alpha >= 1) {
		return fmt.Errorf("field alpha: %v: want a level in (0, 1) (0: %v)", req.Alpha, compare.DefaultAlpha)
	}
	if req.MinPairs != 0 && req.MinPairs < 2 {
		return fmt.Errorf("field min_pairs: %d: want at least 2 (0: %d)", req.MinPairs, compare.DefaultMinPairs)
	}
	return nil
}

// handleCompare runs a request naming models: the set graded per model as
// evalrun.Compare does (each run stored as it is graded, tagged with the
// comparison id, reusing what is stored), under one cap over the whole
// request, then the comparison committed as the request's result, the
// graded runs' events emitted, and the reply. The comparison id is
// recorded before grading, like a run id: a redelivery continues the
// same comparison, a model whose run it already stored is not graded
// again (its spend counts against the cap), and with Claims the model in
// progress resumes from its own spend ledger (one per request and model),
// so no attempt pays past the cap.
func (h *Handler) handleCompare(ctx context.Context, req Request, greq evalrun.Request) error {
	rec, seen, err := h.store.EvalRequestState(ctx, req.RequestID)
	if err != nil {
		return pull.Transient("eval request lookup", err)
	}
	if seen && rec.State == store.RequestDone {
		return h.finishCompare(ctx, req, rec, false)
	}
	deps, set, err := h.compareDeps(req, greq)
	if err != nil {
		return h.refuseOrRetry(req, err)
	}
	cid := rec.RunID
	if !seen {
		cid = ids.New("cmp", h.now())
	}
	cid, done, err := h.claim(ctx, req, cid, func(raw json.RawMessage) (string, error) {
		var res evalrun.CompareResult
		err := json.Unmarshal(raw, &res)
		return compareWarning(res, nil), err
	})
	if done || err != nil {
		return err
	}
	if !seen {
		if rec, err = h.store.ClaimRequest(ctx, req.RequestID, cid, h.now()); err != nil {
			return pull.Transient("record eval request", err)
		}
		if rec.State == store.RequestDone {
			return h.finishCompare(ctx, req, rec, false)
		}
	}
	rec.RunID = cid
	creq := evalrun.CompareRequest{Set: set, Models: req.Models, Judge: req.Judge, Fresh: req.Fresh, MaxCostUSD: greq.MaxCostUSD,
		ComparisonID: cid, AgentID: req.AgentID, Options: compare.Options{Alpha: req.Alpha, MinPairs: req.MinPairs}}
	if creq.Judge == "" {
		creq.Judge = h.opts.Judge
	}
	var journals []*Journal
	if h.opts.Claims != nil {
		creq.Journal = func(ctx context.Context, model string) (evalrun.Journal, evalrun.Prior, error) {
			j, prior, err := h.opts.Claims.Journal(ctx, modelLedgerID(req.RequestID, model), h.logger())
			if err != nil {
				return nil, prior, err
			}
			if n := len(prior.Cases) + len(prior.Lost); n > 0 || prior.Spend.Calls > 0 {
				h.logger().Info("eval comparison model resumed", "request_id", req.RequestID, "comparison_id", cid, "model", model,
					"paid_calls", prior.Spend.Calls, "spent_usd", float64(prior.Spend.Micro)/1e6, "cases_kept", len(prior.Cases), "cases_lost", len(prior.Lost))
			}
			journals = append(journals, j)
			return j, prior, nil
		}
	}
	res, err := evalrun.Compare(ctx, deps, creq)
	if err != nil {
		return h.refuseOrRetry(req, err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return pull.Permanent("encode eval comparison", err)
	}
	if err := h.store.CommitResult(ctx, req.RequestID, cid, raw, h.now()); err != nil {
		if errors.Is(err, store.ErrAlreadyDone) {
			if rec, _, err = h.store.EvalRequestState(ctx, req.RequestID); err == nil {
				return h.finishCompare(ctx, req, rec, false)
			}
		}
		return pull.Transient("commit eval comparison", err)
	}
	rec.State, rec.Result, rec.Emitted = store.RequestDone, raw, 0
	if err := h.finishCompare(ctx, req, rec, true); err != nil {
		return err
	}
	for _, j := range journals {
		if err := j.Forget(ctx); err != nil {
			h.logger().Warn("eval request spend ledger not removed (the bucket's TTL will)", "request_id", req.RequestID, "err", err)
		}
	}
	return nil
}

// modelLedgerID is the spend ledger id of one model of a comparison
// request.
func modelLedgerID(requestID, model string) string {
	return requestID + "\x00compare\x00" + model
}

// compareDeps are the grading deps and the loaded set of a comparison
// request: every file read confined, the worker's model registry, and
// for a request naming an index generation the builder answering its rag
// cases from it. Events are left out: finishCompare emits them once the
// comparison is committed.
func (h *Handler) compareDeps(req Request, greq evalrun.Request) (evalrun.Deps, *grading.EvalSet, error) {
	d := h.confinedDeps()
	d.Models = h.opts.Models
	d.Events = nil
	if req.Index != "" {
		if h.opts.Index == nil {
			return d, nil, fmt.Errorf("%w: field index: no index store on this worker", grading.ErrBadRequest)
		}
		d.RAG = grading.StoredRAG(h.opts.Index, req.Index, h.opts.Providers, d.ReadFile)
	}
	var set *grading.EvalSet
	var err error
	if greq.EvalSetPath != "" {
		set, err = grading.LoadEvalSetWith(greq.EvalSetPath, d.ReadFile)
	} else {
		set, err = grading.ParseEvalSetWith(greq.EvalSet, "", d.ReadFile)
	}
	if err != nil {
		return d, nil, fmt.Errorf("%w: %w", grading.ErrBadRequest, err)
	}
	return d, set, nil
}

// finishCompare emits the events of the runs graded for the committed
// comparison not yet emitted (each run's evalrun.Events, in the order of
// GradedRuns), marks the claim done and replies.
func (h *Handler) finishCompare(ctx context.Context, req Request, rec store.EvalRequest, fresh bool) error {
	var res evalrun.CompareResult
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		return pull.Permanent("stored eval comparison unreadable", fmt.Errorf("request %s: %w", req.RequestID, err))
	}
	var runs []evalrun.Result
	var evs []envelope.Event
	for _, id := range res.GradedRuns {
		run, err := h.store.Run(ctx, id)
		if err != nil {
			return pull.Transient("load compared run", err)
		}
		r := evalrun.Result{Run: grading.Summarize(run), Saved: true}
		runs = append(runs, r)
		evs = append(evs, evalrun.Events(r)...)
	}
	if h.deps.Events != nil {
		for i := rec.Emitted; i < len(evs); i++ {
			if _, err := h.deps.Events.Append(ctx, evs[i]); err != nil {
				return pull.Transient("emit eval events", err)
			}
			if err := h.store.MarkEmitted(ctx, req.RequestID, i+1); err != nil {
				return pull.Transient("emit eval events", err)
			}
		}
	}
	// The graded runs go on the fleet's log before anything says the
	// request is done, as a single run does in handle.
	if h.opts.Quality != nil {
		for _, id := range res.GradedRuns {
			if _, err := h.opts.Quality.Publish(ctx, store.KindRun, id); err != nil {
				return pull.Transient("record compared run on the quality log", err)
			}
		}
	}
	if h.opts.Claims != nil {
		if err := h.opts.Claims.Done(ctx, req.RequestID, rec.RunID, rec.Result); err != nil {
			return pull.Transient("mark eval request done", err)
		}
	}
	replayed := !fresh && (h.deps.Events == nil || rec.Emitted >= len(evs))
	if !replayed && h.opts.OnResult != nil {
		for _, r := range runs {
			h.opts.OnResult(req, r)
		}
	}
	h.reply(req, Reply{RequestID: req.RequestID, OK: true, Result: rec.Result, Replayed: replayed, Warning: compareWarning(res, runs)})
	return nil
}

// compareWarning is the Reply.Warning of a comparison: models the cap
// left ungraded, event or span problems, runs graded with no case
// measured.
func compareWarning(res evalrun.CompareResult, runs []evalrun.Result) string {
	var w []string
	for _, ng := range res.NotGraded {
		w = append(w, fmt.Sprintf("model %s not graded: %s", ng.Model, ng.Reason))
	}
	w = append(w, res.Problems...)
	for _, r := range runs {
		if un := r.Run.Unmeasured(); len(r.Run.Scores) > 0 && len(un) == len(r.Run.Scores) {
			w = append(w, fmt.Sprintf("model %s: no case could be graded: every one of the %d cases is unmeasured (first: %s: %s); the run is stored and compared",
				r.Run.Model, len(un), un[0].CaseID, un[0].Unmeasured))
		}
	}
	return strings.Join(w, "; ")
}
