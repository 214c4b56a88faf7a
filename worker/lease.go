package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket is the JetStream KV bucket holding one key per live worker
// instance.
const LeaseBucket = "verdryx-instances"

// ErrInstanceInUse is returned when another live worker holds the instance
// id.
var ErrInstanceInUse = errors.New("worker: instance id in use")

// Lease holds an instance id for one worker while it lives: each instance
// publishes its events on its own subject, and two workers on one subject
// would fork (or, through message-id dedupe, silently drop) its chain. The
// key expires TTL after the holder stops renewing it (a crashed worker's
// id frees itself); a restart by the same holder (same host and data
// directory) takes its own lease over at once.
type Lease struct {
	kv       jetstream.KeyValue
	key      string
	holder   string
	ttl      time.Duration
	rev      uint64
	log      *slog.Logger
	released bool
}

// LeaseOptions configure a Lease.
type LeaseOptions struct {
	// TTL is how long a lease lives without renewal; 0 means 15 s.
	TTL time.Duration
	// Logger receives the lease's logs; nil discards them.
	Logger *slog.Logger
}

// AcquireLease takes the lease on instance for holder, refusing with
// ErrInstanceInUse when a different holder's lease is live. It blocks for
// at most the KV round trips.
func AcquireLease(ctx context.Context, js jetstream.JetStream, instance, holder string, opts LeaseOptions) (*Lease, error) {
	if opts.TTL <= 0 {
		opts.TTL = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ttl, logger := opts.TTL, opts.Logger
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: ttl, History: 1,
		Description: "verdryx: one key per live worker instance"})
	if err != nil {
		return nil, fmt.Errorf("instance lease bucket %s: %w", LeaseBucket, err)
	}
	l := &Lease{kv: kv, key: instance, holder: holder, ttl: ttl, log: logger}
	rev, err := kv.Create(ctx, instance, []byte(holder))
	if err == nil {
		l.rev = rev
		return l, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("instance lease %q: %w", instance, err)
	}
	cur, err := kv.Get(ctx, instance)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return AcquireLease(ctx, js, instance, holder, opts)
		}
		return nil, fmt.Errorf("instance lease %q: %w", instance, err)
	}
	if string(cur.Value()) != holder {
		return nil, fmt.Errorf("%w: instance %q is held by %s (a live worker renews it every %s); give this worker another id with --instance NAME, or stop the other one",
			ErrInstanceInUse, instance, cur.Value(), ttl/3)
	}
	rev, err = kv.Update(ctx, instance, []byte(holder), cur.Revision())
	if err != nil {
		return nil, fmt.Errorf("instance lease %q: take over own lease: %w", instance, err)
	}
	l.rev = rev
	return l, nil
}

// Run renews the lease every TTL/3 until ctx is done, then releases it. It
// returns an error if the lease was lost (another holder took the key),
// which should stop the worker. Release must not be called while Run runs.
func (l *Lease) Run(ctx context.Context) error {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.Release()
			return nil
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, l.ttl/3)
		rev, err := l.kv.Update(rctx, l.key, []byte(l.holder), l.rev)
		cancel()
		switch {
		case err == nil:
			l.rev = rev
		case isWrongRevision(err), errors.Is(err, jetstream.ErrKeyNotFound):
			return fmt.Errorf("%w: lease on instance %q lost to another holder", ErrInstanceInUse, l.key)
		default:
			// NATS unreachable for a moment: keep trying; the key lives
			// TTL after the last renewal.
			l.log.Warn("instance lease renewal", "instance", l.key, "err", err)
		}
	}
}

// Release deletes the lease so the id is free at once. It is idempotent.
func (l *Lease) Release() {
	if l.released {
		return
	}
	l.released = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev)); err != nil {
		l.log.Debug("instance lease release", "instance", l.key, "err", err)
	}
}

// isWrongRevision reports a compare-and-set conflict: the key changed
// since our revision (10071, or 10164 on a replicated bucket).
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}
