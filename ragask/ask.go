package ragask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/verdryx/verdryx/internal/ids"
	"github.com/verdryx/verdryx/internal/strictjson"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/streams"
)

// Asker answers RAG questions (rag.Pipeline implements it).
type Asker interface {
	// AskWith answers question from the o.TopK best chunks o.Filter
	// allows. The record names the index generation that answered; with
	// an error it may still name it (and the reply then does).
	AskWith(ctx context.Context, question string, o rag.AskOptions) (rag.Record, error)
}

var _ Asker = (*rag.Pipeline)(nil)

// Request is a RAG ask; a message that is not JSON is taken as the
// question itself.
type Request struct {
	Question string `json:"question"`
	// TopK is the number of chunks retrieved: 1 to MaxTopK; absent (0
	// here, omitted) means rag.DefaultTopK. A top_k of 0 on the wire, or
	// one that is not a whole number, is refused.
	TopK int `json:"top_k,omitempty"`
	// Filter restricts retrieval to the chunks whose metadata match every
	// key (rag.Filter): {"source": "manual/locks.md"}. A key no chunk
	// has, an empty key or value, or a filter nothing matches is refused.
	Filter map[string]string `json:"filter,omitempty"`
}

// MaxTopK bounds an ask's top_k.
const MaxTopK = 20

// SpanAsk names the span of one ask.
const SpanAsk = "verdryx.rag.ask"

// Tracer records an ask's span, under which the provider calls of the ask
// (the question's embedding, the generator) are recorded as GenAI spans
// (producer.Spans implements it). StartRun must not block on the network.
type Tracer interface {
	StartRun(ctx context.Context, name, runID, agentID string, start time.Time) (context.Context, func(end time.Time, data map[string]any, err error))
}

// DeadLetterFunc copies an ask that cannot be answered where it asked
// (its reply subject refused) with the reason; it may block until the
// copy is stored.
type DeadLetterFunc func(ctx context.Context, subject string, data []byte, header nats.Header, reason string) error

// Reply is the reply: the full record, or an error; either way the index
// generation that answered, when the asker named one (an ask refused
// before reaching it names none).
type Reply struct {
	Record *rag.Record `json:"record,omitempty"`
	Error  string      `json:"error,omitempty"`
	// IndexGeneration is the record's IndexGeneration, set on errors too.
	IndexGeneration string `json:"index_generation,omitempty"`
}

// maxQuestionBytes bounds a question (8 KiB), the question itself once
// trimmed, not the message holding it.
const maxQuestionBytes = 8 << 10

// maxAskBytes bounds an ask's message: a question of maxQuestionBytes
// written with JSON escapes, a top_k and a filter fit.
const maxAskBytes = 8 * maxQuestionBytes

// Server answers RAG asks on a core NATS subject with request/reply, in
// a queue group so several workers share them.
type Server struct {
	nc      *nats.Conn
	subject string
	asker   Asker
	opts    Options
}

// Options configure an Server.
type Options struct {
	// Timeout bounds one ask; 0 means 2 minutes.
	Timeout time.Duration
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Replies decides which reply subjects are answered, as for eval
	// requests: the zero value allows _INBOX.> and verdryx.reply.> and
	// never a subject bound to a verdryx stream.
	Replies streams.ReplyPolicy
	// Asked counts answered asks; may be nil.
	Asked func(ok bool)
	// DeadLetter, when set, receives every ask whose reply subject is
	// refused, with the reason (the asker would otherwise wait for ever).
	DeadLetter DeadLetterFunc
	// Tracer, when set, records one span per ask (SpanAsk).
	Tracer Tracer
	// Now stamps spans and ask ids; nil means time.Now.
	Now func() time.Time
}

// NewServer returns a server answering asks on subject with asker.
func NewServer(nc *nats.Conn, subject string, asker Asker, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Server{nc: nc, subject: subject, asker: asker, opts: opts}
}

// Run subscribes and answers until ctx is canceled, then drains the
// subscription so in-flight asks finish.
func (a *Server) Run(ctx context.Context) error {
	log := a.opts.Logger
	timeout := a.opts.Timeout
	sub, err := a.nc.QueueSubscribe(a.subject, "verdryx", func(m *nats.Msg) {
		if m.Reply == "" {
			return // nobody to answer: do no work
		}
		if err := a.opts.Replies.Check(m.Reply); err != nil {
			// A client may not make verdryx publish into its own streams
			// (or anywhere but a reply subject): the ask is dead-lettered
			// with the reason instead of answered.
			log.Warn("ask refused", "err", err)
			if a.opts.Asked != nil {
				a.opts.Asked(false)
			}
			if a.opts.DeadLetter != nil {
				if derr := a.opts.DeadLetter(ctx, m.Subject, m.Data, m.Header, "reply_to refused: "+err.Error()); derr != nil {
					log.Warn("ask dead-letter", "err", derr)
				}
			}
			return
		}
		reply := a.answer(ctx, m.Data, timeout)
		if a.opts.Asked != nil {
			a.opts.Asked(reply.Error == "")
		}
		b, err := json.Marshal(reply)
		if err != nil {
			b, _ = json.Marshal(Reply{Error: "encode record: " + err.Error()})
		}
		// Core NATS, fire and forget: a requester that went away misses it.
		if err := a.nc.Publish(m.Reply, b); err != nil {
			log.Warn("ask reply", "subject", m.Reply, "err", err)
		}
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return sub.Drain()
}

func (a *Server) answer(ctx context.Context, data []byte, timeout time.Duration) Reply {
	q, o, err := parseQuestion(data)
	if err != nil {
		return Reply{Error: err.Error()}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var end func(time.Time, map[string]any, error)
	if a.opts.Tracer != nil {
		start := a.opts.Now()
		actx, end = a.opts.Tracer.StartRun(actx, SpanAsk, ids.New("ask", start), "", start)
	}
	rec, err := a.asker.AskWith(actx, q, o)
	if end != nil {
		end(a.opts.Now(), SpanData(rec, o), err)
	}
	if err != nil {
		return Reply{Error: err.Error(), IndexGeneration: rec.IndexGeneration}
	}
	return Reply{Record: &rec, IndexGeneration: rec.IndexGeneration}
}

// SpanData is what an ask's span says: what answered it and what was
// retrieved (never the question or the answer).
func SpanData(rec rag.Record, o rag.AskOptions) map[string]any {
	d := map[string]any{"top_k": o.TopK, "index_generation": rec.IndexGeneration, "embedder": rec.Embedder,
		"generator": rec.Generator, "retrieved_ids": strings.Join(rec.RetrievedIDs, ",")}
	if len(o.Filter) > 0 {
		keys := make([]string, 0, len(o.Filter))
		for k, v := range o.Filter {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		d["filter"] = strings.Join(keys, ",")
	}
	return d
}

// parseQuestion returns the question of an ask, its top_k (defaulted)
// and its filter.
func parseQuestion(data []byte) (string, rag.AskOptions, error) {
	o := rag.AskOptions{TopK: rag.DefaultTopK}
	if len(data) > maxAskBytes {
		return "", o, fmt.Errorf("ask of %d bytes: longer than %d", len(data), maxAskBytes)
	}
	s := strings.TrimSpace(string(data))
	if strings.HasPrefix(s, "{") {
		// Request's fields, with top_k as written: 0, 2.5 and "3" are
		// refused, not taken for absent or quoted as int64's range.
		var req struct {
			Question string            `json:"question"`
			TopK     json.RawMessage   `json:"top_k"`
			Filter   map[string]string `json:"filter"`
		}
		if err := strictjson.Decode(data, &req); err != nil {
			return "", o, errors.New("malformed ask: " + err.Error())
		}
		s = strings.TrimSpace(req.Question)
		if req.TopK != nil && string(req.TopK) != "null" {
			k, err := strconv.ParseInt(string(req.TopK), 10, 64)
			if err != nil || k < 1 || k > MaxTopK {
				return "", o, fmt.Errorf("field top_k: %s, want a whole number from 1 to %d", req.TopK, MaxTopK)
			}
			o.TopK = int(k)
		}
		for k, v := range req.Filter {
			if strings.TrimSpace(k) == "" || v == "" {
				return "", o, fmt.Errorf("field filter: %q: want a non-empty key and value", k+"="+v)
			}
		}
		if len(req.Filter) > 0 {
			o.Filter = req.Filter
		}
	}
	if s == "" {
		return "", o, errors.New("field question: missing or empty")
	}
	if len(s) > maxQuestionBytes {
		return "", o, fmt.Errorf("question of %d bytes: longer than 8 KiB (%d bytes)", len(s), maxQuestionBytes)
	}
	return s, o, nil
}
