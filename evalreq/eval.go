package evalreq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/internal/ids"
	"github.com/verdryx/verdryx/internal/strictjson"
	"github.com/verdryx/verdryx/provider/typryx"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
)

// maxInlineSet bounds an eval set sent inline in a request (1 MiB).
const maxInlineSet = 1 << 20

// Request is the JSON shape of an eval-request message.
type Request struct {
	RequestID   string          `json:"request_id"`
	EvalSetPath string          `json:"eval_set_path,omitempty"`
	EvalSet     json.RawMessage `json:"eval_set,omitempty"`
	// Model is "stub" (the default) or a model the worker allows
	// (Options.Allowed); Judge likewise names the judge of llm_judge
	// cases, "" meaning the worker's (Options.Judge).
	Model string `json:"model,omitempty"`
	// Models, instead of Model, compares these models on the set
	// (evalrun.Compare): two or more distinct ids, each "stub" or allowed;
	// the reply's result is the comparison (evalrun.CompareResult, as
	// compare --json prints it). Fresh grades every model again, even one
	// with a reusable stored run; MinPairs is the fewest paired cases a
	// verdict is given on (0: the default) and Alpha the tests'
	// significance level. The drift fields and Semantic do not go with it.
	Models   []string `json:"models,omitempty"`
	Fresh    bool     `json:"fresh,omitempty"`
	MinPairs int      `json:"min_pairs,omitempty"`
	Judge    string   `json:"judge,omitempty"`
	AgentID  string   `json:"agent_id,omitempty"`
	// Index, when set ("active" or a generation id), answers the set's
	// rag cases from that index generation of the worker's data directory,
	// with the embedder that built it (rag.OpenStored); "" answers them
	// with the offline pipeline in memory.
	Index      string  `json:"index,omitempty"`
	BaselineID string  `json:"baseline_id,omitempty"`
	Window     int     `json:"window,omitempty"`
	Threshold  float64 `json:"threshold,omitempty"`
	// AllowChangedSet, Seed and Alpha are evalrun.Request's: a drift check
	// over runs of a changed set, the drift check's seed and its
	// significance level.
	AllowChangedSet bool `json:"allow_changed_set,omitempty"`
	// AllowChangedSettings pools runs graded under other settings than
	// the baseline's run (evalrun.DriftRequest.AllowChangedSettings).
	AllowChangedSettings bool    `json:"allow_changed_settings,omitempty"`
	Seed                 *uint64 `json:"seed,omitempty"`
	Alpha                float64 `json:"alpha,omitempty"`
	// MaxCostUSD caps the priced spend of the request's paid calls (US
	// dollars, 0: none asked), bounded by the worker's Options.MaxCostUSD:
	// a request asking more, or none, on a worker with a bound gets the
	// worker's bound. Semantic adds the semantic rag checks
	// (evalrun.Request).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	Semantic   bool    `json:"semantic,omitempty"`
	// ReplyTo, or the Verdryx-Reply-To header, names a subject the result
	// is published to. (A JetStream-captured subject answers a plain NATS
	// request with its own publish ack, so replies travel this way.)
	ReplyTo string `json:"reply_to,omitempty"`
}

// GradingRequest is the grading request r asks for, every field kept but
// ReplyTo, Judge and Index, which are the worker's: they choose where the
// result goes and the grading deps (Handler.requestDeps). EvalSetPath is as given: the handler
// resolves it under its roots before grading.
func (r Request) GradingRequest() evalrun.Request {
	return evalrun.Request{RequestID: r.RequestID, EvalSetPath: r.EvalSetPath, EvalSet: r.EvalSet,
		Model: r.Model, AgentID: r.AgentID, BaselineID: r.BaselineID, Window: r.Window, Threshold: r.Threshold,
		AllowChangedSet: r.AllowChangedSet, AllowChangedSettings: r.AllowChangedSettings, Seed: r.Seed, Alpha: r.Alpha, MaxCostUSD: r.MaxCostUSD, Semantic: r.Semantic}
}

// CostCap is the cap a request runs under on a worker whose bound is
// bound (0: none): the request's max_cost_usd, lowered to the bound; a
// request asking none gets the bound.
func CostCap(asked, bound float64) float64 {
	if bound > 0 && (asked <= 0 || asked > bound) {
		return bound
	}
	return asked
}

// HeaderReplyTo is the header naming where an eval result is sent.
const HeaderReplyTo = "Verdryx-Reply-To"

// Reply is what a requester receives.
type Reply struct {
	RequestID string          `json:"request_id"`
	OK        bool            `json:"ok"`
	Error     string          `json:"error,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Replayed  bool            `json:"replayed,omitempty"` // answered from the store after a redelivery
	// Warning says what the result alone does not make plain: that no case
	// could be graded (every model or judge call failed); the run is
	// stored all the same and is never graded again.
	Warning string `json:"warning,omitempty"`
	// History says, for a request with a drift check on a worker sharing
	// the fleet's quality log, how far the store had applied the log when
	// the check ran (omitted otherwise, and on a replayed answer).
	History *History `json:"history,omitempty"`
}

// History is how much of the fleet's quality history a drift check saw.
type History struct {
	// CaughtUp is true when the store had applied every record the log
	// held when the request arrived; else Behind records were missing
	// after waiting Waited (Options.CatchUpWait), or Error says why the
	// log could not be read.
	CaughtUp bool   `json:"caught_up"`
	Behind   uint64 `json:"behind,omitempty"`
	Waited   string `json:"waited,omitempty"`
	Error    string `json:"error,omitempty"`
}

// note is the History's part of a reply's warning ("" when caught up).
func (h *History) note() string {
	switch {
	case h == nil || h.CaughtUp:
		return ""
	case h.Error != "":
		return "drift checked against this worker's store alone: the quality log could not be read (" + h.Error + ")"
	}
	return fmt.Sprintf("drift checked against this worker's store %d records behind the fleet's quality log (waited %s for it to catch up)", h.Behind, h.Waited)
}

// QualityLog is the fleet's quality log as the handler uses it
// (qualitylog.Log).
type QualityLog interface {
	// Publish records a stored run (kind "run") on the log, idempotently.
	Publish(ctx context.Context, kind, id string) (uint64, error)
	// CatchUp waits, at most bound, for the store to apply the log as it
	// is now; it returns how many records the store is still behind.
	CatchUp(ctx context.Context, bound time.Duration) (uint64, error)
}

// DefaultCatchUpWait is Options.CatchUpWait's default.
const DefaultCatchUpWait = 5 * time.Second

// claim takes the fleet-wide claim of req for id (with Options.Claims;
// without, id as it is). It returns the id the claim holds (another
// attempt's, when one began it) and done when another worker finished the
// request: then it has answered from that worker's claim, with the
// warning warn reads from the stored result, and the caller returns
// err. A live instance grading it elsewhere is pull.Elsewhere (retried;
// readiness stays as it is).
func (h *Handler) claim(ctx context.Context, req Request, id string, warn func(json.RawMessage) (string, error)) (string, bool, error) {
	if h.opts.Claims == nil {
		return id, false, nil
	}
	cl, err := h.opts.Claims.Claim(ctx, req.RequestID, id)
	if errors.Is(err, errClaimedElsewhere) {
		return "", true, pull.Elsewhere("claim eval request", err)
	}
	if err != nil {
		return "", true, pull.Transient("claim eval request", err)
	}
	if cl.State != claimDone {
		return cl.RunID, false, nil
	}
	if len(cl.Result) == 0 {
		// Over maxClaimResult: answered by run id, which the fleet's
		// quality log puts in every store.
		raw, err := json.Marshal(map[string]string{"run_id": cl.RunID})
		if err != nil {
			return "", true, pull.Permanent("encode claimed run id", err)
		}
		h.reply(req, Reply{RequestID: req.RequestID, OK: true, Result: raw, Replayed: true,
			Warning: fmt.Sprintf("the result is larger than a claim carries (%d KiB): read run %s from a store", maxClaimResult>>10, cl.RunID)})
		return "", true, nil
	}
	w, err := warn(cl.Result)
	if err != nil {
		return "", true, pull.Permanent("claimed eval result unreadable", fmt.Errorf("request %s: %w", req.RequestID, err))
	}
	h.reply(req, Reply{RequestID: req.RequestID, OK: true, Result: cl.Result, Replayed: true, Warning: w})
	return "", true, nil
}

// warning is the Reply.Warning of a result: a run the cost cap stopped,
// a run with no case graded.
func warning(res evalrun.Result) string {
	var w []string
	if r := res.Run; r.CostLimited > 0 {
		w = append(w, fmt.Sprintf("cost limit $%g reached: %d cases unmeasured (%s) from case %s; the run is stored",
			r.CostLimitUSD, r.CostLimited, llm.ReasonCostLimit, r.StoppedAtCase))
	}
	if un := res.Run.Unmeasured(); len(res.Run.Scores) > 0 && len(un) == len(res.Run.Scores) {
		w = append(w, fmt.Sprintf("no case could be graded: every one of the %d cases is unmeasured (first: %s: %s); the run is stored", len(un), un[0].CaseID, un[0].Unmeasured))
	}
	return strings.Join(w, "; ")
}

// Handler runs eval requests exactly once, across crashes and
// redeliveries:
//
//  1. every check that can refuse the request (fields, paths, model,
//     baseline) runs before anything is stored;
//  2. the request id is recorded with a run id before grading starts, so a
//     request regraded after a crash keeps its run id;
//  3. the run, its scores and the request's result are committed in one
//     transaction;
//  4. the result's events are emitted after the commit, in order, each
//     recorded as emitted once durable; a redelivered request whose run was
//     committed only replies and emits what was not yet emitted (the NATS
//     chain drops a re-emitted event by its message id).
//
// A request id already done is answered from the store.
type Handler struct {
	store *store.Store
	deps  evalrun.Deps
	nc    *nats.Conn
	opts  Options
}

// Options configure a Handler.
type Options struct {
	// Roots are the directories a request may name files under.
	Roots confine.Roots
	// Files reads every file a request names (eval set, corpus, golden);
	// nil confines reads to Roots with confine's default limits.
	Files *confine.Reader
	// Claims, when set, makes one run per request_id hold across workers
	// with stores of their own (see Claims); nil: per store only.
	Claims *Claims
	// Replies decides which reply_to subjects are answered; the zero
	// value allows _INBOX.> and verdryx.reply.> and never a stream subject.
	Replies streams.ReplyPolicy
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
	// OnResult, when set, is called with every result this handler
	// finished (the CLI prints them as they are produced).
	OnResult func(req Request, res evalrun.Result)
	// Now stamps claims and commits; nil means time.Now.
	Now func() time.Time
	// Models resolves the model and judge ids a request names (llm.Models);
	// nil accepts only "stub". Only ids in Allowed (and "stub") are ever
	// resolved.
	Models func(id string) (llm.Model, error)
	// Allowed are the model ids a request may name as model or judge
	// besides "stub" (serve --allow-model); a request naming another is
	// refused before anything is claimed or stored.
	Allowed []string
	// Judge is the judge id of a request that names none; "" means the
	// request's model (stub for stub), as eval judges.
	// It need not be in Allowed: the operator chose it.
	Judge string
	// Index is the index store a request's "index" field opens
	// generations of; nil refuses such a request.
	Index *index.Store
	// Providers reach the embedder of a generation opened for a request.
	Providers rag.Providers
	// MaxCostUSD bounds every request's cap (CostCap); 0 means a request
	// runs under the cap it asks for, or none.
	MaxCostUSD float64
	// Quality, when set, is the fleet's quality log: every committed run
	// is recorded on it before the request is acknowledged (a run
	// committed by an attempt that died first is recorded by the next
	// one), and a drift check first waits, at most CatchUpWait
	// (DefaultCatchUpWait when 0), for the store to apply it.
	Quality     QualityLog
	CatchUpWait time.Duration
	// AfterCommit, when set, runs after a run is committed to the store
	// and before it is recorded on the log (a test seam: crash tests stop
	// the process there).
	AfterCommit func(requestID, runID string)
}

// NewHandler returns a handler that grades eval requests with deps,
// records them in st and replies through nc (nil: no replies).
func NewHandler(st *store.Store, deps evalrun.Deps, nc *nats.Conn, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CatchUpWait <= 0 {
		opts.CatchUpWait = DefaultCatchUpWait
	}
	return &Handler{store: st, deps: deps, nc: nc, opts: opts}
}

// HandleBatch implements pull.BatchHandler; requests are run one at a
// time.
func (h *Handler) HandleBatch(ctx context.Context, msgs []pull.Msg) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		errs[i] = h.handle(ctx, m)
	}
	return errs
}

func (h *Handler) logger() *slog.Logger { return h.opts.Logger }

func (h *Handler) now() time.Time { return h.opts.Now() }

func (h *Handler) handle(ctx context.Context, m pull.Msg) error {
	if n := len(m.Data()); n > maxInlineSet+64<<10 {
		return pull.Permanent("malformed eval request", fmt.Errorf("%d bytes, at most %d", n, maxInlineSet+64<<10))
	}
	req, decErr := Decode(m.Data())
	if req.ReplyTo == "" {
		req.ReplyTo = m.Headers().Get(HeaderReplyTo)
	}
	if req.ReplyTo != "" {
		if err := h.opts.Replies.Check(req.ReplyTo); err != nil {
			return pull.Permanent("reply_to refused", err)
		}
	}
	if decErr != nil {
		h.reply(req, Reply{RequestID: req.RequestID, Error: decErr.Error()})
		return pull.Permanent("malformed eval request", decErr)
	}
	greq, err := h.validate(req)
	if err != nil {
		h.reply(req, Reply{RequestID: req.RequestID, Error: err.Error()})
		return pull.Permanent("invalid eval request", err)
	}
	if len(req.Models) > 0 {
		return h.handleCompare(ctx, req, greq)
	}
	rec, seen, err := h.store.EvalRequestState(ctx, req.RequestID)
	if err != nil {
		return pull.Transient("eval request lookup", err)
	}
	if seen && rec.State == store.RequestDone {
		return h.finish(ctx, req, rec, false, nil)
	}
	var hist *History
	if req.BaselineID != "" && h.opts.Quality != nil {
		hist = h.catchUp(ctx)
	}
	deps, err := h.requestDeps(req)
	if err != nil {
		return h.refuseOrRetry(req, err)
	}
	plan, err := evalrun.Prepare(ctx, deps, greq)
	if err != nil {
		return h.refuseOrRetry(req, err)
	}
	runID := rec.RunID
	if !seen {
		runID = ids.New("run", h.now())
	}
	runID, done, err := h.claim(ctx, req, runID, func(raw json.RawMessage) (string, error) {
		var res evalrun.Result
		err := json.Unmarshal(raw, &res)
		return warning(res), err
	})
	if done || err != nil {
		return err
	}
	var (
		journal *Journal
		prior   evalrun.Prior
	)
	if h.opts.Claims != nil {
		// Every paid call is recorded before it is made; what earlier
		// attempts paid counts against the cap and their graded cases
		// are kept.
		if journal, prior, err = h.opts.Claims.Journal(ctx, req.RequestID, h.logger()); err != nil {
			return pull.Transient("eval request spend ledger", err)
		}
		if n := len(prior.Cases) + len(prior.Lost); n > 0 || prior.Spend.Calls > 0 {
			h.logger().Info("eval request resumed", "request_id", req.RequestID, "run_id", runID,
				"paid_calls", prior.Spend.Calls, "spent_usd", float64(prior.Spend.Micro)/1e6, "cases_kept", len(prior.Cases), "cases_lost", len(prior.Lost))
		}
	}
	if !seen {
		if rec, err = h.store.ClaimRequest(ctx, req.RequestID, runID, h.now()); err != nil {
			return pull.Transient("record eval request", err)
		}
		if rec.State == store.RequestDone { // finished meanwhile
			return h.finish(ctx, req, rec, false, nil)
		}
	}
	rec.RunID = runID
	if journal != nil {
		plan.Resume(journal, prior)
	}
	gradeStart := h.now()
	res, err := plan.Grade(ctx, rec.RunID)
	if err != nil {
		return h.refuseOrRetry(req, err)
	}
	res.Saved = true
	raw, err := json.Marshal(res)
	if err != nil {
		return pull.Permanent("encode eval result", err)
	}
	if err := h.store.CommitRequest(ctx, req.RequestID, res.Run.Run, raw, h.now()); err != nil {
		if errors.Is(err, store.ErrAlreadyDone) {
			if rec, _, err = h.store.EvalRequestState(ctx, req.RequestID); err == nil {
				return h.finish(ctx, req, rec, false, nil)
			}
		}
		return pull.Transient("commit eval run", err)
	}
	if h.opts.AfterCommit != nil {
		h.opts.AfterCommit(req.RequestID, rec.RunID)
	}
	evalrun.Spans(ctx, h.deps.Spans, res, gradeStart, h.now())
	rec.State, rec.Result, rec.Emitted = store.RequestDone, raw, 0
	if err := h.finish(ctx, req, rec, true, hist); err != nil {
		return err
	}
	if journal != nil {
		// The run, with every attempt's spend, is stored and claimed done.
		if err := journal.Forget(ctx); err != nil {
			h.logger().Warn("eval request spend ledger not removed (the bucket's TTL will)", "request_id", req.RequestID, "err", err)
		}
	}
	return nil
}

// refuseOrRetry replies with and terminates a request that can never
// succeed as sent, or that typryx refused (a non-200 status, named with
// its code) or answered malformed; anything else, typryx unreachable
// included, is retried. Nothing of a refused run is stored.
func (h *Handler) refuseOrRetry(req Request, err error) error {
	var refused *typryx.RefusalError
	switch {
	case errors.Is(err, grading.ErrBadRequest):
		h.reply(req, Reply{RequestID: req.RequestID, Error: err.Error()})
		return pull.Permanent("eval request refused", err)
	case errors.Is(err, grading.ErrTypedService) && (errors.As(err, &refused) || errors.Is(err, typryx.ErrMalformed)):
		h.reply(req, Reply{RequestID: req.RequestID, Error: err.Error()})
		return pull.Permanent("typryx refused the eval run", err)
	}
	return pull.Transient("eval run", err)
}

// finish emits the committed result's events not yet emitted, then
// replies. An event that cannot be emitted fails the delivery
// transiently: the redelivery emits from there.
func (h *Handler) finish(ctx context.Context, req Request, rec store.EvalRequest, fresh bool, hist *History) error {
	var res evalrun.Result
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		return pull.Permanent("stored eval result unreadable", fmt.Errorf("request %s: %w", req.RequestID, err))
	}
	evs := evalrun.Events(res)
	if h.deps.Events != nil {
		for i := rec.Emitted; i < len(evs); i++ {
			if _, err := h.deps.Events.Append(ctx, evs[i]); err != nil {
				return pull.Transient("emit eval events", err)
			}
			if err := h.store.MarkEmitted(ctx, req.RequestID, i+1); err != nil {
				return pull.Transient("emit eval events", err)
			}
		}
		for _, ev := range evs {
			if ev.AgentID == "" {
				res.EventsSkipped++
			} else {
				res.EventsWritten++
			}
		}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return pull.Permanent("encode eval result", err)
	}
	// The run goes on the fleet's log before anything says the request is
	// done: a worker dying before this line leaves the request
	// unacknowledged, and whoever runs it next records the run.
	if h.opts.Quality != nil && rec.RunID != "" {
		if _, err := h.opts.Quality.Publish(ctx, store.KindRun, rec.RunID); err != nil {
			return pull.Transient("record eval run on the quality log", err)
		}
	}
	// Only now, with the run committed and every event emitted, may another
	// worker answer this request from the claim.
	if h.opts.Claims != nil {
		if err := h.opts.Claims.Done(ctx, req.RequestID, rec.RunID, raw); err != nil {
			return pull.Transient("mark eval request done", err)
		}
	}
	replayed := !fresh && rec.Emitted >= len(evs)
	if !replayed && h.opts.OnResult != nil {
		h.opts.OnResult(req, res)
	}
	warn := warning(res)
	if n := hist.note(); n != "" {
		warn = strings.TrimPrefix(warn+"; "+n, "; ")
	}
	h.reply(req, Reply{RequestID: req.RequestID, OK: true, Result: raw, Replayed: replayed, Warning: warn, History: hist})
	return nil
}

// catchUp waits, at most CatchUpWait, for the store to apply the quality
// log, and says how far it got.
func (h *Handler) catchUp(ctx context.Context) *History {
	behind, err := h.opts.Quality.CatchUp(ctx, h.opts.CatchUpWait)
	switch {
	case err != nil:
		h.logger().Warn("drift check: quality log unreadable; checking against the store as it is", "err", err)
		return &History{Error: err.Error()}
	case behind > 0:
		h.logger().Warn("drift check: store still behind the quality log", "behind", behind, "waited", h.opts.CatchUpWait)
		return &History{Behind: behind, Waited: h.opts.CatchUpWait.String()}
	}
	return &History{CaughtUp: true}
}

// validate checks the request and resolves its eval set path under the
// roots; nothing outside them is read. The cost cap is the request's,
// bounded by the worker's (CostCap).
func (h *Handler) validate(req Request) (evalrun.Request, error) {
	g, err := Validate(req, h.opts.Roots, h.opts.Allowed)
	g.MaxCostUSD = CostCap(req.MaxCostUSD, h.opts.MaxCostUSD)
	return g, err
}

// Validate checks what can refuse req before anything is stored:
// its fields, that its model and judge are "stub" or in allowed, and that
// its eval_set_path resolves under roots.
func Validate(req Request, roots confine.Roots, allowed []string) (evalrun.Request, error) {
	if req.RequestID == "" {
		return evalrun.Request{}, errors.New("field request_id: missing")
	}
	ids := []struct{ name, id string }{{"model", req.Model}, {"judge", req.Judge}}
	for i, m := range req.Models {
		ids = append(ids, struct{ name, id string }{fmt.Sprintf("models[%d]", i), m})
	}
	for _, f := range ids {
		if f.id != "" && f.id != llm.StubID && !slices.Contains(allowed, f.id) {
			return evalrun.Request{}, fmt.Errorf("field %s: %q is not allowed on this worker (allowed: %s; its operator adds one to the worker's allow list)",
				f.name, f.id, strings.Join(AllowedIDs(allowed), ", "))
		}
	}
	if err := checkModels(req); err != nil {
		return evalrun.Request{}, err
	}
	if (req.EvalSetPath == "") == (len(req.EvalSet) == 0) {
		return evalrun.Request{}, errors.New("exactly one of eval_set_path and eval_set is required")
	}
	if len(req.EvalSet) > maxInlineSet {
		return evalrun.Request{}, fmt.Errorf("field eval_set: %d bytes, at most %d inline", len(req.EvalSet), maxInlineSet)
	}
	g := req.GradingRequest()
	if req.EvalSetPath != "" {
		p, err := roots.Resolve(req.EvalSetPath)
		if err != nil {
			return evalrun.Request{}, fmt.Errorf("field eval_set_path: %w", err)
		}
		g.EvalSetPath = p
	}
	return g, nil
}

// AllowedIDs is the list of model ids a worker allows, as refusals name
// it: "stub" first, then allowed in order, without repeats.
func AllowedIDs(allowed []string) []string {
	ids := []string{llm.StubID}
	for _, id := range allowed {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// requestDeps are the grading deps of one request: every file read
// confined, the worker's model registry, the judge the request names (else
// the worker's) and, for a request naming an index generation, the
// builder answering its rag cases from it. Errors wrap
// grading.ErrBadRequest (a judge whose key is missing, an index field on a
// worker without an index store).
func (h *Handler) requestDeps(req Request) (evalrun.Deps, error) {
	d := h.confinedDeps()
	d.Models = h.opts.Models
	judgeID := req.Judge
	if judgeID == "" {
		judgeID = h.opts.Judge
	}
	if judgeID == "" {
		judgeID = req.Model // as eval judges: the model under evaluation
	}
	if judgeID != "" && judgeID != llm.StubID {
		if h.opts.Models == nil {
			return d, fmt.Errorf("%w: field judge: %q: no model registry on this worker", grading.ErrBadRequest, judgeID)
		}
		m, err := h.opts.Models(judgeID)
		if err != nil {
			return d, fmt.Errorf("%w: field judge: %w", grading.ErrBadRequest, err)
		}
		d.Judge = &grader.Judge{Model: m, Prices: d.Prices}
	}
	if req.Index != "" {
		if h.opts.Index == nil {
			return d, fmt.Errorf("%w: field index: no index store on this worker", grading.ErrBadRequest)
		}
		d.RAG = grading.StoredRAG(h.opts.Index, req.Index, h.opts.Providers, d.ReadFile)
	}
	return d, nil
}

func (h *Handler) reply(req Request, r Reply) {
	if req.ReplyTo == "" || h.nc == nil {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	// Core NATS, fire and forget: a requester that went away misses it
	// (and asks again: it is answered from the store).
	if err := h.nc.Publish(req.ReplyTo, b); err != nil {
		h.logger().Warn("eval reply", "request_id", req.RequestID, "subject", req.ReplyTo, "err", err)
	}
}

// checkAgentID validates an agent_id where it enters: empty (unset) or the
// contract's canonical agent:// form.
func checkAgentID(id string) error {
	if id == "" || envelope.ValidAgentID(id) {
		return nil
	}
	return fmt.Errorf("field agent_id: %q does not match ^agent://[a-z0-9.-]+/[a-z0-9._/-]+$ (max 255 bytes)", id)
}

// Decode decodes an eval-request message strictly: unknown
// fields and trailing data are errors, agent_id must be canonical.
func Decode(data []byte) (Request, error) {
	var req Request
	if err := strictjson.Decode(data, &req); err != nil {
		return req, err
	}
	return req, checkAgentID(req.AgentID)
}

// files returns the confined reader of an eval handler: Files, or one over
// Roots with the default limits.
func (h *Handler) files() *confine.Reader {
	if h.opts.Files != nil {
		return h.opts.Files
	}
	return &confine.Reader{Roots: h.opts.Roots}
}

// confinedDeps returns the grading deps with every file read confined.
func (h *Handler) confinedDeps() evalrun.Deps {
	d := h.deps
	d.ReadFile = h.files().ReadFile
	return d
}
