package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/internal/ratelog"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/redact"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
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

// partitionKey is partition p's key in the Bucket KV bucket.
func partitionKey(p int) string { return "partition." + strconv.Itoa(p) }

// partPointer is the value of a partition's KV key.
type partPointer struct {
	Partition  int     `json:"partition"`
	Partitions int     `json:"partitions"`
	LastSeq    uint64  `json:"last_seq"`
	Snapshot   blobRef `json:"snapshot"`
	Aggregate  blobRef `json:"aggregate"`
	// Deltas follow Snapshot (and Aggregate), in order (see delta.go).
	Deltas  []blobRef `json:"deltas,omitempty"`
	Writer  string    `json:"writer"`
	Runs    int       `json:"runs"` // run partial states in memory (per run and day or hour)
	Keys    int       `json:"keys"`
	Written time.Time `json:"written"`
}

// blobRef names a chunked value in the Bucket KV bucket.
type blobRef struct {
	Prefix string `json:"prefix"`
	Chunks int    `json:"chunks"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
}

// blobChunk is the largest chunk of a snapshot or aggregate (under the
// default 1 MiB max payload).
const blobChunk = 512 << 10

func putBlob(ctx context.Context, kv jetstream.KeyValue, prefix string, data []byte) (blobRef, error) {
	sum := sha256.Sum256(data)
	ref := blobRef{Prefix: prefix, SHA256: hex.EncodeToString(sum[:]), Size: len(data)}
	for off := 0; off == 0 || off < len(data); off += blobChunk {
		end := min(off+blobChunk, len(data))
		if _, err := kv.Put(ctx, prefix+"."+strconv.Itoa(ref.Chunks), data[off:end]); err != nil {
			return blobRef{}, fmt.Errorf("put %s: %w", prefix, err)
		}
		ref.Chunks++
	}
	return ref, nil
}

// errBlobChanged is a chunked value overwritten while it was read (its
// writer moved on two snapshots): read the pointer again.
var errBlobChanged = errors.New("digest mismatch (overwritten while read)")

// getBlob reads a chunked value and checks its digest.
func getBlob(ctx context.Context, kv jetstream.KeyValue, ref blobRef) ([]byte, error) {
	data := make([]byte, 0, ref.Size)
	for i := range ref.Chunks {
		e, err := kv.Get(ctx, ref.Prefix+"."+strconv.Itoa(i))
		if err != nil {
			return nil, fmt.Errorf("get %s chunk %d: %w", ref.Prefix, i, err)
		}
		data = append(data, e.Value()...)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("get %s: %w", ref.Prefix, errBlobChanged)
	}
	return data, nil
}

// Options configure a Fleet.
type Options struct {
	Subjects streams.Subjects
	// Instance names this worker in snapshot object names and logs.
	Instance string
	// Roots and Files confine segment references: a reference resolves
	// under Roots; nil Files reads with confine's default limits.
	Roots confine.Roots
	Files *confine.Reader
	// SnapshotEvery: see DefaultSnapshotEvery; 0 means that.
	SnapshotEvery time.Duration
	// PinnedTTL: see DefaultPinnedTTL; 0 means that.
	PinnedTTL time.Duration
	// AckWait of the partition consumers; 0 means 30 s.
	AckWait time.Duration
	// MaxRecordBytes refuses (dead-letters) a trace record larger than
	// this; 0 means calls.MaxRecordBytes, -1 no limit.
	MaxRecordBytes int
	// Batch is the most messages per store transaction; 0 means 512.
	Batch      int
	Logger     *slog.Logger
	Counters   pull.Counters
	DeadLetter pull.DeadLetterer
	// Healthy follows the partition pullers (see pull.Options.Healthy).
	Healthy func(ok bool)
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
	// gap: the snapshot or the store read, and the catch-up from the
	// stream), whether or not it succeeded.
	PartitionLoad func(time.Duration)
	// Freed, when set, is called after a snapshot that leaves garbage
	// behind: one that folded days out of memory or pruned them, and the
	// first after a backlog drained (what the burst decoded and applied).
	// It is called with the partition's lock held, so it must not block.
	Freed func()

	// wrapKV, set by tests, wraps the partitions bucket (to inject faults).
	wrapKV func(jetstream.KeyValue) jetstream.KeyValue
	// failCommit, set by tests, fails a store commit when it returns an
	// error.
	failCommit func() error
	// afterFold, set by tests, is called with each call of a record or
	// segment row once it is folded into the partition state (a panic in
	// it stands for a bug in the fold).
	afterFold func(calls.Call)
	// leftoverAge, set by tests, replaces defaultLeftoverAge.
	leftoverAge time.Duration
}

// Fleet consumes the partitioned traces: one pinned-client puller per
// partition (every worker pulls every partition; JetStream delivers each to
// one worker at a time), partition state in the worker's store, snapshots
// and aggregates in the Bucket buckets, and the router that moves
// records published to the bare traces subject onto their partitions.
//
// Ownership: on the first batch of a partition it does not hold (a new pin,
// a restart, a takeover), a worker loads the partition's newest snapshot
// when it is not the one its own store descends from, catches up from the
// stream after the snapshot's sequence with an ordered consumer (up to the
// highest sequence the durable consumer delivered: anything later the
// durable delivers itself), and applies the batch with dedupe. Each batch
// is committed to the store in one transaction (keys, run states, head);
// the ack is held until the partition's next snapshot is written (at most
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
	st     *store.Store
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
	// storeMu serialises the partitions' store writes: SQLite has one
	// writer, and writers contending for it back off by sleeping.
	storeMu sync.Mutex
	// commitQ holds the partition commits waiting for storeMu; whoever
	// takes storeMu next commits all of them in one transaction (group
	// commit: one sync to disk for the partitions that queued during the
	// previous one).
	commitMu sync.Mutex
	commitQ  []*commitReq
}

// commitReq is one partition commit waiting in Fleet.commitQ.
type commitReq struct {
	pc   store.PartCommit
	done chan error // receives the result once
}

// commitPartition stores c for partition p, in one transaction with the
// commits other partitions queued meanwhile. It returns once c is durably
// committed, or with the error of the transaction that would have held
// it, in which case none of that transaction is stored.
func (f *Fleet) commitPartition(ctx context.Context, p int, c store.PartitionCommit) error {
	req := &commitReq{pc: store.PartCommit{Part: p, Commit: c}, done: make(chan error, 1)}
	f.commitMu.Lock()
	f.commitQ = append(f.commitQ, req)
	f.commitMu.Unlock()
	f.storeMu.Lock()
	defer f.storeMu.Unlock()
	select {
	case err := <-req.done: // committed by the previous holder of storeMu
		return err
	default:
	}
	f.commitMu.Lock()
	group := f.commitQ
	f.commitQ = nil
	f.commitMu.Unlock()
	// req is in group: it was queued before storeMu was taken, and whoever
	// took the queue since answered it before releasing storeMu.
	cs := make([]store.PartCommit, len(group))
	for i, r := range group {
		cs[i] = r.pc
	}
	var err error
	if f.opts.failCommit != nil {
		err = f.opts.failCommit()
	}
	if err == nil {
		err = f.st.CommitPartitions(ctx, cs)
	}
	for _, r := range group {
		r.done <- err
	}
	return <-req.done
}

// EnsureBucket creates (or binds, updating an existing bucket with
// other replicas) the KV bucket Bucket with the given replicas (0
// means 1).
func EnsureBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := streams.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Replicas: max(replicas, 1),
		Description: "verdryx: per-partition snapshot pointers, snapshots and aggregates"})
	if err != nil {
		return nil, fmt.Errorf("kv bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// New ensures the partition consumers and buckets (the streams must
// exist: streams.EnsureStreams) and returns the fleet consumer of this worker.
// router is the bare traces subject's consumer (nil: no routing).
func New(ctx context.Context, js jetstream.JetStream, st *store.Store, router jetstream.Consumer, opts Options) (*Fleet, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SnapshotEvery <= 0 {
		opts.SnapshotEvery = DefaultSnapshotEvery
	}
	if opts.Batch <= 0 {
		opts.Batch = 512
	}
	if opts.Files == nil {
		opts.Files = &confine.Reader{Roots: opts.Roots}
	}
	if opts.Subjects == (streams.Subjects{}) {
		opts.Subjects = streams.DefaultSubjects()
	}
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
	f := &Fleet{js: js, st: st, opts: opts, stream: stream, kv: kv, kvStream: kvStream, router: router, warn: ratelog.New(opts.Logger.With("component", "fleet"), 10*time.Second),
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
// the bucket and the store), and returns when all are done. Nothing is
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

// partHandler is one partition's consumer side.
type partHandler struct {
	f       *Fleet
	p       int
	cons    jetstream.Consumer
	subject string

	mu     sync.Mutex
	state  *partState // nil: not held (load on the next batch)
	rev    uint64     // KV revision the state descends from
	blobs  []blobRef  // what the pointer at rev names
	aggs   [2]blobRef // the aggregate last written apart into each slot, until deleted
	held   []pull.Msg // records committed, waiting for the snapshot to be acked
	top    pull.Msg   // the newest of held (by stream sequence): the one acked
	topSeq uint64
	// heldDead is how many of held were dead-lettered (counted as
	// terminated, not acked).
	heldDead int
	// lastDseq is the consumer delivery sequence of the last record
	// applied to state (0 when state is nil).
	lastDseq uint64
	dirty    bool
	lastSnap time.Time
	// lastSnapTook is how long the last snapshot took to write (encode,
	// blobs, pointer); 0 before the first.
	lastSnapTook time.Duration
	// tried names the blobs of a pointer update whose outcome is unknown
	// (its reply was lost); nil when the pointer's revision is known.
	tried []blobRef
	// needBase: the next snapshot is a base (the state was loaded, or
	// which snapshot it follows is not known). baseUnits weighs the last
	// base and chainUnits the deltas since (deltaUnits), lastDeltaUnits
	// the delta baseDue weighed last; storeDeltas is how many deltas
	// follow the base in the store; deltaSlot is the slot of the delta
	// last written (see writeDelta).
	needBase                              bool
	baseUnits, chainUnits, lastDeltaUnits int
	storeDeltas                           int
	deltaSlot                             int
	pinID                                 string
	lastBatch                             time.Time
	// backlog: the last batch's consumer had more pending after it.
	backlog bool
	// burst: a batch had a backlog since the last snapshot that saw
	// none (Options.Freed is called at that snapshot).
	burst bool
	// storeErr is the last store commit's failure (nil after a success).
	storeErr error
	buf      []byte         // snapshot encoding buffer, reused
	batch    rowbatch.Batch // row batch decoding buffers, reused
	name     []byte         // run name buffer, reused
}

// errStore is a snapshot that could not be stored in the worker's store:
// the state is dropped (reloaded).
var errStore = errors.New("store")

// errLost is a snapshot whose compare-and-set failed: another worker wrote
// the partition since this one loaded it.
var errLost = errors.New("partition taken over by another worker")

// HandleBatch implements pull.BatchHandler: it applies the batch (loading
// the partition first when it is not held, or reloading it when the
// consumer's deliveries skipped some), commits it, dead-letters the records
// that can never apply, and holds the acks for the next snapshot.
//
// The partition consumers ack with AckAll: the one ack a snapshot sends, for
// the newest record held, acks every earlier record of the partition. So the
// handler keeps one invariant: while it holds the state, every record of the
// partition up to the newest one delivered to it is in the state or
// dead-lettered. The state is loaded with a catch-up through everything the
// consumer delivered; a delivery sequence that is not the next one (the pin
// was with another worker meanwhile, or the subscription lost messages)
// reloads it; any failure that leaves a record of the batch out of the state
// (a store commit, a dead-letter copy that could not be published, a panic)
// drops the state, so nothing is acked before the reload has caught up. It
// never returns a permanent error (JetStream's terminate would ack the
// earlier records too): it dead-letters such records itself and settles
// them with the next ack.
func (h *partHandler) HandleBatch(ctx context.Context, msgs []pull.Msg) (errs []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastBatch = time.Now()
	errs = make([]error, len(msgs))
	defer func() {
		if r := recover(); r != nil {
			h.f.log.Error("partition handler panic", "partition", h.p, "panic", r)
			h.drop()
			for i := range errs {
				errs[i] = pull.Transient("partition "+strconv.Itoa(h.p), fmt.Errorf("handler panic: %v", r))
			}
		}
	}()
	if pin := msgs[0].Headers().Get("Nats-Pin-Id"); pin != "" {
		h.pinID = pin
	}
	seqs, dseqs := make([]uint64, len(msgs)), make([]uint64, len(msgs))
	newest := uint64(0)
	for i, m := range msgs {
		if md, err := m.Metadata(); err == nil {
			seqs[i], dseqs[i] = md.Sequence.Stream, md.Sequence.Consumer
			newest = max(newest, seqs[i])
			h.backlog = md.NumPending > 0
			h.burst = h.burst || h.backlog
		}
	}
	if h.state != nil && !follows(h.lastDseq, dseqs) {
		if err := h.resync(ctx, newest); err != nil {
			h.f.log.Info("partition deliveries skipped a sequence: reloading", "partition", h.p, "after", h.lastDseq, "got", dseqs[0], "err", err)
			h.drop()
		}
	}
	if h.state == nil {
		t0 := time.Now()
		err := h.gain(ctx, newest)
		if c := h.f.opts.PartitionLoad; c != nil {
			c(time.Since(t0))
		}
		if err != nil {
			h.f.warn.Warn("take over partition", "partition", h.p, "err", err)
			for i := range errs {
				errs[i] = pull.Transient("take over partition "+strconv.Itoa(h.p), err)
			}
			return errs
		}
	}
	s := h.state
	before := s.lastSeq
	var poison []int
	for i, m := range msgs {
		s.begin()
		if err := h.applySafe(ctx, s, m, seqs[i]); err != nil {
			s.rollback()
			errs[i] = err
			poison = append(poison, i)
		}
	}
	fail := func(reason string, err error) []error {
		h.drop()
		for i := range errs {
			errs[i] = pull.Transient(reason+" "+strconv.Itoa(h.p), err)
		}
		return errs
	}
	// Copy the poison records before anything is committed, as the
	// catch-up does: the next commit stores the batch's newest sequence as
	// the partition's, so a copy failing after it would leave a reload
	// (from the store) to catch up past the record, and the next ack would
	// ack it uncopied. A copy made again after a reload is dropped by its
	// dead-letter id.
	for _, i := range poison {
		if err := h.deadLetter(ctx, msgs[i], errs[i]); err != nil {
			return fail("dead-letter on partition", err)
		}
	}
	if s.changedSince(before) {
		h.dirty = true
	}
	for i, m := range msgs {
		errs[i] = pull.ErrDeferred
		h.hold(m, seqs[i])
	}
	h.heldDead += len(poison)
	h.lastDseq = dseqs[len(dseqs)-1]
	// Commit and snapshot when snapshotDue: a snapshot is written whole,
	// so its cost grows with the partition. When records stop coming, the
	// ticker's idle rule (see flush) acks what waits.
	// While the store fails, every batch tries it (and reports the
	// failure, so readiness follows the store, whichever path saw it).
	if time.Since(h.lastSnap) >= h.snapshotDue() || h.storeErr != nil {
		if err := h.flushLocked(ctx, len(msgs)); err != nil {
			for i := range errs {
				errs[i] = pull.Transient("store partition "+strconv.Itoa(h.p), err)
			}
		}
	}
	return errs
}

// resync brings the held state past a gap in the consumer's deliveries
// (messages the client lost, a redelivery, or the pin away and back): when
// the partition's pointer is still at the revision the state descends
// from (no other worker wrote the partition meanwhile), the state is still
// the partition's up to its sequence, and a catch-up from there through
// upTo (and everything delivered) restores the invariant that every
// record up to the newest delivered one is in the state. Otherwise, or on
// any failure, it returns an error and the caller reloads.
func (h *partHandler) resync(ctx context.Context, upTo uint64) error {
	if h.tried != nil {
		return errors.New("a pointer update's outcome is unknown")
	}
	entry, err := h.f.kv.Get(ctx, partitionKey(h.p))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if h.rev != 0 {
			return errLost
		}
	case err != nil:
		return fmt.Errorf("read partition %d pointer: %w", h.p, err)
	case entry.Revision() != h.rev:
		return errLost
	}
	h.f.log.Debug("partition deliveries skipped a sequence: catching up", "partition", h.p, "last_seq", h.state.lastSeq)
	return h.catchUp(ctx, upTo)
}

// follows reports whether the delivery sequences dseqs continue last one by
// one (an unknown sequence, 0, never does).
func follows(last uint64, dseqs []uint64) bool {
	for _, d := range dseqs {
		if d == 0 || d != last+1 {
			return false
		}
		last = d
	}
	return true
}

// hold keeps m's ack for the next snapshot; the newest record held is the
// one acked.
func (h *partHandler) hold(m pull.Msg, seq uint64) {
	h.held = append(h.held, m)
	if h.top == nil || seq > h.topSeq {
		h.top, h.topSeq = m, seq
	}
}

// drop forgets the partition's state (the next batch loads it again and
// catches up) and naks the held records, which are redelivered and
// deduplicated.
func (h *partHandler) drop() {
	h.state, h.lastDseq = nil, 0
	for _, m := range h.held {
		_ = m.NakWithDelay(0)
	}
	if c := h.f.opts.Counters; c != nil && len(h.held) > 0 {
		c.Naked("traces", len(h.held))
	}
	clear(h.held)
	h.held, h.top, h.topSeq, h.heldDead = h.held[:0], nil, 0, 0
}

// deadLetter copies a record that can never apply to the dead-letter
// subject with its reason (when the fleet has a DeadLetterer); it is then
// settled by the next ack.
func (h *partHandler) deadLetter(ctx context.Context, m pull.Msg, cause error) error {
	reason := redact.String(cause.Error())
	if len(reason) > 512 {
		reason = reason[:512]
	}
	h.f.log.Warn("dead-lettering record (the next ack settles it)", "partition", h.p, "subject", m.Subject(), "reason", reason)
	c := h.f.opts.Counters
	if dl := h.f.opts.DeadLetter; dl != nil {
		if err := dl.DeadLetter(ctx, m, reason); err != nil {
			return fmt.Errorf("dead-letter copy: %w", err)
		}
		if c != nil {
			c.DeadLettered("traces", 1)
		}
	}
	if c != nil {
		c.Terminated("traces", 1)
	}
	return nil
}

// applySafe is apply with a panic turned into a permanent error (apply's
// changes are recorded in the undo log as each call is folded, so the
// caller's rollback undoes a call folded before the panic).
func (h *partHandler) applySafe(ctx context.Context, s *partState, m pull.Msg, seq uint64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = pull.Permanent("handler panic", fmt.Errorf("stream seq %d: %v", seq, r))
		}
	}()
	s.hoursOn, s.hoursFrom = h.f.hoursFrom()
	return h.apply(ctx, s, m, seq)
}

// snapshotDue is how long after the last snapshot the next one is due
// while records arrive: snapshotShare times the last snapshot's duration
// (times the partitions per core), at least a twentieth and at most the
// whole of SnapshotEvery; while a backlog drains, backlogShare times
// longer, up to backlogSnapshots times SnapshotEvery (acks can wait: the
// ack wait is far longer).
func (h *partHandler) snapshotDue() time.Duration {
	every := h.f.opts.SnapshotEvery
	// The partitions snapshot side by side on GOMAXPROCS cores: their
	// share of the machine, not each one's of its own time, is bounded.
	share := snapshotShare * max(1, len(h.f.parts)/runtime.GOMAXPROCS(0))
	longest := every
	if h.backlog {
		longest = backlogSnapshots * every
		share *= backlogShare
	}
	return min(max(time.Duration(share)*h.lastSnapTook, every/20), longest)
}

// apply folds one message into s: a row batch, a record's call, or the
// partition's rows of a referenced segment. A message at or below the
// state's sequence is already in it (redelivered); rows and calls already
// applied (in a segment's row set, or with a dedupe key applied) are
// skipped. Errors are classified for the pull loop.
func (h *partHandler) apply(ctx context.Context, s *partState, m pull.Msg, seq uint64) error {
	if seq != 0 && seq <= s.lastSeq {
		return nil
	}
	data := m.Data()
	var err error
	if rowbatch.IsBatch(data) {
		if len(data) > tracemsg.MaxBatchBytes {
			return pull.Permanent("oversized row batch", fmt.Errorf("stream seq %d: %d bytes, at most %d", seq, len(data), tracemsg.MaxBatchBytes))
		}
		err = h.applyBatch(s, data, seq)
	} else {
		if err := calls.CheckSize(len(data), h.f.opts.MaxRecordBytes); err != nil {
			return pull.Permanent("oversized trace record", fmt.Errorf("stream seq %d: %w", seq, err))
		}
		rec, derr := tracemsg.DecodeCallRecord(data)
		if derr != nil {
			return pull.Permanent("malformed trace record", fmt.Errorf("stream seq %d: %w", seq, derr))
		}
		if rec.Segment != "" {
			err = h.applySegment(ctx, s, rec.Segment, seq)
		} else {
			err = h.applyRecord(s, &rec, m.Headers(), seq)
		}
	}
	if err == nil && seq > s.lastSeq {
		s.lastSeq = seq
	}
	return err
}

// applyBatch applies a row batch as one unit: every row of it that the
// partition has not applied yet, or (an error) none.
func (h *partHandler) applyBatch(s *partState, data []byte, seq uint64) error {
	b := &h.batch
	// The batch's strings but run ids come interned (fold keeps outcomes
	// and agents): once per distinct string, not per row.
	b.Intern = s.intern
	err := rowbatch.Decode(data, b)
	b.Intern = nil
	if err != nil {
		return pull.Permanent("malformed row batch", fmt.Errorf("stream seq %d: %w", seq, err))
	}
	if b.Parts != s.parts || b.Part != h.p {
		return pull.Permanent("row batch on the wrong partition",
			fmt.Errorf("stream seq %d: rows of partition %d of %d published to %s (this worker uses %d partitions)", seq, b.Part, b.Parts, h.subject, s.parts))
	}
	lo, hi := b.Rows[0], b.Rows[len(b.Rows)-1]
	done := s.segs[b.Digest]
	digest := hex.EncodeToString(b.Digest[:])
	if done.covers(lo, hi) || s.rowKeys && s.has(segmentDoneKey(digest)) {
		return nil
	}
	order := segmentOrder(b.Segment, digest, 0)
	for i := range b.Calls {
		c, row := &b.Calls[i], b.Rows[i]
		if err := calls.CheckCostMicroUSD(c.CostMicroUSD); err != nil {
			return pull.Permanent("invalid row batch", fmt.Errorf("stream seq %d: segment %s row %d: %w", seq, b.Segment, row, err))
		}
		var key store.Key
		name := h.name[:0]
		if c.HasRunID {
			if p := tracemsg.PartitionOf(c.RunID, s.parts); p != h.p {
				return pull.Permanent("row batch on the wrong partition", fmt.Errorf("stream seq %d: segment %s row %d: run %q is in partition %d", seq, b.Segment, row, c.RunID, p))
			}
			name = append(append(name, runPrefix), c.RunID...)
		} else {
			k := tracemsg.RowKey(digest, row)
			if p := tracemsg.PartitionOf(k, s.parts); p != h.p {
				return pull.Permanent("row batch on the wrong partition", fmt.Errorf("stream seq %d: segment %s row %d is in partition %d", seq, b.Segment, row, p))
			}
			key = hashKey(k)
			name = append(append(name, independent), key[:]...)
		}
		h.name = name
		if len(done) > 0 && done.has(row) {
			continue
		}
		if s.rowKeys { // the row's key, from a per-row record or an older state
			if c.HasRunID {
				key = hashKey(tracemsg.RowKey(digest, row))
			}
			if s.has(key) {
				continue
			}
		}
		order[3] = row
		if _, err := s.foldCall(name, c, order, true); err != nil {
			return pull.Permanent("cost sum overflow", fmt.Errorf("stream seq %d: segment %s row %d: %w", seq, b.Segment, row, err))
		}
		if h.f.opts.afterFold != nil {
			h.f.opts.afterFold(*c)
		}
	}
	s.addRows(b.Digest, lo, hi)
	return nil
}

func (h *partHandler) applyRecord(s *partState, rec *tracemsg.CallRecord, hdr nats.Header, seq uint64) error {
	msgID := tracemsg.MsgID(hdr)
	c, err := rec.Call()
	if err != nil {
		return pull.Permanent("invalid trace record", err)
	}
	key, err := tracemsg.RecordKey(rec, msgID)
	if err != nil {
		return pull.Permanent("invalid trace record", err)
	}
	want := tracemsg.PartitionOf(key, s.parts)
	if c.HasRunID {
		want = tracemsg.PartitionOf(c.RunID, s.parts)
	}
	if want != h.p {
		return pull.Permanent("trace record on the wrong partition",
			fmt.Errorf("stream seq %d: belongs to partition %d of %d, published to %s", seq, want, s.parts, h.subject))
	}
	k := hashKey(key)
	if s.has(k) {
		return nil
	}
	order := recordOrder(c.TSMillis, key)
	if digest, row, ok := tracemsg.ParseSegmentRowID(msgID); ok {
		// A segment row published as its own record: skipped when a batch
		// or reference applied it; its key marks it otherwise.
		if d, err := hex.DecodeString(digest); err == nil && len(d) == 32 && s.segs[[32]byte(d)].has(row) {
			return nil
		}
		s.rowKeys = true
		order = segmentOrder(hdr.Get(tracemsg.HeaderSegment), digest, row)
	}
	if err := s.apply(k, &c, order); err != nil {
		return pull.Permanent("cost sum overflow", fmt.Errorf("trace record (stream seq %d): %w", seq, err))
	}
	if h.f.opts.afterFold != nil {
		h.f.opts.afterFold(c)
	}
	return nil
}

// applySegment applies the rows of this partition of a referenced segment,
// all or none; rows already applied (by a batch, a record or an earlier
// reference) are skipped.
func (h *partHandler) applySegment(ctx context.Context, s *partState, name string, seq uint64) error {
	path, data, err := h.f.opts.Files.ReadResolved(ctx, name)
	if err != nil {
		return pull.Permanent("segment refused", err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if s.rowKeys && s.has(segmentDoneKey(digest)) {
		return nil
	}
	done := s.segs[sum]
	row := uint64(0)
	err = segment.ReadBytes(path, data, func(c calls.Call) error {
		defer func() { row++ }()
		key := tracemsg.RowKey(digest, row)
		part := tracemsg.PartitionOf(key, s.parts)
		if c.HasRunID {
			part = tracemsg.PartitionOf(c.RunID, s.parts)
		}
		if part != h.p || done.has(row) {
			return nil
		}
		k := hashKey(key)
		if s.rowKeys && s.has(k) {
			return nil
		}
		runName := append([]byte{independent}, k[:]...)
		if c.HasRunID {
			runName = append([]byte{runPrefix}, c.RunID...)
		}
		if _, err := s.fold(runName, &c, segmentOrder(filepath.Base(path), digest, row)); err != nil {
			return pull.Permanent("cost sum overflow", fmt.Errorf("segment %s row %d: %w", name, row, err))
		}
		if h.f.opts.afterFold != nil {
			h.f.opts.afterFold(c)
		}
		return nil
	})
	if err != nil {
		var pe *pull.Error
		if errors.As(err, &pe) {
			return err
		}
		return pull.Permanent("segment corrupt", err)
	}
	if row > 0 {
		s.addRows(sum, 0, row-1)
	}
	return nil
}

// gain loads the partition: the shared snapshot when the local state does
// not descend from it, else the local state; then catches up through
// everything the consumer delivered, and at least through stream sequence
// upTo (the newest record of the batch being handled).
func (h *partHandler) gain(ctx context.Context, upTo uint64) error {
	parts := h.f.opts.Subjects.PartitionCount()
	var ptr partPointer
	var rev uint64
	entry, err := h.f.kv.Get(ctx, partitionKey(h.p))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("read partition %d pointer: %w", h.p, err)
	default:
		rev = entry.Revision()
		if err := json.Unmarshal(entry.Value(), &ptr); err != nil {
			return fmt.Errorf("partition %d pointer: %w", h.p, err)
		}
		if ptr.Partitions != parts {
			return fmt.Errorf("partition %d was published with %d partitions, this worker uses %d (--partitions)", h.p, ptr.Partitions, parts)
		}
	}
	head, local, err := h.f.st.PartitionHead(ctx, h.p)
	if err != nil {
		return err
	}
	var s *partState
	switch {
	case rev != 0 && (!local || head.BaseRev != rev):
		b, err := getBlob(ctx, h.f.kv, ptr.Snapshot)
		if err != nil {
			return fmt.Errorf("partition %d snapshot: %w", h.p, err)
		}
		if s, err = decodePartState(b); err != nil {
			return err
		}
		if s.part != h.p || s.parts != parts {
			return fmt.Errorf("snapshot %s holds partition %d of %d", ptr.Snapshot.Prefix, s.part, s.parts)
		}
		if len(ptr.Deltas) > 0 {
			if err := applyDeltaBlobs(ctx, h.f.kv, s, ptr.Deltas); err != nil {
				return fmt.Errorf("partition %d snapshot: %w", h.p, err)
			}
			// The store gets the state whole: its own base.
			b, _, _ = s.encodeBoth(nil)
		}
		// The folded days' tables come with it: their keys, and a copy in
		// the store for the late calls that correct them.
		tables, err := fetchDays(ctx, h.f.kv, s, allDays(), true)
		if err != nil {
			return err
		}
		c := s.stored(rev, b, nil, nil)
		for _, d := range slices.Sorted(maps.Keys(tables)) {
			c.Runs = append(c.Runs, store.RunState{Run: dayRun(d), State: tables[d]})
		}
		h.f.storeMu.Lock()
		err = h.f.st.ReplacePartition(ctx, h.p, c)
		h.f.storeMu.Unlock()
		if err != nil {
			return err
		}
		h.storeDeltas = 0
		h.f.log.Info("partition loaded from snapshot", "partition", h.p, "revision", rev, "writer", ptr.Writer, "last_seq", s.lastSeq, "run_states", s.runCount(), "folded_days", len(s.folded), "deltas", len(ptr.Deltas))
	case local:
		if s, err = readStoredPartition(ctx, h.f.st, h.p, head); err != nil {
			return err
		}
		s.storedTables = nil // in the store: loadDay reads one when a late call corrects it
		h.storeDeltas = s.storedDeltas
		if s.parts != parts {
			return fmt.Errorf("partition %d was written with %d partitions, this worker uses %d (--partitions)", h.p, s.parts, parts)
		}
		h.f.log.Info("partition loaded from the store", "partition", h.p, "revision", head.BaseRev, "last_seq", s.lastSeq, "run_states", s.runCount(), "folded_days", len(s.folded))
	default:
		s = newPartState(h.p, parts)
	}
	h.state, h.rev, h.blobs, h.tried, h.needBase = s, rev, nil, nil, true
	if rev != 0 {
		h.blobs = append([]blobRef{ptr.Snapshot, ptr.Aggregate}, ptr.Deltas...)
	}
	if err := h.catchUp(ctx, upTo); err != nil {
		h.state = nil
		return err
	}
	h.dirty = true
	h.sweep(ctx, s)
	return nil
}

// sweep lists the bucket's names of partition h.p once (a load's best
// effort: a failure is logged and left for the next load) for
// sweepPrunedDays and sweepLeftovers.
func (h *partHandler) sweep(ctx context.Context, s *partState) {
	info, err := h.f.kvStream.Info(ctx, jetstream.WithSubjectFilter(kvSubjects+"*."+strconv.Itoa(h.p)+".>"))
	if err != nil {
		h.f.log.Debug("list the bucket's names of the partition", "partition", h.p, "err", err)
		return
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, kvSubjects))
	}
	h.sweepPrunedDays(ctx, s, keys)
	h.sweepLeftovers(ctx, h.blobs, keys)
}

// kvSubjects is what the subjects of the bucket's keys start with.
const kvSubjects = "$KV." + Bucket + "."

// defaultLeftoverAge is how long after its last write a snapshot,
// aggregate or delta blob of another writer that the partition's pointer
// does not name is taken for a leftover: a writer that is still alive
// moves the pointer within seconds of its puts, or fails to and never
// reads the blob again.
const defaultLeftoverAge = time.Hour

// sweepLeftovers removes the partition's snapshot, aggregate and delta
// blobs (among keys, the partition's keys in the bucket) that named (the
// pointer's) does not name: this worker's own,
// which an earlier process of its instance wrote (one live worker holds an
// instance, and this one has written nothing of the partition since it
// loaded it), and other writers' last written more than
// defaultLeftoverAge ago. A writer leaves its other slots behind when the
// partition moves away from it, so without the sweep the bucket would
// keep up to two snapshots, an aggregate and a few deltas per partition
// of every instance that ever owned it: with workers whose names change
// at each start (a pod name), growth without end. Best effort, like
// sweepPrunedDays: a failure is logged and left for the next load.
func (h *partHandler) sweepLeftovers(ctx context.Context, named []blobRef, keys []string) {
	isNamed := map[string]bool{}
	for _, b := range named {
		isNamed[b.Prefix] = true
	}
	age := h.f.opts.leftoverAge
	if age <= 0 {
		age = defaultLeftoverAge
	}
	removed := 0
	for _, kind := range []string{"snap", "agg", "delta"} {
		names := kind + "." + strconv.Itoa(h.p) + "."
		// A blob is <kind>.<p>.<writer>.<slot> and a chunk index after it;
		// one of its chunks' keys is kept to read its age.
		blobs := map[string]string{}
		for _, key := range keys {
			if i := strings.LastIndexByte(key, '.'); strings.HasPrefix(key, names) && i > len(names) {
				blobs[key[:i]] = key
			}
		}
		for prefix, key := range blobs {
			if isNamed[prefix] {
				continue
			}
			writer := strings.TrimPrefix(prefix, names)
			if i := strings.LastIndexByte(writer, '.'); i >= 0 {
				writer = writer[:i]
			}
			if writer != h.f.opts.Instance {
				m, err := h.f.kvStream.GetLastMsgForSubject(ctx, kvSubjects+key)
				if err != nil || time.Since(m.Time) < age { // server time, not the retention clock
					continue
				}
			}
			if err := h.f.purgeKeys(ctx, prefix+".>"); err != nil {
				h.f.log.Debug("purge a leftover blob", "partition", h.p, "blob", prefix, "err", err)
				return
			}
			removed++
		}
	}
	if removed > 0 {
		h.f.log.Info("removed blobs no pointer names", "partition", h.p, "blobs", removed)
	}
}

// sweepPrunedDays removes what the bucket still holds under the names of
// days s has pruned: the delete markers of a build before purges by
// subject, a former owner's tables, anything a prune that failed left. A
// pruned day's name is never written again (its calls are late), so no
// writer races the purge. keys are the partition's keys in the bucket
// (sweep lists them once per load). Best effort: a failure is logged and
// left for the next load.
func (h *partHandler) sweepPrunedDays(ctx context.Context, s *partState, keys []string) {
	if len(s.pruned) == 0 {
		return
	}
	prefix := dayNamesPrefix(h.p)
	var days []int32
	for _, key := range keys {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		d, err := strconv.ParseInt(name, 10, 32)
		if err == nil && s.isPruned(int32(d)) && !slices.Contains(days, int32(d)) {
			days = append(days, int32(d))
		}
	}
	for _, d := range days {
		if err := h.f.purgeKeys(ctx, dayBlobPrefix(h.p, d)+".>"); err != nil {
			h.f.log.Debug("purge a pruned day's leftovers", "partition", h.p, "day", dayString(d), "err", err)
			return
		}
	}
	if len(days) > 0 {
		h.f.log.Info("removed what the bucket held of pruned days", "partition", h.p, "days", len(days))
	}
}

// catchUp applies the partition's records after the state's sequence up to
// the highest the durable consumer delivered (and at least upTo), read with
// an ordered consumer. Records that fail permanently are dead-lettered here
// (the durable consumer's copy of one is dead-lettered again under the same
// message id, which JetStream drops within its duplicate window). It fails,
// leaving the state to be dropped, unless it reached its target: an ack
// after a short catch-up would ack records the state never saw.
func (h *partHandler) catchUp(ctx context.Context, upTo uint64) error {
	info, err := h.cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("partition %d consumer info: %w", h.p, err)
	}
	s := h.state
	// Up to what the durable consumer delivered (it delivers the rest
	// itself), and no further than the partition's newest record, so the
	// catch-up ends on a record it reads rather than on a timeout.
	target := max(info.Delivered.Stream, upTo)
	last, err := lastSeqOf(ctx, h.f.stream, h.subject)
	if err != nil {
		return fmt.Errorf("partition %d catch-up: %w", h.p, err)
	}
	target = min(target, last)
	if target <= s.lastSeq {
		return nil
	}
	from := s.lastSeq
	oc, err := h.f.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{h.subject},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: s.lastSeq + 1, MaxResetAttempts: 5})
	if err != nil {
		return fmt.Errorf("partition %d catch-up: %w", h.p, err)
	}
	it, err := oc.Messages(jetstream.PullMaxBytes(pullBytes))
	if err != nil {
		return fmt.Errorf("partition %d catch-up: %w", h.p, err)
	}
	defer it.Stop()
	applied := 0
	for s.lastSeq < target {
		before, n := s.lastSeq, 0
		done := false
		var fail error
		for n < h.f.opts.Batch && s.lastSeq < target {
			m, err := it.Next(jetstream.NextMaxWait(5 * time.Second))
			if err != nil {
				fail = fmt.Errorf("partition %d catch-up stopped at stream seq %d of %d: %w", h.p, s.lastSeq, target, err)
				break
			}
			md, err := m.Metadata()
			if err != nil {
				fail = fmt.Errorf("partition %d catch-up: %w", h.p, err)
				break
			}
			seq := md.Sequence.Stream
			if seq > target {
				done = true // past the target: the durable consumer delivers it
				break
			}
			n++
			s.begin()
			if err := h.applySafe(ctx, s, m, seq); err != nil {
				s.rollback()
				if derr := h.deadLetter(ctx, m, err); derr != nil {
					fail = fmt.Errorf("partition %d catch-up, stream seq %d: %w", h.p, seq, derr)
					break
				}
				s.lastSeq = max(s.lastSeq, seq)
			}
		}
		if fail != nil {
			s.settle(false)
			s.lastSeq = before
			return fail
		}
		applied += n
		if done {
			break
		}
	}
	h.f.log.Info("partition caught up", "partition", h.p, "records", applied, "from_seq", from, "last_seq", s.lastSeq)
	return nil
}

// flush writes the snapshot when acks wait for it and it is due (or
// always, with final), then acks them.
func (h *partHandler) flush(ctx context.Context, final bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Due when snapshotDue passed, or when acks wait and no batch came
	// for a tenth of SnapshotEvery (the consumer has caught up).
	every := h.f.opts.SnapshotEvery
	idle := len(h.held) > 0 && time.Since(h.lastBatch) >= every/10
	if !final && !idle && time.Since(h.lastSnap) < h.snapshotDue() {
		return
	}
	_ = h.flushLocked(ctx, 0) // a store failure dropped the state: logged
}

// It returns the error of a store commit that failed (wrapping errStore),
// after dropping the state and naking what was held but the newest keep
// messages, which the caller settles (a batch being handled: naked with
// the pull loop's backoff, and reported unhealthy).
func (h *partHandler) flushLocked(ctx context.Context, keep int) error {
	if h.state == nil || (!h.dirty && len(h.held) == 0 && !h.state.pruneDue(h.f.now(), h.f.opts.Subjects.Retention)) {
		return nil
	}
	err := h.snapshot(ctx)
	switch {
	case errors.Is(err, errStore):
		h.f.warn.Warn("store partition", "partition", h.p, "err", err, "naked", len(h.held))
		clear(h.held[len(h.held)-keep:])
		h.held = h.held[:len(h.held)-keep]
		h.drop()
		return err
	case errors.Is(err, errLost):
		h.f.warn.Warn("partition lost", "partition", h.p, "naked", len(h.held))
		h.drop()
		return nil
	case err != nil:
		// Keep the acks held: the next flush tries again, and what times
		// out is redelivered and deduplicated.
		h.f.warn.Warn("partition snapshot", "partition", h.p, "err", err)
		return nil
	}
	// One ack for the newest record held acks every earlier one (AckAll):
	// each is in the snapshot just written, or dead-lettered.
	if h.top != nil {
		if err := h.top.Ack(); err != nil {
			h.f.log.Debug("ack", "err", err)
		}
	}
	if c := h.f.opts.Counters; c != nil {
		c.Acked("traces", len(h.held)-h.heldDead)
	}
	clear(h.held)
	h.held, h.top, h.topSeq, h.heldDead = h.held[:0], nil, 0, 0
	h.dirty = false
	return nil
}

// snapshot writes the partition's snapshot (a base, or a delta after the
// snapshots before it: see delta.go), then moves its KV pointer to it with
// compare-and-set on h.rev.
func (h *partHandler) snapshot(ctx context.Context) error {
	s := h.state
	start := time.Now()
	if h.tried != nil {
		if err := h.resolvePointer(ctx); err != nil {
			return err
		}
	}
	s.settle(true) // the keys applied join their days' key lists the snapshot copies
	before := map[int32]blobRef{}
	for d, r := range s.folded {
		before[d] = r.blob
	}
	now := h.f.now()
	load := func(d int32, ref *dayRef) (*dayTable, error) { return h.loadDay(ctx, d, ref) }
	tables, skipped := s.foldDays(now, h.f.foldAfter(), load)
	keys := func(d int32, ref *dayRef) ([]byte, error) {
		b, err := h.loadDayBytes(ctx, d, ref)
		if err != nil {
			return nil, err
		}
		_, _, _, kb, err := dayTableKeys(b)
		return kb, err
	}
	prunedDays, skipped2 := s.pruneDays(now, h.f.opts.Subjects.Retention, keys)
	for _, err := range append(skipped, skipped2...) {
		h.f.warn.Warn("fold partition day", "partition", h.p, "err", err)
	}
	// Each table is encoded once, for the store and the bucket.
	encoded := make(map[int32][]byte, len(tables))
	for _, t := range tables {
		encoded[t.day] = t.encode(nil)
	}
	gen, base := s.gen, h.baseDue(s)
	var blobs []blobRef
	var err error
	if base {
		blobs, err = h.writeBase(ctx, encoded, prunedDays)
	} else {
		blobs, err = h.writeDelta(ctx, encoded, prunedDays)
	}
	if err != nil {
		return err
	}
	ptr, _ := json.Marshal(partPointer{Partition: h.p, Partitions: s.parts, LastSeq: s.lastSeq, Snapshot: blobs[0],
		Aggregate: blobs[1], Deltas: blobs[2:], Writer: h.f.opts.Instance, Runs: s.runCount(), Keys: len(s.keys), Written: time.Now().UTC()})
	var rev uint64
	if h.rev == 0 {
		rev, err = h.f.kv.Create(ctx, partitionKey(h.p), ptr)
	} else {
		rev, err = h.f.kv.Update(ctx, partitionKey(h.p), ptr, h.rev)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return errLost
		}
		// The update may have been applied with its reply lost (a
		// timeout, a node going down): until the pointer is read again,
		// it may name the slot just written, which the next snapshot
		// would otherwise overwrite, leaving a pointer to blobs whose
		// digest no longer matches (a partition nobody can load).
		h.tried = blobs
		return fmt.Errorf("partition %d pointer: %w", h.p, err)
	}
	s.wrote(gen)
	if base {
		runs, keys := s.size()
		h.baseUnits, h.chainUnits, h.needBase = deltaUnits(runs, keys), 0, false
	} else {
		h.chainUnits += h.lastDeltaUnits
	}
	h.published(ctx, rev, blobs)
	h.lastSnapTook = time.Since(start)
	drained := h.burst && !h.backlog
	if drained {
		h.burst = false
	}
	if c := h.f.opts.Freed; c != nil && (len(tables) > 0 || len(prunedDays) > 0 || drained) {
		c()
	}
	// The blobs no snapshot names any more: superseded day tables and
	// pruned days. A reader holding an older pointer reads it again.
	for d, old := range before {
		if r, ok := s.folded[d]; old.Prefix != "" && (!ok || r.blob.Prefix != old.Prefix) {
			h.deleteBlob(ctx, old)
		}
	}
	// A pruned day's name is never written again (its calls are late):
	// whatever else is left under it goes too, such as the tables of an
	// owner before a takeover, or markers an older build left.
	for _, d := range prunedDays {
		if err := h.f.purgeKeys(ctx, dayBlobPrefix(h.p, d)+".>"); err != nil {
			h.f.log.Debug("purge pruned day", "partition", h.p, "day", d, "err", err)
		}
	}
	return nil
}

// deltaUnits weighs a state's runs and keys (a run's state takes about
// four keys' bytes) for baseDue.
func deltaUnits(runs, keys int) int { return runs + keys/4 }

// baseDue reports whether the next snapshot is a base rather than a
// delta: with no pointer yet, at the first snapshot after the state was
// loaded, after maxDeltas deltas, and when the deltas since the base with
// the next one would hold more than half of what a base holds.
func (h *partHandler) baseDue(s *partState) bool {
	if h.rev == 0 || h.needBase || len(h.blobs) < 2 || len(h.blobs)-2 >= maxDeltas {
		return true
	}
	runs, keys := s.dirty()
	h.lastDeltaUnits = deltaUnits(runs, keys)
	return h.chainUnits+h.lastDeltaUnits > h.baseUnits/2
}

// writeBase stores the state whole (dropping the store's deltas) with the
// tables just folded, publishes the tables, and puts the snapshot and
// (when written apart) the aggregate into the slot the pointer does not
// name. It returns the blobs the pointer is to name.
func (h *partHandler) writeBase(ctx context.Context, encoded map[int32][]byte, prunedDays []int32) ([]blobRef, error) {
	s := h.state
	// Write into the slot the pointer does not name (resolvePointer made
	// sure which one it names).
	slot := 0
	name := fmt.Sprintf("%d.%s.0", h.p, h.f.opts.Instance)
	if len(h.blobs) > 0 && h.blobs[0].Prefix == "snap."+name {
		slot, name = 1, fmt.Sprintf("%d.%s.1", h.p, h.f.opts.Instance)
	}
	// The KV puts are synchronous, so the buffer is free again once they
	// return.
	snapData, aggData, buf := s.encodeBoth(h.buf)
	h.buf = buf
	// The store first: a restart loads it when it descends from the
	// snapshot the pointer names. It holds the day tables too, in the
	// same transaction.
	c := s.stored(h.rev, snapData, encoded, prunedDays)
	for i := range h.storeDeltas {
		c.Drop = append(c.Drop, deltaRun(i+1))
	}
	if err := h.commitStore(ctx, c); err != nil {
		return nil, err
	}
	h.storeDeltas = 0
	// Then the day tables in the bucket, and the snapshot naming them.
	published, err := h.publishDays(ctx, encoded)
	if err != nil {
		return nil, err
	}
	if published > 0 {
		snapData, aggData, buf = s.encodeBoth(h.buf)
		h.buf = buf
	}
	snap, err := putBlob(ctx, h.f.kv, "snap."+name, snapData)
	if err != nil {
		return nil, err
	}
	written := len(snapData) + published
	// The aggregate is the snapshot without its row sets and keys: when
	// those are a small part of it, readers get the snapshot (the same
	// format) rather than the bucket a near copy of it.
	agg := snap
	if extra := len(snapData) - len(aggData); extra > len(aggData)/sharedAggregateShare {
		if agg, err = putBlob(ctx, h.f.kv, "agg."+name, aggData); err != nil {
			return nil, err
		}
		h.aggs[slot] = agg
		written += len(aggData)
	}
	if c := h.f.opts.SnapshotBytes; c != nil {
		c(written)
	}
	return []blobRef{snap, agg}, nil
}

// writeDelta stores what changed since the last snapshot as the store's
// next delta, with the tables just folded, publishes the tables, and puts
// the delta in the bucket. It returns the blobs the pointer is to name:
// the base's and its deltas with this one.
func (h *partHandler) writeDelta(ctx context.Context, encoded map[int32][]byte, prunedDays []int32) ([]blobRef, error) {
	s := h.state
	data := s.encodeDelta(h.buf)
	h.buf = data
	if err := h.commitStore(ctx, s.storedAs(h.rev, deltaRun(h.storeDeltas+1), data, encoded, prunedDays)); err != nil {
		return nil, err
	}
	h.storeDeltas++
	published, err := h.publishDays(ctx, encoded)
	if err != nil {
		return nil, err
	}
	if published > 0 {
		data = s.encodeDelta(h.buf)
		h.buf = data
	}
	// The delta slots form a ring longer than the longest chain: a slot
	// written is never one the pointer names, and the bucket holds at
	// most deltaSlots keys of deltas per partition and instance (a name
	// per delta would leave a delete marker per delta, forever).
	h.deltaSlot = (h.deltaSlot + 1) % deltaSlots
	ref, err := putBlob(ctx, h.f.kv, fmt.Sprintf("delta.%d.%s.%d", h.p, h.f.opts.Instance, h.deltaSlot), data)
	if err != nil {
		return nil, err
	}
	if c := h.f.opts.SnapshotBytes; c != nil {
		c(len(data) + published)
	}
	return append(slices.Clone(h.blobs), ref), nil
}

// commitStore commits c to the worker's store, recording the failure
// (wrapped in errStore: the caller drops the state).
func (h *partHandler) commitStore(ctx context.Context, c store.PartitionCommit) error {
	if err := h.f.commitPartition(ctx, h.p, c); err != nil {
		h.storeErr = err
		return fmt.Errorf("%w: %w", errStore, err)
	}
	h.storeErr = nil
	return nil
}

// published records that the pointer is at rev naming blobs, and deletes
// what the pointer named before and names no more: the deltas of a base
// written over, and aggregates written apart before (in either slot, or
// named by the pointer the state was loaded from) once the snapshot
// serves as the aggregate (no later snapshot overwrites their slots).
func (h *partHandler) published(ctx context.Context, rev uint64, blobs []blobRef) {
	prev := h.blobs
	h.setBase(ctx, rev, blobs)
	named := map[string]bool{}
	for _, b := range blobs {
		named[b.Prefix] = true
	}
	gone := map[string]bool{}
	drop := func(old blobRef) {
		if old.Prefix != "" && !named[old.Prefix] && !gone[old.Prefix] {
			gone[old.Prefix] = true
			h.deleteBlob(ctx, old)
		}
	}
	if len(prev) > 2 {
		for _, old := range prev[2:] {
			drop(old)
		}
	}
	if blobs[0] == blobs[1] {
		for _, old := range slices.Concat(prev, h.aggs[:]) {
			if strings.HasPrefix(old.Prefix, "agg.") {
				drop(old)
			}
		}
		h.aggs = [2]blobRef{}
	}
}

// foldAfter is Options.FoldAfter or its default.
func (f *Fleet) foldAfter() time.Duration {
	if f.opts.FoldAfter > 0 {
		return f.opts.FoldAfter
	}
	return DefaultFoldAfter
}

// DefaultHoursKept is how long after its ts a call is still kept by the
// hour by default: a live fleet applies its calls
// within seconds, so all but stragglers more than two days late are; a
// replay of traces older than that (last month's, a benchmark's) is kept
// by the day, a state per run and day rather than per run and hour.
const DefaultHoursKept = 48 * time.Hour

// hoursFrom returns whether calls are kept by the hour and from which
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

// loadDay returns a fresh copy of folded day d's table: from the store,
// else from the bucket.
func (h *partHandler) loadDay(ctx context.Context, d int32, ref *dayRef) (*dayTable, error) {
	b, err := h.loadDayBytes(ctx, d, ref)
	if err != nil {
		return nil, err
	}
	t, err := decodeDayTable(b)
	if err != nil {
		return nil, fmt.Errorf("partition %d day %s: %w", h.p, dayString(d), err)
	}
	return t, nil
}

// loadDayBytes returns folded day d's encoded table, checked (its
// checksum, and that it is revision ref.rev of this partition's day d):
// from the store, else from the bucket.
func (h *partHandler) loadDayBytes(ctx context.Context, d int32, ref *dayRef) ([]byte, error) {
	b, ok, err := h.f.st.PartitionRun(ctx, h.p, dayRun(d))
	if err != nil {
		return nil, err
	}
	if !ok {
		if ref.blob.Prefix == "" {
			return nil, fmt.Errorf("partition %d day %s: table revision %d neither stored nor published", h.p, dayString(d), ref.rev)
		}
		if b, err = getBlob(ctx, h.f.kv, ref.blob); err != nil {
			return nil, fmt.Errorf("partition %d day %s: %w", h.p, dayString(d), err)
		}
	}
	part, day, rev, _, err := dayTableKeys(b)
	if err != nil {
		return nil, fmt.Errorf("partition %d day %s: %w", h.p, dayString(d), err)
	}
	if part != h.p || day != d || rev != ref.rev {
		return nil, fmt.Errorf("partition %d day %s: the table holds partition %d day %s revision %d, want revision %d",
			h.p, dayString(d), part, dayString(day), rev, ref.rev)
	}
	return b, nil
}

// publishDays puts in the bucket the tables just folded (fresh, encoded
// by day), and any folded day whose table is not published yet (a put
// that failed before: read again from the store, else the bucket), and
// records their blobs in the state's references. It returns the bytes put.
func (h *partHandler) publishDays(ctx context.Context, fresh map[int32][]byte) (int, error) {
	s := h.state
	n := 0
	for _, d := range slices.Sorted(maps.Keys(s.folded)) {
		ref := s.folded[d]
		if ref.blob.Prefix != "" {
			continue
		}
		data := fresh[d]
		if data == nil {
			var err error
			if data, err = h.loadDayBytes(ctx, d, ref); err != nil {
				return n, err
			}
		}
		blob, err := putBlob(ctx, h.f.kv, fmt.Sprintf("%s.%s.%d", dayBlobPrefix(h.p, d), h.f.opts.Instance, ref.rev), data)
		if err != nil {
			return n, err
		}
		ref.blob = blob
		n += len(data)
	}
	return n, nil
}

// deleteBlob removes a blob's chunks from the bucket, logging a failure
// (a leftover blob is only unused space).
func (h *partHandler) deleteBlob(ctx context.Context, ref blobRef) {
	for i := range ref.Chunks {
		if err := h.f.purgeKeys(ctx, ref.Prefix+"."+strconv.Itoa(i)); err != nil {
			h.f.log.Debug("delete blob", "prefix", ref.Prefix, "err", err)
			return
		}
	}
}

// dayBlobPrefix is the bucket key prefix of partition p's tables of day d:
// a table is named <prefix>.<instance>.<revision>.
func dayBlobPrefix(p int, d int32) string {
	return dayNamesPrefix(p) + strconv.Itoa(int(d))
}

// dayNamesPrefix is what the names of partition p's day tables start with.
func dayNamesPrefix(p int) string { return "day." + strconv.Itoa(p) + "." }

// purgeKeys removes the bucket's keys matching key (a KV key, wildcards
// allowed) with every revision, by subject from the bucket's stream. A KV
// delete or purge would leave a marker per key for good (the bucket has
// no marker TTL): a day table's name holds its revision, so a marker per
// superseded or pruned table, 24 a day at eight partitions, grew the
// bucket with the history (879 of its 952 subjects after 30 days of
// bench soak). Readers of a purged key see it gone either way.
func (f *Fleet) purgeKeys(ctx context.Context, key string) error {
	return f.kvStream.Purge(ctx, jetstream.WithPurgeSubject(kvSubjects+key))
}

// resolvePointer learns whether the pointer update whose reply was lost
// (h.tried) was applied: if the pointer names h.tried it was, and the
// state descends from that revision now; if the pointer is still at h.rev
// it was not; otherwise another worker moved it (errLost). Until it can
// read the pointer it returns an error and nothing is written.
func (h *partHandler) resolvePointer(ctx context.Context) error {
	entry, err := h.f.kv.Get(ctx, partitionKey(h.p))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if h.rev != 0 {
			return errLost
		}
		h.tried = nil
		return nil
	case err != nil:
		return fmt.Errorf("partition %d pointer: %w", h.p, err)
	}
	if entry.Revision() == h.rev {
		h.tried = nil
		return nil
	}
	var ptr partPointer
	if json.Unmarshal(entry.Value(), &ptr) == nil && ptr.Writer == h.f.opts.Instance &&
		slices.Equal(append([]blobRef{ptr.Snapshot, ptr.Aggregate}, ptr.Deltas...), h.tried) {
		// Which snapshot the next delta follows is not known: a base.
		h.published(ctx, entry.Revision(), h.tried)
		h.tried, h.needBase = nil, true
		return nil
	}
	return errLost
}

// setBase records that the partition's pointer is at rev, naming blobs,
// and that the state descends from it.
func (h *partHandler) setBase(ctx context.Context, rev uint64, blobs []blobRef) {
	h.rev, h.blobs, h.lastSnap = rev, blobs, time.Now()
	h.f.storeMu.Lock()
	err := h.f.st.SetPartitionBase(ctx, h.p, rev)
	h.f.storeMu.Unlock()
	if err != nil {
		// Harmless: the next gain reloads the snapshot instead of the
		// local state.
		h.f.warn.Warn("record snapshot revision", "partition", h.p, "err", err)
	}
}

// unpin releases the partition when it is pinned to this worker, so
// another worker takes it over without waiting out the PinnedTTL.
func (h *partHandler) unpin(ctx context.Context) {
	h.mu.Lock()
	pin := h.pinID
	h.state = nil
	h.mu.Unlock()
	if pin == "" {
		return
	}
	info, err := h.cons.Info(ctx)
	if err != nil {
		return
	}
	for _, g := range info.PriorityGroups {
		if g.Group == partitionGroup && g.PinnedClientID == pin {
			if err := h.f.stream.UnpinConsumer(ctx, PartitionConsumer(h.p), partitionGroup); err != nil {
				h.f.log.Debug("unpin", "partition", h.p, "err", err)
			}
		}
	}
}

// router moves records published to the bare traces subject to their
// partition subjects: a record to its run's (or key's) partition with its
// identity kept (tracemsg.HeaderOrigMsgID, tracemsg.HeaderRouted), a segment reference to
// every partition (each takes its own rows). The routed copies carry
// message ids derived from the bare message's stream sequence, so routing
// again after a crash stores nothing twice.
type router struct{ f *Fleet }

func (r *router) HandleBatch(ctx context.Context, msgs []pull.Msg) []error {
	errs := make([]error, len(msgs))
	s := r.f.opts.Subjects
	for i, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			errs[i] = pull.Transient("route trace record", err)
			continue
		}
		seq := md.Sequence.Stream
		id := tracemsg.MsgID(m.Headers())
		targets, rerr := routeTargets(m.Data(), id, s.PartitionCount())
		if rerr != nil {
			errs[i] = pull.Permanent(rerr.reason, fmt.Errorf("stream seq %d: %w", seq, rerr.err))
			continue
		}
		for _, p := range targets {
			out := nats.NewMsg(streams.TraceSubject(s.Traces, p))
			out.Data = m.Data()
			out.Header.Set(tracemsg.HeaderRouted, "1")
			if id != "" {
				out.Header.Set(tracemsg.HeaderOrigMsgID, id)
			}
			if name := m.Headers().Get(tracemsg.HeaderSegment); name != "" {
				out.Header.Set(tracemsg.HeaderSegment, name)
			}
			if _, err := producer.Store(ctx, r.f.js, out, fmt.Sprintf("route:%d:%d", seq, p)); err != nil {
				errs[i] = pull.Transient("route trace record", err)
				break
			}
		}
	}
	return errs
}

// routeError is a message the router can never route, with its reason.
type routeError struct {
	reason string
	err    error
}

// routeTargets returns the partitions of the n a message on the bare traces
// subject goes to: a row batch to the partition it was cut for, a record
// to its run's (or key's), a segment reference to every partition (each
// takes its own rows).
func routeTargets(data []byte, id string, n int) ([]int, *routeError) {
	if rowbatch.IsBatch(data) {
		var b rowbatch.Batch
		if err := rowbatch.Decode(data, &b); err != nil {
			return nil, &routeError{"malformed row batch", err}
		}
		if b.Parts != n {
			return nil, &routeError{"row batch for another partition count", fmt.Errorf("cut for %d partitions, the worker uses %d", b.Parts, n)}
		}
		return []int{b.Part}, nil
	}
	rec, err := tracemsg.DecodeCallRecord(data)
	if err != nil {
		return nil, &routeError{"malformed trace record", err}
	}
	if rec.Segment != "" {
		all := make([]int, n)
		for p := range all {
			all[p] = p
		}
		return all, nil
	}
	if _, err := rec.Call(); err != nil {
		return nil, &routeError{"invalid trace record", err}
	}
	p, err := tracemsg.RecordPartition(&rec, id, n)
	if err != nil {
		return nil, &routeError{"invalid trace record", err}
	}
	return []int{p}, nil
}

// fetchDays reads the tables of s's folded days that want takes (each
// checked against its reference: partition, day, revision) by day; with
// keys, each table's dedupe keys are added to s (a takeover needs them, a
// report does not). A table replaced or removed meanwhile fails with
// errBlobChanged (read the pointer again).
func fetchDays(ctx context.Context, kv jetstream.KeyValue, s *partState, want dayWindow, keys bool) (map[int32][]byte, error) {
	tables := make(map[int32][]byte, len(s.folded))
	for _, d := range slices.Sorted(maps.Keys(s.folded)) {
		if !want.has(d) {
			continue
		}
		ref := s.folded[d]
		b, err := getBlob(ctx, kv, ref.blob)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = fmt.Errorf("%w: %w", errBlobChanged, err)
		}
		if err != nil {
			return nil, fmt.Errorf("partition %d day %s: %w", s.part, dayString(d), err)
		}
		part, day, rev, k, err := dayTableKeys(b)
		if err != nil {
			return nil, fmt.Errorf("partition %d day %s: %w", s.part, dayString(d), err)
		}
		if part != s.part || day != d || rev != ref.rev {
			return nil, fmt.Errorf("partition %d day %s: the bucket holds partition %d day %s revision %d, want revision %d",
				s.part, dayString(d), part, dayString(day), rev, ref.rev)
		}
		if keys {
			s.addFoldedKeysOf(k)
		}
		tables[d] = b
	}
	return tables, nil
}
