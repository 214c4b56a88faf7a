package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/envelope"
)

// Sink receives agent-event envelopes (envelope.Writer implements it).
// Append returns false with a nil error for an event it skipped because it
// has no agent_id.
type Sink interface {
	Append(ev envelope.Event) (bool, error)
}

var _ Sink = (*envelope.Writer)(nil)

// NATSChain publishes envelopes to one subject as one prev_hash chain. Each
// worker instance owns its own subject (<events subject>.<instance>), so a
// chain never forks however many workers run. On start the chain resumes
// from the last message stored on that subject.
//
// Publishing carries Nats-Msg-Id = <subject>:<chain position>, so a retried
// publish is not stored twice. NATSChain is safe for concurrent use; publishes are
// serialized because each depends on the previous hash.
type NATSChain struct {
	js      jetstream.JetStream
	subject string
	log     *slog.Logger

	mu        sync.Mutex
	head      string
	position  uint64 // messages on the subject: the next event's chain position
	published int64
	skipped   int64
}

// NewNATSChain resumes the chain of subject from the last message stored in
// stream. It blocks for at most the lookup.
func NewNATSChain(ctx context.Context, js jetstream.JetStream, stream, subject string, logger *slog.Logger) (*NATSChain, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &NATSChain{js: js, subject: subject, log: logger.With("component", "events", "subject", subject)}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("events stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, fmt.Errorf("resume chain on %s: %w", subject, err)
	}
	c.position = info.State.Subjects[subject]
	last, err := s.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return nil, fmt.Errorf("resume chain on %s: %w", subject, err)
	default:
		hash, _, herr := envelope.LineHash(last.Data)
		if herr != nil {
			c.log.Warn("last event on subject is malformed, starting a new chain head", "err", herr)
		} else {
			c.head = hash
		}
	}
	return c, nil
}

// Append seals ev onto the chain and publishes it, blocking (at most 10 s)
// until JetStream acknowledges it. An event without agent_id is skipped and
// counted. The chain advances only after the acknowledgement.
func (c *NATSChain) Append(ev envelope.Event) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.AgentID == "" {
		c.skipped++
		return false, nil
	}
	line, hash, err := envelope.Seal(ev, c.head)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The message id is the chain position: a retried publish of the same
	// position is dropped by JetStream, while two equal events at different
	// positions (equal lines, when the previous events were equal too) are
	// both kept.
	id := fmt.Sprintf("%s:%d", c.subject, c.position)
	if _, err := c.js.Publish(ctx, c.subject, line, jetstream.WithMsgID(id)); err != nil {
		return false, fmt.Errorf("publish %s event to %s: %w", ev.Type, c.subject, err)
	}
	c.head = hash
	c.published++
	c.position++
	return true, nil
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
func (f Fanout) Append(ev envelope.Event) (bool, error) {
	var any bool
	var first error
	for _, s := range f {
		if s == nil {
			continue
		}
		ok, err := s.Append(ev)
		any = any || ok
		if err != nil && first == nil {
			first = err
		}
	}
	return any, first
}
