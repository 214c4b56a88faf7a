package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/internal/ratelog"
)

// AsyncOptions tune an AsyncPublisher.
type AsyncOptions struct {
	// MaxInFlight bounds publishes awaiting their acknowledgement;
	// PublishRows waits for the oldest before sending more. 0 means 1024.
	MaxInFlight int
	// AckTimeout bounds the wait for one acknowledgement before the
	// message is published again (with the same message id, so never
	// stored twice); 0 means 30 s.
	AckTimeout time.Duration
	// RetryFor bounds how long a message whose publish fails (a stream
	// without a leader answers "no response from stream", an ack times
	// out) is sent again, counted from its first failure, waiting
	// between tries from 100 ms doubling to 2 s; past it PublishRows and
	// Drain return the error. 0 means DefaultRetryFor.
	RetryFor time.Duration
	// Healthy, when set, is told false when a publish fails (and is being
	// retried) and true when an acknowledgement arrives after that: a
	// readiness signal. It is called from the publishing goroutine, only
	// on changes.
	Healthy func(ok bool)
	// Progress, when set, is called with the running count of
	// acknowledged messages (rows) each time it passes a multiple of 1024.
	Progress func(acked int)
	// Logger, when set, is told (once per 10 s) when acknowledgements fail
	// and messages are sent again: a replay waiting on a server that is
	// away says so instead of waiting in silence.
	Logger *slog.Logger
}

// DefaultRetryFor is AsyncOptions.RetryFor's default. On the in-process
// three-node cluster a stream whose leader node is stopped (a clean stop,
// not kill -9) names another leader within 0.2-0.35 s, a KV bucket's in
// about 2.3 s (docs/benchmarks.md, 2026-12-07 entry); the field report saw
// more than 4 s with kill -9 under load. Two minutes leaves a wide margin
// and matches serve --start-timeout.
const DefaultRetryFor = 2 * time.Minute

// Retry backoff between tries of a failed publish.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 2 * time.Second
)

// AsyncStats counts what an AsyncPublisher published.
type AsyncStats struct {
	Published  int // rows handed to PublishRows
	New        int // rows JetStream stored
	Duplicates int // rows JetStream dropped as already stored (same message id)
}

// AsyncPublisher publishes through a bounded window of
// asynchronous JetStream publishes, in order, each with a message id, so a
// slow server slows the caller down (backpressure) instead of failing it,
// and a retried or repeated publish is deduplicated by JetStream. It is
// not safe for concurrent use.
type AsyncPublisher struct {
	js     jetstream.JetStream
	opts   AsyncOptions
	st     AsyncStats
	window []pending
	warn   *ratelog.Log
	// reported is the acknowledged count last passed to Progress.
	reported int
	// failing is true from a failed publish until the next ack.
	failing bool
}

type pending struct {
	fut     jetstream.PubAckFuture
	subject string
	header  nats.Header
	data    []byte
	id      string
	tries   int
	failed  time.Time // first failure; zero while none
	weight  int       // what the message counts for in AsyncStats
}

// NewAsyncPublisher returns a publisher through js.
func NewAsyncPublisher(js jetstream.JetStream, opts AsyncOptions) *AsyncPublisher {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 1024
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = 30 * time.Second
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = DefaultRetryFor
	}
	// Publish through a JetStream context of our own whose client-side
	// futures time out after AckTimeout too: without that timeout a future
	// whose ack was lost (a node died with it) holds one of the client's
	// async-pending slots forever, and once they are all held every
	// publish stalls (ErrTooManyStalledMsgs) however long the caller waits.
	if nc := js.Conn(); nc != nil {
		if own, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(opts.AckTimeout)); err == nil {
			js = own
		}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &AsyncPublisher{js: js, opts: opts, warn: ratelog.New(logger, 10*time.Second)}
}

// Stats returns the counts so far; New and Duplicates are final after
// Drain returns nil.
func (p *AsyncPublisher) Stats() AsyncStats { return p.st }

// PublishRows sends data to subject with headers h (nil for none; h
// must not be changed afterwards: a message whose ack fails is sent again
// as is) and Nats-Msg-Id id, first waiting until fewer than MaxInFlight
// publishes await their acknowledgement. The stats (and Progress) count
// the message as rows rows. It returns when the message is sent, not when
// it is acknowledged (see Drain), or with ctx's error.
func (p *AsyncPublisher) PublishRows(ctx context.Context, subject string, h nats.Header, data []byte, id string, rows int) error {
	if err := p.drain(ctx, p.opts.MaxInFlight-1); err != nil {
		return err
	}
	fut, err := p.send(ctx, subject, h, data, id)
	if err != nil {
		return err
	}
	p.window = append(p.window, pending{fut: fut, subject: subject, header: h, data: data, id: id, tries: 1, weight: rows})
	p.st.Published += rows
	return nil
}

// Drain blocks until every message published is acknowledged, or ctx is
// done.
func (p *AsyncPublisher) Drain(ctx context.Context) error { return p.drain(ctx, 0) }

// send publishes asynchronously, waiting while the client's own pending
// limit is reached instead of failing.
func (p *AsyncPublisher) send(ctx context.Context, subject string, h nats.Header, data []byte, id string) (jetstream.PubAckFuture, error) {
	var hdr nats.Header // the message id is set on a copy: h may be shared
	if h != nil {
		hdr = make(nats.Header, len(h)+1)
		maps.Copy(hdr, h)
	}
	for {
		fut, err := p.js.PublishMsgAsync(&nats.Msg{Subject: subject, Header: hdr, Data: data}, jetstream.WithMsgID(id))
		if err == nil {
			return fut, nil
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return nil, err
		}
		select {
		case <-p.js.PublishAsyncComplete():
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// inProcess reports JetStream's answer to a publish whose message id is
// still being stored (error code 10158).
func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10158
}

// resendFailed sends again, in order and right after the head, every
// message behind the head whose publish has failed already (they failed
// with it, in the same election), so that once the stream has a leader
// they are stored in one round trip rather than one retry each.
func (p *AsyncPublisher) resendFailed(ctx context.Context) error {
	for i := 1; i < len(p.window); i++ {
		m := &p.window[i]
		select {
		case <-m.fut.Err():
		default:
			continue
		}
		if m.failed.IsZero() {
			m.failed = time.Now()
		}
		m.tries++
		fut, err := p.send(ctx, m.subject, m.header, m.data, m.id)
		if err != nil {
			return fmt.Errorf("publish %s: %w", m.id, err)
		}
		m.fut = fut
	}
	return nil
}

// health reports ok to Healthy when it differs from the last report.
func (p *AsyncPublisher) health(ok bool) {
	if p.failing == !ok {
		return
	}
	p.failing = !ok
	if p.opts.Healthy != nil {
		p.opts.Healthy(ok)
	}
}

// backoff is the wait before try n+1 of a message (n >= 1 tries made):
// retryFirst doubling to retryMax.
func backoff(n int) time.Duration {
	d := retryFirst
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// drain waits for acknowledgements until at most keep publishes are in
// flight, re-publishing (with backoff, for up to RetryFor from its first
// failure) a message whose ack failed or timed out. The retried message
// stays at the head, so order and message ids are kept.
func (p *AsyncPublisher) drain(ctx context.Context, keep int) error {
	for len(p.window) > keep {
		head := &p.window[0]
		timer := time.NewTimer(p.opts.AckTimeout)
		var ackErr error
		select {
		case ack := <-head.fut.Ok():
			if ack.Duplicate {
				p.st.Duplicates += head.weight
			} else {
				p.st.New += head.weight
			}
		case ackErr = <-head.fut.Err():
		case <-timer.C:
			ackErr = fmt.Errorf("no acknowledgement after %s", p.opts.AckTimeout)
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		timer.Stop()
		if ackErr != nil {
			p.health(false)
			now := time.Now()
			if head.failed.IsZero() {
				head.failed = now
			}
			if waited := now.Sub(head.failed); waited >= p.opts.RetryFor {
				return fmt.Errorf("publish %s: %d tries over %s (the retry bound): %w", head.id, head.tries, waited.Round(time.Millisecond), ackErr)
			}
			wait := backoff(head.tries)
			if inProcess(ackErr) {
				// The same id still being stored (a cluster between leaders).
				p.warn.Warn("publish: the same message id is still in process; waiting", "id", head.id, "try", head.tries, "err", ackErr)
			} else {
				p.warn.Warn("publish not acknowledged; sending again", "id", head.id, "try", head.tries, "wait", wait, "err", ackErr)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			head.tries++
			fut, err := p.send(ctx, head.subject, head.header, head.data, head.id)
			if err != nil {
				return fmt.Errorf("publish %s: %w", head.id, err)
			}
			head.fut = fut
			if err := p.resendFailed(ctx); err != nil {
				return err
			}
			continue
		}
		p.health(true)
		p.window = p.window[1:]
		if n := p.st.New + p.st.Duplicates; p.opts.Progress != nil && n/1024 != p.reported/1024 {
			p.reported = n
			p.opts.Progress(n)
		}
	}
	return nil
}
