package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/lease"
)

// ErrService marks a failure of an outside service (NATS, JetStream) that
// did not clear within Options.StartTimeout; `verdryx serve` exits 3 for
// it. Test with errors.Is.
var ErrService = errors.New("worker: outside service failed")

type serviceErr struct{ err error }

func (e serviceErr) Error() string { return e.err.Error() }

func (e serviceErr) Unwrap() []error { return []error{e.err, ErrService} }

func serviceError(err error) error { return serviceErr{err} }

// retryable reports whether a start-up step that failed with err may
// succeed later: NATS or a JetStream quorum away for a moment. Input
// errors, a lease held by another worker and authorization failures are
// final.
func retryable(err error) bool {
	return !errors.Is(err, ErrInput) && !errors.Is(err, lease.ErrInstanceInUse) &&
		!errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrPermissionViolation) &&
		!errors.Is(err, jetstream.ErrJetStreamNotEnabled) && !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) &&
		!errors.Is(err, context.Canceled)
}

// startRetrier runs the start-up steps of one worker against one budget:
// each step is retried with capped exponential backoff (250 ms doubling
// to 10 s) while its error is retryable, logging one line per 10 s
// window, until the budget (Options.StartTimeout) runs out; then the
// step's error is returned as a service error (exit 3).
type startRetrier struct {
	deadline time.Time
	log      *slog.Logger
}

// do runs step(ctx) until it succeeds; each attempt gets at most 10 s,
// and no more than what is left of the budget (but 250 ms at least). The
// wait between attempts is cut short at the deadline, where one last
// attempt is made: the budget is spent whole, never given up a backoff
// early (a 2m budget once gave up after 110.9 s: the next 10 s backoff
// would have passed the deadline).
func (s *startRetrier) do(ctx context.Context, what string, step func(context.Context) error) error {
	delay, attempts := 250*time.Millisecond, 0
	var logged time.Time
	for {
		attempts++
		actx, cancel := context.WithTimeout(ctx, min(10*time.Second, max(time.Until(s.deadline), 250*time.Millisecond)))
		err := step(actx)
		cancel()
		if err == nil {
			if attempts > 1 {
				s.log.Info("start-up step succeeded after retries", "step", what, "attempts", attempts)
			}
			return nil
		}
		if !retryable(err) || ctx.Err() != nil {
			if errors.Is(err, ErrInput) || errors.Is(err, lease.ErrInstanceInUse) || errors.Is(err, context.Canceled) {
				return err
			}
			return serviceError(fmt.Errorf("%s: %w", what, err))
		}
		left := time.Until(s.deadline)
		if left <= 0 {
			return serviceError(fmt.Errorf("%s: still failing after %d attempts: %w", what, attempts, err))
		}
		if time.Since(logged) >= 10*time.Second {
			logged = time.Now()
			s.log.Warn("start-up step failed; retrying (readiness 503 meanwhile)", "step", what, "attempts", attempts,
				"gives_up_in", time.Until(s.deadline).Round(time.Second), "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(delay, left)):
		}
		delay = min(delay*2, 10*time.Second)
	}
}
