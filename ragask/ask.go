package ragask

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/streams"
)

// Asker answers RAG questions (rag.Pipeline implements it).
type Asker interface {
	Ask(ctx context.Context, question string) (rag.Record, error)
}

// Request is a RAG ask; a message that is not JSON is taken as the
// question itself.
type Request struct {
	Question string `json:"question"`
}

// Reply is the reply: the full record, or an error.
type Reply struct {
	Record *rag.Record `json:"record,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// maxQuestionBytes bounds a question (8 KiB).
const maxQuestionBytes = 8 << 10

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
}

// NewServer returns a server answering asks on subject with asker.
func NewServer(nc *nats.Conn, subject string, asker Asker, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
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
			// (or anywhere but a reply subject).
			log.Warn("ask refused", "err", err)
			if a.opts.Asked != nil {
				a.opts.Asked(false)
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
		if err := producer.Reply(a.nc, m.Reply, b); err != nil {
			log.Warn("ask reply", "err", err)
		}
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return sub.Drain()
}

func (a *Server) answer(ctx context.Context, data []byte, timeout time.Duration) Reply {
	q, err := parseQuestion(data)
	if err != nil {
		return Reply{Error: err.Error()}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	rec, err := a.asker.Ask(actx, q)
	if err != nil {
		return Reply{Error: err.Error()}
	}
	return Reply{Record: &rec}
}

func parseQuestion(data []byte) (string, error) {
	if len(data) > maxQuestionBytes {
		return "", errors.New("question longer than 8 KiB")
	}
	s := strings.TrimSpace(string(data))
	if strings.HasPrefix(s, "{") {
		var req Request
		if err := calls.DecodeStrict(data, &req); err != nil {
			return "", errors.New("malformed ask: " + err.Error())
		}
		s = strings.TrimSpace(req.Question)
	}
	if s == "" {
		return "", errors.New("field question: missing or empty")
	}
	return s, nil
}
