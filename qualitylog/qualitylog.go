// Package qualitylog is the fleet's log of quality: every run and baseline
// committed to any worker's store is recorded once on a JetStream stream
// (streams.EnsureQuality), and every store applies that log, its own
// records included, once each and in log order, so that every store
// converges to the same runs and baselines (docs/worker.md, the record
// format in docs/formats.md).
//
// Publishing follows the local commit: a record is published with its run
// or baseline id as message id (a retry or a second publisher is stored
// once within the duplicate window, and a later duplicate is recognised by
// every store, which never inserts an id twice). Applying is
// store.ApplyLog, which keeps the store's log position in the same SQLite
// transaction as the rows.
package qualitylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
)

// HeaderKind names a record's kind (store.KindRun, store.KindBaseline).
const HeaderKind = "Verdryx-Quality-Kind"

// Log is the quality log of one fleet, bound to one store: it publishes
// the store's records and applies the log to it. It is safe for
// concurrent use.
type Log struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	subj   streams.Subjects
	st     *store.Store
	logger *slog.Logger
	now    func() time.Time
	retry  *producer.Retrier

	mu      sync.Mutex
	applied uint64
	last    uint64
	moved   chan struct{} // closed and replaced whenever applied or last moves
	sent    map[string]bool
}

// Options tune Open.
type Options struct {
	// Logger receives the log's logs; nil discards them.
	Logger *slog.Logger
	// Now stamps the store's view of the log; nil means time.Now.
	Now func() time.Time
	// Retry carries Publish through a stream leader's election (the
	// worker's writes share one); nil makes one try with
	// producer.StoreTimeout.
	Retry *producer.Retrier
}

// Open ensures the log's stream (creating it with s's replicas and
// QualityRetention) and binds it to st.
func Open(ctx context.Context, js jetstream.JetStream, s streams.Subjects, st *store.Store, opts Options) (*Log, error) {
	stream, err := streams.EnsureQuality(ctx, js, s)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ls, err := st.LogState(ctx)
	if err != nil {
		return nil, err
	}
	return &Log{js: js, stream: stream, subj: s.WithQuality(), st: st, logger: opts.Logger, now: opts.Now, retry: opts.Retry,
		applied: ls.Applied, last: ls.Last, moved: make(chan struct{}), sent: map[string]bool{}}, nil
}

// Publish records the stored run or baseline (kind store.KindRun or
// store.KindBaseline) on the log, idempotently, and returns its log
// sequence (that of the first record of the id, for a duplicate within
// the window).
func (l *Log) Publish(ctx context.Context, kind, id string) (uint64, error) {
	rec, err := l.st.ExportRecord(ctx, kind, id)
	if err != nil {
		return 0, fmt.Errorf("quality log: %w", err)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("quality log: encode %s %s: %w", kind, id, err)
	}
	msg := &nats.Msg{Subject: l.subj.Quality + "." + kind, Data: data, Header: nats.Header{}}
	msg.Header.Set(HeaderKind, kind)
	ack, err := l.retry.Store(ctx, l.js, msg, kind+":"+id)
	if err != nil {
		return 0, fmt.Errorf("quality log: record %s %s: %w", kind, id, err)
	}
	l.mu.Lock()
	l.sent[id] = true
	l.mu.Unlock()
	l.noteLast(ack.Sequence)
	return ack.Sequence, nil
}

// PublishPending publishes every run and baseline of the store not yet
// read back from the log (store.Pending), in commit order, skipping those
// this Log published already; it returns how many it published.
func (l *Log) PublishPending(ctx context.Context) (int, error) {
	pending, err := l.st.Pending(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pending {
		l.mu.Lock()
		sent := l.sent[p[1]]
		l.mu.Unlock()
		if sent {
			continue
		}
		if _, err := l.Publish(ctx, p[0], p[1]); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Last reads the log's last sequence from the stream (0: empty) and
// notes it in the store.
func (l *Log) Last(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("quality log: stream info: %w", err)
	}
	last := info.State.LastSeq
	l.noteLast(last)
	if err := l.st.NoteLogEnd(ctx, last, l.now()); err != nil {
		return 0, err
	}
	return last, nil
}

func (l *Log) noteLast(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq > l.last {
		l.last = seq
		close(l.moved)
		l.moved = make(chan struct{})
	}
}

// Lag is how many log records the store had not applied, as last seen.
func (l *Log) Lag() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last > l.applied {
		return l.last - l.applied
	}
	return 0
}

// Applied is the last log sequence applied to the store.
func (l *Log) Applied() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied
}

// WaitApplied waits until the store has applied the log through seq or
// ctx is done, and returns the sequence applied.
func (l *Log) WaitApplied(ctx context.Context, seq uint64) uint64 {
	for {
		l.mu.Lock()
		applied, moved := l.applied, l.moved
		l.mu.Unlock()
		if applied >= seq {
			return applied
		}
		select {
		case <-ctx.Done():
			return applied
		case <-moved:
		}
	}
}

// CatchUp waits, at most bound, until the store has applied every record
// the log held when it was called (a Follow must be running); it returns
// how many records the store is still behind (0: caught up).
func (l *Log) CatchUp(ctx context.Context, bound time.Duration) (behind uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	last, err := l.Last(ctx)
	if err != nil {
		return 0, err
	}
	applied := l.WaitApplied(ctx, last)
	if applied >= last {
		return 0, nil
	}
	return last - applied, nil
}

// Stats count what applying did.
type Stats struct {
	Applied map[store.Applied]int `json:"applied"`
	// Skipped counts records that could not be decoded (not a verdryx
	// record): passed over.
	Skipped int `json:"skipped"`
	// Through is the last sequence applied.
	Through uint64 `json:"through"`
}

// Sync applies the log to the store up to its last sequence at the call
// (one-shot catch-up) and returns what it did.
func (l *Log) Sync(ctx context.Context) (Stats, error) {
	last, err := l.Last(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Applied: map[store.Applied]int{}, Through: l.Applied()}
	if l.Applied() >= last {
		return st, nil
	}
	err = l.consume(ctx, &st, func() bool { return l.Applied() >= last })
	return st, err
}

// Follow applies the log to the store as records arrive until ctx is
// done. A record the store cannot apply (a newer verdryx's columns, a
// failing store) is retried with backoff, the lag growing meanwhile; every
// few seconds the log's end is read again (Lag).
func (l *Log) Follow(ctx context.Context) error {
	st := Stats{Applied: map[store.Applied]int{}}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			if _, err := l.Last(ctx); err != nil && ctx.Err() == nil {
				l.logger.Debug("quality log end", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.consume(ctx, &st, func() bool { return false })
		if ctx.Err() != nil {
			return nil
		}
		l.logger.Warn("quality log: applying stopped; retrying", "applied", l.Applied(), "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	return nil
}

// consume applies records from the store's position on, in order, until
// done says so after a record, ctx ends or applying fails.
func (l *Log) consume(ctx context.Context, st *Stats, done func() bool) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{l.subj.Quality + ".>"}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if from := l.Applied() + 1; from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := l.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("quality log: consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("quality log: consume: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("quality log: next record: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("quality log: record metadata: %w", err)
		}
		seq, last := meta.Sequence.Stream, meta.Sequence.Stream+meta.NumPending
		if err := l.apply(ctx, seq, last, msg.Data(), st); err != nil {
			return err
		}
		if done() {
			return nil
		}
	}
}

// apply applies one record and moves the Log's position.
func (l *Log) apply(ctx context.Context, seq, last uint64, data []byte, st *Stats) error {
	rec, err := store.DecodeLogRecord(data)
	var what store.Applied
	switch {
	case errors.Is(err, store.ErrLogRecord):
		l.logger.Error("quality log: record passed over: not a verdryx record", "seq", seq, "err", err)
		if err := l.st.SkipLog(ctx, seq, last, l.now()); err != nil {
			return err
		}
		st.Skipped++
	case err != nil:
		return err
	default:
		if what, err = l.st.ApplyLog(ctx, seq, last, rec, l.now()); err != nil {
			return err
		}
		st.Applied[what]++
		if what == store.AppliedOrphan {
			l.logger.Warn("quality log: baseline not applied: its run is not in the store (the log pruned it, or it was never recorded)", "seq", seq, "baseline", rec.ID)
		}
	}
	st.Through = seq
	l.mu.Lock()
	l.applied = max(l.applied, seq)
	l.last = max(l.last, last)
	close(l.moved)
	l.moved = make(chan struct{})
	l.mu.Unlock()
	return nil
}
