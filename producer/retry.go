package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/internal/ratelog"
)

// Retryable reports whether a JetStream or KV call that failed with err
// may succeed unchanged once the stream or bucket has a leader again: no
// responders ("no response from stream"), a timeout, a reconnecting
// connection, the server saying the stream or the cluster is
// unavailable for now (10008, 10009, 10118, 10163, 10194), or that the
// same message id is still being stored (10158, a try before it between
// leaders), also when the client gives the server's description as plain
// text. A refusal
// (wrong revision, a key that exists, bad input, permissions) is not.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrNoServers) {
		return true
	}
	if errors.Is(err, jetstream.ErrConsumerLeadershipChanged) {
		return true
	}
	// Some client paths (a direct get, a status reply) return the server's
	// description as plain text.
	if msg := err.Error(); strings.Contains(msg, "JetStream system temporarily unavailable") || strings.Contains(msg, "stream is offline") {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable
			10009, // cluster can not handle request
			10118, // stream is offline
			10158, // duplicate message id is in process (the same write, between leaders)
			10163, // expected last sequence per subject temporarily unavailable
			10194: // stream is offline: {err}
			return true
		}
	}
	return false
}

// Retrier retries a JetStream or KV write whose failure is Retryable (a
// stream or bucket electing a leader) with backoff, 100 ms doubling to
// 2 s, for up to a bound from its first failure; each try gets at most
// RetryTry. It is the one place every single write of the worker's
// paths retries (tail forwarding, eval requests and their claims, ledger
// and events, dead letters), as AsyncPublisher is for batches. While any
// write or read is failing, and after a failure until a write goes
// through (see Healthy), Healthy reports false. A nil *Retrier tries
// once. It is safe for concurrent use.
type Retrier struct {
	bound   time.Duration
	logger  *slog.Logger
	warn    *ratelog.Log
	now     func() time.Time
	failing atomic.Int64 // writes between a failure and their end
	// lastFail and lastOK are when (unix ns) a try last failed (or a
	// failing call ended) and when a write last went through.
	lastFail, lastOK atomic.Int64
}

// NewRetrier returns a Retrier retrying each write for up to bound (0:
// DefaultRetryFor), telling logger (nil: discarded) once per 10 s that
// writes are failing.
func NewRetrier(bound time.Duration, logger *slog.Logger) *Retrier {
	if bound <= 0 {
		bound = DefaultRetryFor
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Retrier{bound: bound, logger: logger, warn: ratelog.New(logger, 10*time.Second), now: time.Now}
}

// Store is producer.Store (the package function) retried by r.
func (r *Retrier) Store(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, id string) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	err := r.Do(ctx, "publish to "+msg.Subject, func(ctx context.Context) (err error) {
		ack, err = Store(ctx, js, msg, id)
		return err
	})
	return ack, err
}

// Healthy reports whether no write is being retried and none failed
// since the last write that went through: a call that gave up, or a
// read that a leader without a quorum still answered, does not make it
// healthy again; a write that succeeds does, as does quietRecovery
// without any failure (a worker with nothing to write).
func (r *Retrier) Healthy() bool {
	if r == nil {
		return true
	}
	if r.failing.Load() > 0 {
		return false
	}
	f := r.lastFail.Load()
	return f == 0 || r.lastOK.Load() >= f || r.now().UnixNano()-f >= int64(quietRecovery)
}

// quietRecovery is how long after its last failure a Retrier with no
// write through since reports Healthy again.
const quietRecovery = 30 * time.Second

// Read is Do for a read: retried alike, and counted as failing alike,
// but its success does not make Healthy true again (a stream leader that
// lost its quorum may still answer reads).
func (r *Retrier) Read(ctx context.Context, what string, try func(ctx context.Context) error) error {
	return r.do(ctx, what, false, try)
}

// Do calls try, each time with at most RetryTry beyond ctx (a nil
// Retrier: once, with StoreTimeout), until it
// returns nil or an error that is not Retryable,
// ctx is done, or For has passed since its first failure; the last error
// is returned, wrapped with what and the tries made when the bound ran
// out. try must be safe to repeat: a write whose acknowledgement was lost
// is made again (a message id, a revision check or an idempotent value
// keeps its effect single).
func (r *Retrier) Do(ctx context.Context, what string, try func(ctx context.Context) error) error {
	return r.do(ctx, what, true, try)
}

func (r *Retrier) do(ctx context.Context, what string, write bool, try func(ctx context.Context) error) error {
	if r == nil {
		tctx, cancel := context.WithTimeout(ctx, StoreTimeout)
		defer cancel()
		return try(tctx)
	}
	st := &writeState{r: r}
	defer st.end()
	var first time.Time
	for n := 1; ; n++ {
		tctx, cancel := context.WithTimeout(ctx, RetryTry)
		// A try still unanswered after SlowWrite counts as failing (a
		// stream without a leader may answer nothing until the timeout).
		slow := time.AfterFunc(SlowWrite, st.failing)
		err := try(tctx)
		slow.Stop()
		cancel()
		if err == nil || !Retryable(err) || ctx.Err() != nil {
			// A write the server answered, even with a refusal (a key a
			// lost acknowledgement left behind), went through: the
			// cluster takes writes again.
			if write && ctx.Err() == nil {
				st.through()
			}
			if err == nil && !first.IsZero() {
				r.logger.Info("write succeeded after retries", "write", what, "tries", n, "after", time.Since(first).Round(time.Millisecond))
			}
			return err
		}
		st.failing()
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		if waited := now.Sub(first); waited >= r.bound {
			return fmt.Errorf("%s: %d tries over %s (the retry bound): %w", what, n, waited.Round(time.Millisecond), err)
		}
		wait := backoff(n)
		r.warn.Warn("write failed; retrying (readiness 503 meanwhile)", "write", what, "try", n, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// RetryTry bounds one try of Retrier.Do: a stream whose leader died
// may leave a try unanswered until it times out, and the next try (safe:
// a message id, a revision or an idempotent value keeps the effect
// single) reaches the new leader.
const RetryTry = 5 * time.Second

// SlowWrite is how long a try of Retrier.Do may go unanswered before the
// write counts as failing (Healthy false) until it ends.
const SlowWrite = 2 * time.Second

// writeState counts one Do call in Retrier.failing at most once, from its
// first failure (or slow try) to its end.
type writeState struct {
	r                      *Retrier
	mu                     sync.Mutex
	counted, done, wentOut bool
}

// through notes a write that went through, so that a slow-try timer
// firing as it returned does not count it as failing after all.
func (w *writeState) through() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wentOut = true
	w.r.lastOK.Store(w.r.now().UnixNano())
}

func (w *writeState) failing() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.wentOut {
		return
	}
	w.r.lastFail.Store(w.r.now().UnixNano())
	if !w.counted {
		w.counted = true
		w.r.failing.Add(1)
	}
}

func (w *writeState) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.counted {
		// Ended, but not through: failing until a write goes through.
		if !w.wentOut && w.r.lastOK.Load() < w.r.lastFail.Load() {
			w.r.lastFail.Store(w.r.now().UnixNano())
		}
		w.r.failing.Add(-1)
	}
}
