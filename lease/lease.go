package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/streams"
)

// Bucket is the JetStream KV bucket holding one key per live worker
// instance.
const Bucket = "verdryx-instances"

// ErrInstanceInUse is returned when another live worker holds the instance
// id.
var ErrInstanceInUse = errors.New("worker: instance id in use")

// Lease holds an instance id for one worker while it lives: each instance
// publishes its events on its own subject, and two workers on one subject
// would fork (or, through message-id dedupe, silently drop) its chain. The
// key expires TTL after the holder stops renewing it (a crashed worker's
// id frees itself); a restart by the same holder (same host and data
// directory) takes its own lease over at once.
//
// A Lease renews itself from the moment Acquire returns, every TTL/3,
// in a goroutine of its own, whatever the caller does meanwhile (a long
// replay, a slow start). A renewal that fails because NATS does not answer
// is retried, past the key's expiry if need be: when NATS answers again
// the lease is taken back if the key is gone or still ours. The lease is
// lost only when another holder's value is read under the key. Lost and
// Err report that; Release ends the renewals. A Lease is safe for
// concurrent use.
type Lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	ttl    time.Duration
	log    *slog.Logger

	stop     context.CancelFunc
	done     chan struct{} // closed when the renewal goroutine returns
	lost     chan struct{} // closed when another holder is read
	mu       sync.Mutex
	rev      uint64
	renewed  time.Time // last successful write of the key
	err      error     // why the lease was lost
	released bool
}

// Options configure a Lease.
type Options struct {
	// TTL is how long a lease lives without renewal; 0 means 15 s.
	TTL time.Duration
	// Replicas of the lease bucket (3 on a three-node cluster); 0 means 1.
	// An existing bucket with fewer replicas is updated.
	Replicas int
	// Logger receives the lease's logs; nil discards them.
	Logger *slog.Logger
}

// BucketConfig is the configuration of the lease bucket: one revision
// per key, keys expiring ttl after their last write.
func BucketConfig(ttl time.Duration, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: Bucket, TTL: ttl, History: 1, Replicas: max(replicas, 1),
		Description: "verdryx: one key per live worker instance"}
}

// Acquire takes the lease on instance for holder, refusing with
// ErrInstanceInUse when a different holder's lease is live, and starts
// renewing it. It blocks for at most the KV round trips.
func Acquire(ctx context.Context, js jetstream.JetStream, instance, holder string, opts Options) (*Lease, error) {
	if opts.TTL <= 0 {
		opts.TTL = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := streams.EnsureKV(ctx, js, BucketConfig(opts.TTL, opts.Replicas))
	if err != nil {
		return nil, fmt.Errorf("instance lease bucket %s: %w", Bucket, err)
	}
	l := &Lease{kv: kv, key: instance, holder: holder, ttl: opts.TTL, log: opts.Logger,
		done: make(chan struct{}), lost: make(chan struct{})}
	other, err := l.take(ctx)
	if err != nil {
		return nil, fmt.Errorf("instance lease %q: %w", instance, err)
	}
	if other != "" {
		return nil, fmt.Errorf("%w: instance %q is held by %s (a live worker renews it every %s); give this worker another id (Options.Instance), or stop the other one",
			ErrInstanceInUse, instance, other, opts.TTL/3)
	}
	rctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go l.renew(rctx)
	return l, nil
}

// take writes the key for l.holder: created when absent, updated when it
// holds l.holder's own value. It returns the other holder's value when
// the key is someone else's.
func (l *Lease) take(ctx context.Context) (other string, err error) {
	for range 3 {
		rev, err := l.kv.Create(ctx, l.key, []byte(l.holder))
		if err == nil {
			l.set(rev)
			return "", nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", err
		}
		cur, err := l.kv.Get(ctx, l.key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // expired between the two calls
		}
		if err != nil {
			return "", err
		}
		if string(cur.Value()) != l.holder {
			return string(cur.Value()), nil
		}
		rev, err = l.kv.Update(ctx, l.key, []byte(l.holder), cur.Revision())
		if err == nil {
			l.set(rev)
			return "", nil
		}
		if !isWrongRevision(err) {
			return "", err
		}
	}
	return "", errors.New("the key keeps changing under us")
}

func (l *Lease) set(rev uint64) {
	l.mu.Lock()
	l.rev, l.renewed = rev, time.Now()
	l.mu.Unlock()
}

// renew writes the key every TTL/3 until ctx is done or another holder is
// read.
func (l *Lease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	warned := time.Time{}
	failing := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		rev, since := l.rev, time.Since(l.renewed)
		l.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, l.ttl/3)
		newRev, err := l.kv.Update(rctx, l.key, []byte(l.holder), rev)
		if err != nil && (isWrongRevision(err) || errors.Is(err, jetstream.ErrKeyNotFound)) {
			// The key moved: expired while NATS was away, or our own
			// update landed and only its reply was lost. Read whose it is.
			var other string
			other, err = l.take(rctx)
			if err == nil && other != "" {
				cancel()
				l.mu.Lock()
				l.err = fmt.Errorf("%w: lease on instance %q lost to another holder (%s)", ErrInstanceInUse, l.key, other)
				l.mu.Unlock()
				close(l.lost)
				return
			}
			if err == nil {
				l.mu.Lock()
				newRev = l.rev
				l.mu.Unlock()
				l.log.Warn("instance lease taken again", "instance", l.key, "unrenewed", since.Round(time.Millisecond))
			}
		}
		cancel()
		if err == nil {
			if failing > 0 {
				l.log.Info("instance lease renewed again", "instance", l.key, "failed_attempts", failing)
			}
			failing = 0
			l.set(newRev)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// NATS unreachable or without a quorum for the bucket: keep
		// trying. One line per TTL, saying whether the key has expired.
		failing++
		if time.Since(warned) >= l.ttl {
			warned = time.Now()
			l.log.Warn("instance lease renewal failing; retrying", "instance", l.key, "attempts", failing,
				"unrenewed", since.Round(time.Millisecond), "expired", since >= l.ttl, "err", err)
		}
	}
}

// Held reports whether the key was written less than TTL ago.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil && !l.released && time.Since(l.renewed) < l.ttl
}

// Lost is closed when another holder's value was read under the key; Err
// then says whose.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err returns why the lease was lost, or nil.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release stops the renewals and deletes the key (unless it was lost), so
// the id is free at once. It is idempotent and blocks for at most 2 s.
func (l *Lease) Release() {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return
	}
	l.released = true
	l.mu.Unlock()
	l.stop()
	<-l.done
	if l.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev)); err != nil {
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
