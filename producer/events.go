package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/envelope"
)

// Sink receives agent-event envelopes. Append returns false with a nil
// error for an event it skipped because it has no agent_id. It blocks until
// the event is durable (or ctx is done) and is safe for concurrent use.
type Sink interface {
	Append(ctx context.Context, ev envelope.Event) (bool, error)
}

// File adapts a chained NDJSON file writer to Sink.
type File struct{ W *envelope.Writer }

// Append implements Sink; the file write does not observe ctx.
func (f File) Append(_ context.Context, ev envelope.Event) (bool, error) { return f.W.Append(ev) }

var _ Sink = File{}

// NATSChain publishes envelopes to one subject as one prev_hash chain. Each
// worker instance owns its own subject (<events subject>.<instance>; a lease
// keeps two live workers from sharing an instance), so a chain never forks
// however many workers run. On start the chain resumes from the last
// message stored on that subject.
//
// Each publish carries Nats-Msg-Id = <subject>:<hash of the event without
// its prev_hash>: an id derived from what the event reports, so an event
// emitted again (a request redelivered after a crash, a retried publish) is
// dropped by JetStream as a duplicate instead of appended twice. When
// JetStream answers Duplicate, or a publish fails (a lost ack may still
// have stored it), the chain re-reads the subject's last message before the
// next append, so the next event always links to what is really stored.
// Every append also carries Nats-Expected-Last-Subject-Sequence, the
// subject sequence of the message it links to, so that two writers of one
// subject (the lease that keeps them apart having failed) can never fork
// the chain: the server refuses the append of the writer whose view is
// stale, which re-reads the subject and links its event to what is stored.
// NATSChain is safe for concurrent use; publishes are serialized because
// each depends on the previous hash.
type NATSChain struct {
	js      jetstream.JetStream
	stream  string
	subject string
	log     *slog.Logger
	retry   *Retrier

	mu        sync.Mutex
	head      string
	lastSeq   uint64 // stream sequence of the subject's last message, 0 when none
	stale     bool   // head must be re-read from the stream before the next append
	published int64
	skipped   int64
}

// ChainOptions configure a NATSChain.
type ChainOptions struct {
	// Logger receives the chain's logs; nil discards them.
	Logger *slog.Logger
	// Retry, when set, retries an append that fails while the stream
	// has no leader (Retrier); nil tries once.
	Retry *Retrier
}

// NewNATSChain resumes the chain of subject from the last message stored in
// stream. It blocks for at most the lookup.
func NewNATSChain(ctx context.Context, js jetstream.JetStream, stream, subject string, opts ChainOptions) (*NATSChain, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &NATSChain{js: js, stream: stream, subject: subject, log: logger.With("component", "events", "subject", subject), retry: opts.Retry}
	if err := c.resync(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// resync sets the head from the last message stored on the subject.
func (c *NATSChain) resync(ctx context.Context) error {
	s, err := c.js.Stream(ctx, c.stream)
	if err != nil {
		return fmt.Errorf("events stream %s: %w", c.stream, err)
	}
	last, err := s.GetLastMsgForSubject(ctx, c.subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		c.head, c.lastSeq = "", 0
	case err != nil:
		return fmt.Errorf("resume chain on %s: %w", c.subject, err)
	default:
		c.lastSeq = last.Sequence
		hash, _, herr := envelope.LineHash(last.Data)
		if herr != nil {
			c.log.Warn("last event on subject is malformed, starting a new chain head", "err", herr)
			c.head = ""
		} else {
			c.head = hash
		}
	}
	c.stale = false
	return nil
}

// Append seals ev onto the chain and publishes it, blocking (at most 10 s
// beyond ctx a try; with ChainOptions.Retry, tries while the stream has no
// leader for up to its bound) until JetStream acknowledges it. An event
// without agent_id is skipped and counted. The chain advances only after
// the acknowledgement; an event JetStream already holds (Duplicate, such
// as a retry whose first ack was lost) is reported as appended, without
// being stored twice.
func (c *NATSChain) Append(ctx context.Context, ev envelope.Event) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.AgentID == "" {
		c.skipped++
		return false, nil
	}
	var ok bool
	err := c.retry.Do(ctx, "publish "+ev.Type+" event to "+c.subject, func(ctx context.Context) (err error) {
		ok, err = c.appendOnce(ctx, ev)
		return err
	})
	return ok, err
}

// appendOnce is one try of Append, c.mu held.
func (c *NATSChain) appendOnce(ctx context.Context, ev envelope.Event) (bool, error) {
	for try := 1; ; try++ {
		if c.stale {
			if err := c.resync(ctx); err != nil {
				return false, fmt.Errorf("publish %s event: %w", ev.Type, err)
			}
		}
		line, hash, err := envelope.Seal(ev, c.head)
		if err != nil {
			return false, err
		}
		id := c.subject + ":" + strings.TrimPrefix(hash, "sha256:")
		ack, err := c.js.Publish(ctx, c.subject, line, jetstream.WithMsgID(id), jetstream.WithExpectLastSequencePerSubject(c.lastSeq))
		if err != nil {
			c.stale = true
			if wrongLastSequence(err) && try < 5 {
				// Another writer appended since our last read: link to it.
				c.log.Warn("another writer appended to this chain; re-reading its head", "try", try)
				continue
			}
			// The message may have been stored and only the ack lost.
			return false, fmt.Errorf("publish %s event to %s: %w", ev.Type, c.subject, err)
		}
		if ack.Duplicate {
			// Already stored (an earlier emission): what follows it on the
			// subject, if anything, decides the head.
			c.stale = true
			return true, nil
		}
		c.head, c.lastSeq = hash, ack.Sequence
		c.published++
		return true, nil
	}
}

// wrongLastSequence reports the server's refusal of an append whose
// expected last subject sequence is not the subject's.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Len returns how many events this chain published since it was opened.
func (c *NATSChain) Len() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.published
}

// Subject returns the subject the chain publishes to.
func (c *NATSChain) Subject() string { return c.subject }

// Fanout appends to every sink; it reports appended when any sink did and
// returns the first error after trying all.
type Fanout []Sink

// Append implements Sink.
func (f Fanout) Append(ctx context.Context, ev envelope.Event) (bool, error) {
	var any bool
	var first error
	for _, s := range f {
		if s == nil {
			continue
		}
		ok, err := s.Append(ctx, ev)
		any = any || ok
		if err != nil && first == nil {
			first = err
		}
	}
	return any, first
}
