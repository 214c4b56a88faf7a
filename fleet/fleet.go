package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/internal/ratelog"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/streams"
)

// Bucket names the KV bucket holding each partition's pointer
// (key "partition.<p>": the newest snapshot and aggregate, their stream
// sequence and writer; its revision orders owners) and, under keys
// "snap.<p>.<writer>.<slot>.<i>" and "agg.<p>.<writer>.<slot>.<i>", the
// snapshots (run states and dedupe keys) and aggregates (run states) cut
// into chunks of at most blobChunk bytes (KV values are bounded by the
// server's max payload). A writer alternates between two slots, never
// writing the one the pointer names, so the bucket holds at most two
// snapshots per partition and writer, and a stale writer can only
// overwrite its own unreferenced slot. KV puts are synchronous: the object store's
// asynchronous Put leaks a goroutine now and then in nats.go v1.55
// (resetPendingAcksOnReconnect racing cleanupReplySub).
const Bucket = "verdryx-partitions"

// DefaultSnapshotEvery is the longest an owner waits between a partition's
// snapshots while records arrive; acks wait for the snapshot. A partition
// whose snapshot is cheap is snapshotted more often (see snapshotDue).
const DefaultSnapshotEvery = time.Second

// snapshotShare bounds the time an owner spends writing a partition's
// snapshots while a backlog drains: the next snapshot waits at least
// snapshotShare times as long as the last one took. A snapshot is written
// whole, so a partition with a long history snapshots less often, while a
// small one does not hold its acks (and JetStream's pending state, which
// the server re-encodes as acks arrive) for a whole SnapshotEvery.
const snapshotShare = 10

// pullBytes bounds the bytes of a partition's messages buffered in the
// client: row batches are up to tracemsg.MaxBatchBytes each, and a pull of Batch of
// them would overflow the subscription's pending limit (64 MiB), which
// drops messages (a gap in the delivery sequence: a reload).
const pullBytes = 8 << 20

// backlogSnapshots times SnapshotEvery is the longest a partition waits
// between snapshots while its consumer has a backlog (a sixth of the
// default ack wait), and backlogShare multiplies snapshotShare then: acks
// can wait, and every snapshot re-encodes the days in memory.
const (
	backlogSnapshots = 5
	backlogShare     = 4
)

// sharedAggregateShare: a snapshot whose row sets and keys take at most
// 1/sharedAggregateShare of its aggregate's size is also the aggregate.
const sharedAggregateShare = 8

// Options configure a Fleet.
type Options struct {
	Subjects streams.Subjects
	// Instance names this worker in snapshot object names and logs.
	Instance string
	// SnapshotEvery: see DefaultSnapshotEvery; 0 means that.
	SnapshotEvery time.Duration
	// PinnedTTL: see DefaultPinnedTTL; 0 means that.
	PinnedTTL time.Duration
	// AckWait of the partition consumers; 0 means 30 s.
	AckWait time.Duration
	// MaxRecordBytes refuses (dead-letters) a trace record larger than
	// this; 0 means calls.MaxRecordBytes, -1 no limit.
	MaxRecordBytes int
	// Batch is the most messages a partition pulls at once; 0 means 512.
	Batch      int
	Logger     *slog.Logger
	Counters   pull.Counters
	DeadLetter pull.DeadLetterer
	// Healthy follows the partition pullers (see pull.Options.Healthy).
	Healthy func(ok bool)
	// Retry, when set, retries the router's publish of a record to its
	// partition subject while the traces stream has no leader
	// (producer.Retrier), holding its batch; nil tries once (a failure is
	// then transient: the record is redelivered).
	Retry *producer.Retrier
	// FoldAfter: a day of a partition is folded out of memory once the
	// partition's newest call is this far past the day's end; 0 means
	// DefaultFoldAfter. Subjects.Retention prunes folded days that long
	// after their table was first written (0: never).
	FoldAfter time.Duration
	// HoursKept: a call stamped at most this long before the clock (Now)
	// when it is applied is kept by the hour, so that a report window can
	// start and end on any hour of its day; an older one (a replay of
	// older traces, a call that straggled in late) by the day, which holds
	// a partial state per run and day rather than per run and hour (up to
	// 24 times fewer for runs that call every hour). 0 means
	// DefaultHoursKept; a negative value keeps every call by the day.
	HoursKept time.Duration
	// Now is the clock of the retention; nil means time.Now.
	Now func() time.Time
	// SnapshotBytes, when set, is called with the bytes of each snapshot
	// a partition writes (the snapshot, aggregate and day tables put in
	// the bucket).
	SnapshotBytes func(n int)
	// PartitionLoad, when set, is called with the time each load of a
	// partition's state took (a takeover, a restart, a reload after a
	// gap: the snapshot read, and the catch-up from the
	// stream), whether or not it succeeded.
	PartitionLoad func(time.Duration)
	// Freed, when set, is called after a snapshot that leaves garbage
	// behind: one that folded days out of memory or pruned them, and the
	// first after a backlog drained (what the burst decoded and applied).
	// It is called with the partition's lock held, so it must not block.
	Freed func()

	// wrapKV, set by tests, wraps the partitions bucket (to inject faults).
	wrapKV func(jetstream.KeyValue) jetstream.KeyValue
	// afterFold, set by tests, is called with each call of a record or
	// batch row once it is folded into the partition state (a panic in
	// it stands for a bug in the fold).
	afterFold func(calls.Call)
	// leftoverAge, set by tests, replaces defaultLeftoverAge.
	leftoverAge time.Duration
}

// Fleet consumes the partitioned traces: one pinned-client puller per
// partition (every worker pulls every partition; JetStream delivers each to
// one worker at a time), partition state in memory, snapshots and
// aggregates in the Bucket bucket (its one persisted copy), and the router that moves
// records published to the bare traces subject onto their partitions.
//
// Ownership: on the first batch of a partition it does not hold (a new pin,
// a restart, a takeover), a worker loads the partition's newest snapshot,
// catches up from the
// stream after the snapshot's sequence with an ordered consumer (up to the
// highest sequence the durable consumer delivered: anything later the
// durable delivers itself), and applies the batch with dedupe. The ack
// is held until the partition's next snapshot is written (at most
// SnapshotEvery later, and always on a clean stop) and is then one AckAll
// ack of the newest record held, so every acked record is in the newest
// snapshot (or dead-lettered) and every other one is redelivered; see
// partHandler.HandleBatch for the rules that keep that true. The
// snapshot pointer is written with compare-and-set on the KV revision the
// writer's state descends from: a worker that lost the partition cannot
// overwrite its new owner's state; it drops the partition and naks what it
// holds.
type Fleet struct {
	js     jetstream.JetStream
	opts   Options
	stream jetstream.Stream
	kv     jetstream.KeyValue
	// kvStream is kv's stream: blobs are deleted from it by subject, which
	// leaves no delete marker (see purgeKeys).
	kvStream jetstream.Stream
	parts    []*partHandler
	router   jetstream.Consumer
	log      *slog.Logger
	warn     *ratelog.Log // repeated warnings (an outage) once per 10 s
}

// commitReq}

// EnsureDefaults fills the zero fields of o that have a default and
// returns o: Subjects streams.DefaultSubjects(), SnapshotEvery
// DefaultSnapshotEvery, PinnedTTL DefaultPinnedTTL, AckWait 30 s, Batch
// 512, FoldAfter DefaultFoldAfter, HoursKept DefaultHoursKept (a negative
// HoursKept stays: every call by the day), Logger one that discards.
// MaxRecordBytes is calls.CheckSize's (0: calls.MaxRecordBytes).
func (o *Options) EnsureDefaults() *Options {
	if o.Subjects == (streams.Subjects{}) {
		o.Subjects = streams.DefaultSubjects()
	}
	if o.SnapshotEvery <= 0 {
		o.SnapshotEvery = DefaultSnapshotEvery
	}
	if o.PinnedTTL <= 0 {
		o.PinnedTTL = DefaultPinnedTTL
	}
	if o.AckWait <= 0 {
		o.AckWait = defaultAckWait
	}
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.FoldAfter <= 0 {
		o.FoldAfter = DefaultFoldAfter
	}
	if o.HoursKept == 0 {
		o.HoursKept = DefaultHoursKept
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// New ensures the partition consumers and buckets (the streams must
// exist: streams.EnsureStreams) and returns the fleet consumer of this worker.
// router is the bare traces subject's consumer (nil: no routing).
func New(ctx context.Context, js jetstream.JetStream, router jetstream.Consumer, opts Options) (*Fleet, error) {
	opts.EnsureDefaults()
	cons, err := EnsurePartitions(ctx, js, opts.Subjects, PartitionOptions{PinnedTTL: opts.PinnedTTL, AckWait: opts.AckWait})
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, opts.Subjects.TracesStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", opts.Subjects.TracesStream, err)
	}
	kv, err := EnsureBucket(ctx, js, opts.Subjects.Replicas)
	if err != nil {
		return nil, err
	}
	kvStream, err := js.Stream(ctx, "KV_"+Bucket)
	if err != nil {
		return nil, fmt.Errorf("kv bucket %s stream: %w", Bucket, err)
	}
	if opts.wrapKV != nil {
		kv = opts.wrapKV(kv)
	}
	f := &Fleet{js: js, opts: opts, stream: stream, kv: kv, kvStream: kvStream, router: router, warn: ratelog.New(opts.Logger.With("component", "fleet"), 10*time.Second),
		log: opts.Logger.With("component", "fleet")}
	for p, c := range cons {
		f.parts = append(f.parts, &partHandler{f: f, p: p, cons: c, subject: streams.TraceSubject(opts.Subjects.Traces, p)})
	}
	return f, nil
}

// Consumers returns the partition consumers by name, and the router's.
func (f *Fleet) Consumers() map[string]jetstream.Consumer {
	out := map[string]jetstream.Consumer{}
	for _, h := range f.parts {
		out["traces-"+strconv.Itoa(h.p)] = h.cons
	}
	if f.router != nil {
		out["traces"] = f.router
	}
	return out
}

// Run consumes every partition (and routes the bare subject) until ctx is
// done; then it stops pulling, finishes and commits what was delivered,
// writes the snapshot of every partition it holds, acks, and unpins the
// partitions pinned to it so another worker takes them over at once. It
// returns nil on a clean stop.
func (f *Fleet) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(f.parts)+1)
	start := func(c jetstream.Consumer, h pull.BatchHandler, name, group string) error {
		p, err := pull.New(c, h, pull.Options{Name: name, Batch: f.opts.Batch, MaxBytes: pullBytes, Logger: f.opts.Logger, Counters: f.opts.Counters,
			DeadLetter: f.opts.DeadLetter, Healthy: f.opts.Healthy, PriorityGroup: group})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(ctx); err != nil {
				errc <- err
			}
		}()
		return nil
	}
	for _, h := range f.parts {
		if err := start(h.cons, h, "traces", partitionGroup); err != nil {
			return err
		}
	}
	if f.router != nil {
		if err := start(f.router, &router{f: f}, "traces-router", ""); err != nil {
			return err
		}
	}
	// Snapshots of partitions whose acks wait.
	tick := time.NewTicker(f.opts.SnapshotEvery / 10)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			f.flushAll(ctx, false)
		}
	}
	wg.Wait()
	close(errc)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	f.flushAll(stop, true)
	for _, h := range f.parts {
		h.unpin(stop)
	}
	return <-errc
}

// flushAll flushes every partition (see partHandler.flush), up to
// GOMAXPROCS of them (at least two) side by side (a snapshot is encoding, then waiting on
// the bucket), and returns when all are done. Nothing is
// flushed once ctx is done.
func (f *Fleet) flushAll(ctx context.Context, final bool) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	for _, h := range f.parts {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			h.flush(ctx, final)
		}()
	}
	wg.Wait()
}

// foldAfter is Options.FoldAfter or its default.
func (f *Fleet) foldAfter() time.Duration {
	if f.opts.FoldAfter > 0 {
		return f.opts.FoldAfter
	}
	return partstate.DefaultFoldAfter
}

// DefaultHoursKept is how long after its ts a call is still kept by the
// hour by default: a live fleet applies its calls
// within seconds, so all but stragglers more than two days late are; a
// replay of traces older than that (last month's, a benchmark's) is kept
// by the day, a state per run and day rather than per run and hour.
const DefaultHoursKept = 48 * time.Hour

// HoursFrom returns whether calls are kept by the hour and from which
// ts_millis on (see Options.HoursKept).
func (f *Fleet) hoursFrom() (bool, int64) {
	kept := f.opts.HoursKept
	switch {
	case kept < 0:
		return false, 0
	case kept == 0:
		kept = DefaultHoursKept
	}
	return true, f.now().Add(-kept).UnixMilli()
}

// now is the retention's clock.
func (f *Fleet) now() time.Time {
	if f.opts.Now != nil {
		return f.opts.Now()
	}
	return time.Now()
}
