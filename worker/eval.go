package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/consumer"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/store"
)

// MaxInlineEvalSet bounds an eval set sent inline in a request (1 MiB).
const MaxInlineEvalSet = 1 << 20

// EvalRequest is the JSON shape of an eval-request message.
type EvalRequest struct {
	RequestID   string          `json:"request_id"`
	EvalSetPath string          `json:"eval_set_path,omitempty"`
	EvalSet     json.RawMessage `json:"eval_set,omitempty"`
	Model       string          `json:"model,omitempty"`
	AgentID     string          `json:"agent_id,omitempty"`
	BaselineID  string          `json:"baseline_id,omitempty"`
	Window      int             `json:"window,omitempty"`
	Threshold   float64         `json:"threshold,omitempty"`
	// ReplyTo, or the Verdryx-Reply-To header, names a subject the result
	// is published to. (A JetStream-captured subject answers a plain NATS
	// request with its own publish ack, so replies travel this way.)
	ReplyTo string `json:"reply_to,omitempty"`
}

// HeaderReplyTo is the header naming where an eval result is sent.
const HeaderReplyTo = "Verdryx-Reply-To"

// EvalReply is what a requester receives.
type EvalReply struct {
	RequestID string          `json:"request_id"`
	OK        bool            `json:"ok"`
	Error     string          `json:"error,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Replayed  bool            `json:"replayed,omitempty"` // answered from the store after a redelivery
}

// EvalHandler runs eval requests. A request id already answered is replied
// to from the store and never run twice.
type EvalHandler struct {
	Store *store.Store
	Deps  grading.Deps
	Roots Roots
	// Files reads every file a request names (eval set, corpus, golden);
	// nil confines reads to Roots with confine's default limits.
	Files *confine.Reader
	// Replies decides which reply_to subjects are answered; the zero
	// value allows _INBOX.> and verdryx.reply.> and never a stream subject.
	Replies ReplyPolicy
	NC      *nats.Conn
	Log     *slog.Logger
	// OnResult, when set, is called with every finished result (the CLI
	// prints them as they are produced).
	OnResult func(req EvalRequest, res grading.Result)
	Now      func() time.Time
}

// HandleBatch implements consumer.BatchHandler; requests are run one at a
// time.
func (h *EvalHandler) HandleBatch(ctx context.Context, msgs []consumer.Msg) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		errs[i] = h.handle(ctx, m)
	}
	return errs
}

func (h *EvalHandler) logger() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

func (h *EvalHandler) handle(ctx context.Context, m consumer.Msg) error {
	if n := len(m.Data()); n > MaxInlineEvalSet+64<<10 {
		return consumer.Permanent("malformed eval request", fmt.Errorf("%d bytes, at most %d", n, MaxInlineEvalSet+64<<10))
	}
	req, decErr := DecodeEvalRequest(m.Data())
	if req.ReplyTo == "" {
		req.ReplyTo = m.Headers().Get(HeaderReplyTo)
	}
	if req.ReplyTo != "" {
		if err := h.Replies.Check(req.ReplyTo); err != nil {
			return consumer.Permanent("reply_to refused", err)
		}
	}
	if decErr != nil {
		h.reply(req, EvalReply{RequestID: req.RequestID, Error: decErr.Error()})
		return consumer.Permanent("malformed eval request", decErr)
	}
	greq, err := h.validate(req)
	if err != nil {
		h.reply(req, EvalReply{RequestID: req.RequestID, Error: err.Error()})
		return consumer.Permanent("invalid eval request", err)
	}
	if prev, ok, err := h.Store.RequestResult(ctx, req.RequestID); err != nil {
		return consumer.Transient("eval request lookup", err)
	} else if ok {
		h.reply(req, EvalReply{RequestID: req.RequestID, OK: true, Result: prev, Replayed: true})
		return nil
	}
	res, err := grading.Execute(ctx, h.confinedDeps(), greq)
	if err != nil {
		if errors.Is(err, grading.ErrBadRequest) {
			h.reply(req, EvalReply{RequestID: req.RequestID, Error: err.Error()})
			return consumer.Permanent("eval request refused", err)
		}
		return consumer.Transient("eval run", err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return consumer.Permanent("encode eval result", err)
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if err := h.Store.SaveRequestResult(ctx, req.RequestID, raw, now().UTC().Format(time.RFC3339Nano)); err != nil {
		return consumer.Transient("save eval request", err)
	}
	if h.OnResult != nil {
		h.OnResult(req, res)
	}
	h.reply(req, EvalReply{RequestID: req.RequestID, OK: true, Result: raw})
	return nil
}

// validate checks the request and resolves its eval set path under the
// roots; nothing outside them is read.
func (h *EvalHandler) validate(req EvalRequest) (grading.Request, error) {
	if req.RequestID == "" {
		return grading.Request{}, errors.New("field request_id: missing")
	}
	if (req.EvalSetPath == "") == (len(req.EvalSet) == 0) {
		return grading.Request{}, errors.New("exactly one of eval_set_path and eval_set is required")
	}
	if len(req.EvalSet) > MaxInlineEvalSet {
		return grading.Request{}, fmt.Errorf("field eval_set: %d bytes, at most %d inline", len(req.EvalSet), MaxInlineEvalSet)
	}
	g := grading.Request{RequestID: req.RequestID, EvalSet: req.EvalSet, Model: req.Model, AgentID: req.AgentID,
		BaselineID: req.BaselineID, Window: req.Window, Threshold: req.Threshold}
	if req.EvalSetPath != "" {
		p, err := h.Roots.Resolve(req.EvalSetPath)
		if err != nil {
			return grading.Request{}, fmt.Errorf("field eval_set_path: %w", err)
		}
		g.EvalSetPath = p
	}
	return g, nil
}

func (h *EvalHandler) reply(req EvalRequest, r EvalReply) {
	if req.ReplyTo == "" || h.NC == nil {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	if err := h.NC.Publish(req.ReplyTo, b); err != nil {
		h.logger().Warn("eval reply", "request_id", req.RequestID, "err", err)
	}
}
