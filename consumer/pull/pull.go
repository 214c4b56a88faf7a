// Package pull is verdryx's JetStream pull loop: it fetches batches from a
// consumer, hands them to a BatchHandler, and acks, naks or terminates each
// message by the Kind of its handler error (permanent failures go to a
// DeadLetterer first).
package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/internal/ratelog"
	"github.com/verdryx/verdryx/redact"
)

// Msg is the subset of jetstream.Msg the pull loop uses.
type Msg interface {
	Data() []byte
	Headers() nats.Header
	Subject() string
	Metadata() (*jetstream.MsgMetadata, error)
	Ack() error
	NakWithDelay(delay time.Duration) error
	InProgress() error
	TermWithReason(reason string) error
}

var _ Msg = jetstream.Msg(nil)

// Kind classifies a handler error; it decides ack, nak or term.
type Kind int

const (
	// KindPermanent: the message can never succeed (malformed, invalid,
	// refused). It is copied to the dead-letter subject and terminated.
	KindPermanent Kind = iota + 1
	// KindTransient: it may succeed later (store busy, disk full, provider
	// down). It is nak'ed with capped exponential backoff and retried until
	// it succeeds or an operator acts; it is never dead-lettered, so an
	// outage never turns into loss.
	KindTransient
)

// Error is a classified handler error.
type Error struct {
	Kind   Kind
	Reason string
	Err    error
	// Elsewhere marks a transient failure that is no fault of this
	// worker (another instance holds the message's work): it is retried
	// like any, but readiness (Options.Healthy) does not follow it.
	Elsewhere bool
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as a permanent failure with a short reason.
func Permanent(reason string, err error) error {
	return &Error{Kind: KindPermanent, Reason: reason, Err: err}
}

// Transient marks err as a transient failure.
func Transient(reason string, err error) error {
	return &Error{Kind: KindTransient, Reason: reason, Err: err}
}

// Elsewhere marks err as a transient failure that is another instance's
// business, not this worker's fault (see Error.Elsewhere).
func Elsewhere(reason string, err error) error {
	return &Error{Kind: KindTransient, Reason: reason, Err: err, Elsewhere: true}
}

// elsewhere reports whether err is an Elsewhere failure.
func elsewhere(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Elsewhere
}

// ErrDeferred, returned for a message, tells the Puller that the handler
// committed its effect but settles the message itself later (it holds the
// ack until a further step is durable, say a snapshot). The Puller neither
// acks nor counts it; the handler must ack or nak it, and a message it
// never settles is redelivered after the consumer's AckWait.
var ErrDeferred = errors.New("pull: settled later by the handler")

// kindOf returns the error's kind; unclassified errors are transient.
func kindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindTransient
}

// BatchHandler handles a batch of messages. It returns one error per message
// (index-aligned, or nil for all-good); a nil entry means the message's
// effect is durably committed and it may be acked.
type BatchHandler interface {
	HandleBatch(ctx context.Context, msgs []Msg) []error
}

// DeadLetterer copies a terminated message with its reason to the
// dead-letter subject.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, msg Msg, reason string) error
}

// Counters receives the pull loop's outcomes; all methods must be safe for
// concurrent use. A nil Counters is allowed.
type Counters interface {
	Received(stream string, n int)
	Acked(stream string, n int)
	Naked(stream string, n int)
	Terminated(stream string, n int)
	DeadLettered(stream string, n int)
}

// Options configures a Puller.
type Options struct {
	Name  string // for logs and metrics, e.g. "traces"
	Batch int    // max messages per handler call; default 256
	// MaxBytes, when > 0, bounds the bytes of messages buffered in the
	// client (instead of 2*Batch messages): for large messages, whose
	// count would otherwise buffer more than the subscription holds.
	MaxBytes int
	NakDelay time.Duration // base backoff of a transient failure, doubled per delivery; default 500ms
	// MaxBackoff caps the transient backoff; default 30s.
	MaxBackoff time.Duration
	// Heartbeat, when > 0, tells JetStream every Heartbeat that the
	// messages being handled are still in progress (InProgress), so a
	// consumer can keep a short AckWait (a crashed worker's messages are
	// redelivered soon) while one message takes longer than that. Use at
	// most a third of the consumer's AckWait.
	Heartbeat time.Duration
	// Healthy, when set, is called with false after a batch with a
	// transient failure (not an Elsewhere one) and with true after a batch
	// without one (readiness follows it).
	Healthy func(ok bool)
	// Expiry, when > 0, is how long each pull request lives (JetStream's
	// heartbeat on it is half of that). A pull lost with a stream's leader
	// is noticed after two missed heartbeats, so a short expiry resumes
	// delivery sooner after an election; 0 keeps the client's default
	// (30 s: up to 30 s without deliveries after one).
	Expiry time.Duration
	// PriorityGroup, when set, pulls as a member of this priority group of
	// the consumer (a pinned-client consumer delivers to one member at a
	// time).
	PriorityGroup string
	// FinishWithin bounds how long Run, once its context is cancelled,
	// lets the messages already delivered finish (their handler's context
	// is cancelled then, and what is unfinished is redelivered after
	// AckWait, or at once when their nak reaches the server); default
	// DefaultFinishWithin.
	FinishWithin time.Duration
	Logger       *slog.Logger // nil discards
	Counters     Counters     // nil ignores
	DeadLetter   DeadLetterer // nil: permanent failures are only terminated
}

// Puller consumes one durable JetStream consumer in batches and acks, naks
// or terminates each message in one place, by the class of its error.
type Puller struct {
	cons jetstream.Consumer
	h    BatchHandler
	opts Options
	log  *slog.Logger
	warn *ratelog.Log
}

// New returns a Puller. Don't forget to Run it.
func New(cons jetstream.Consumer, h BatchHandler, opts Options) (*Puller, error) {
	if cons == nil || h == nil {
		return nil, errors.New("consumer: nil consumer or handler")
	}
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	if opts.NakDelay <= 0 {
		opts.NakDelay = 500 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.FinishWithin <= 0 {
		opts.FinishWithin = DefaultFinishWithin
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "consumer", "consumer", opts.Name)
	return &Puller{cons: cons, h: h, opts: opts, log: log, warn: ratelog.New(log, 10*time.Second)}, nil
}

// drainTimeout bounds the wait for a consume drain on shutdown.
const drainTimeout = 10 * time.Second

// DefaultFinishWithin is Options.FinishWithin's default: with the NATS
// drain (10 s) and the spans' flush (15 s) after it, within the 60 s stop
// timeouts of the shipped systemd unit and Kubernetes manifests.
const DefaultFinishWithin = 20 * time.Second

// Run consumes until ctx is canceled, then stops fetching, finishes the
// messages already delivered (for up to Options.FinishWithin, after which
// their handler's context is cancelled) and returns nil. Messages are handed to the
// handler in batches: the first waits, the rest are whatever is already
// buffered, up to Batch, so a single message is handled at once and a
// backlog is handled in large batches.
func (p *Puller) Run(ctx context.Context) error {
	buf := make(chan jetstream.Msg, p.opts.Batch*2)
	var limit jetstream.PullConsumeOpt = jetstream.PullMaxMessages(p.opts.Batch * 2)
	if p.opts.MaxBytes > 0 {
		limit = jetstream.PullMaxBytes(p.opts.MaxBytes)
	}
	copts := []jetstream.PullConsumeOpt{limit,
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			p.log.Debug("consume", "err", err)
		})}
	if p.opts.Expiry > 0 && p.opts.PriorityGroup == "" {
		copts = append(copts, jetstream.PullExpiry(p.opts.Expiry))
	}
	if p.opts.PriorityGroup != "" {
		// A member that is not pinned holds its pull request open until it
		// expires, and a drain waits for that: keep it short.
		copts = append(copts, jetstream.PullPriorityGroup(p.opts.PriorityGroup), jetstream.PullExpiry(5*time.Second))
	}
	cc, err := p.cons.Consume(func(m jetstream.Msg) { buf <- m }, copts...)
	if err != nil {
		return fmt.Errorf("consume %s: %w", p.opts.Name, err)
	}
	batch := make([]Msg, 0, p.opts.Batch)
	// Handling uses a context that outlives ctx by FinishWithin, so
	// in-flight work is finished on shutdown rather than abandoned
	// half-way, but a write retrying against a lost cluster does not hold
	// the stop for ever.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	finished := make(chan struct{})
	defer close(finished)
	unhook := context.AfterFunc(ctx, func() {
		select {
		case <-finished:
		case <-time.After(p.opts.FinishWithin):
			p.log.Warn("shutdown: in-flight messages not finished; cancelling them (they go back to the stream)", "after", p.opts.FinishWithin)
			stopWork()
		}
	})
	defer unhook()
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			// Drain delivers what is already buffered client-side through
			// the callback, which may block on buf: keep reading buf until
			// the drain completes, then finish what was delivered.
			// A drain never completes on a closed connection: give up
			// waiting after drainTimeout and stop the subscription.
			cc.Drain()
			giveUp := time.NewTimer(drainTimeout)
			for {
				select {
				case m := <-buf:
					batch = append(batch, m)
					if len(batch) == p.opts.Batch {
						p.handle(work, batch)
						batch = batch[:0]
					}
					continue
				case <-cc.Closed():
				case <-giveUp.C:
					p.log.Warn("drain did not complete; stopping", "after", drainTimeout)
					cc.Stop()
				}
				break
			}
			giveUp.Stop()
			for {
				select {
				case m := <-buf:
					batch = append(batch, m)
					if len(batch) == p.opts.Batch {
						p.handle(work, batch)
						batch = batch[:0]
					}
				default:
					if len(batch) > 0 {
						p.handle(work, batch)
					}
					return nil
				}
			}
		case m := <-buf:
			batch = append(batch, m)
		}
	fill:
		for len(batch) < p.opts.Batch {
			select {
			case m := <-buf:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		p.handle(work, batch)
	}
}

func (p *Puller) handle(ctx context.Context, batch []Msg) {
	name := p.opts.Name
	p.count(func(c Counters) { c.Received(name, len(batch)) })
	errs := p.handleWithHeartbeat(ctx, batch)
	var acked, naked, termed, dead int
	transient := false
	for i, m := range batch {
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		if errors.Is(err, ErrDeferred) {
			continue
		}
		if err == nil {
			if aerr := m.Ack(); aerr != nil {
				// The effect is committed; a lost ack means a redelivery,
				// which the handler deduplicates.
				p.warn.Warn("ack", "err", aerr)
			}
			acked++
			continue
		}
		if kindOf(err) == KindTransient {
			transient = transient || !elsewhere(err)
			delivered := uint64(1)
			if md, merr := m.Metadata(); merr == nil {
				delivered = md.NumDelivered
			}
			delay := min(p.opts.NakDelay<<min(delivered-1, 16), p.opts.MaxBackoff)
			p.warn.Warn("transient failure, will retry", "delay", delay, "err", err)
			if nerr := m.NakWithDelay(delay); nerr != nil {
				p.warn.Warn("nak", "err", nerr)
			}
			naked++
			continue
		}
		// The reason goes into a stream and a log: no credential in it.
		reason := redact.String(err.Error())
		if len(reason) > 512 {
			reason = reason[:512]
		}
		p.log.Warn("terminating message", "subject", m.Subject(), "reason", reason)
		if p.opts.DeadLetter != nil {
			if derr := p.opts.DeadLetter.DeadLetter(ctx, m, reason); derr != nil {
				// Not copied: leave it for redelivery rather than lose it.
				p.warn.Warn("dead-letter publish", "err", derr)
				_ = m.NakWithDelay(p.opts.NakDelay)
				naked++
				continue
			}
			dead++
		}
		if terr := m.TermWithReason(reason); terr != nil {
			p.warn.Warn("term", "err", terr)
		}
		termed++
	}
	if p.opts.Healthy != nil {
		p.opts.Healthy(!transient)
	}
	p.count(func(c Counters) {
		c.Acked(name, acked)
		c.Naked(name, naked)
		c.Terminated(name, termed)
		c.DeadLettered(name, dead)
	})
}

// handleWithHeartbeat runs the handler, telling JetStream the batch is in
// progress every Heartbeat until it returns.
func (p *Puller) handleWithHeartbeat(ctx context.Context, batch []Msg) []error {
	if p.opts.Heartbeat <= 0 {
		return p.safeHandle(ctx, batch)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, m := range batch {
					if err := m.InProgress(); err != nil {
						p.warn.Warn("in-progress", "err", err)
					}
				}
			}
		}
	}()
	defer func() { close(done); wg.Wait() }()
	return p.safeHandle(ctx, batch)
}

// safeHandle contains a handler panic. A panicking batch of several
// messages is handled again one message at a time, so only the message
// that panics alone is terminated (permanently: it would panic on every
// delivery) and the others are not held back.
func (p *Puller) safeHandle(ctx context.Context, batch []Msg) []error {
	errs, panicked := p.callHandler(ctx, batch)
	if panicked == nil {
		return errs
	}
	p.log.Error("handler panic", "panic", panicked, "batch", len(batch))
	errs = make([]error, len(batch))
	if len(batch) == 1 {
		errs[0] = Permanent("handler panic", fmt.Errorf("%v", panicked))
		return errs
	}
	for i := range batch {
		one, perr := p.callHandler(ctx, batch[i:i+1])
		switch {
		case perr != nil:
			errs[i] = Permanent("handler panic", fmt.Errorf("%v", perr))
		case len(one) > 0:
			errs[i] = one[0]
		}
	}
	return errs
}

func (p *Puller) callHandler(ctx context.Context, batch []Msg) (errs []error, panicked any) {
	defer func() {
		if r := recover(); r != nil {
			panicked = r
		}
	}()
	return p.h.HandleBatch(ctx, batch), nil
}

func (p *Puller) count(f func(Counters)) {
	if p.opts.Counters != nil {
		f(p.opts.Counters)
	}
}
