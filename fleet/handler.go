package fleet

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/redact"
	"github.com/verdryx/verdryx/tracemsg"
)

// partHandler is one partition's consumer side.
type partHandler struct {
	f       *Fleet
	p       int
	cons    jetstream.Consumer
	subject string

	mu     sync.Mutex
	state  *partstate.State // nil: not held (load on the next batch)
	rev    uint64           // KV revision the state descends from
	blobs  []blobRef        // what the pointer at rev names
	aggs   [2]blobRef       // the aggregate last written apart into each slot, until deleted
	held   []pull.Msg       // records committed, waiting for the snapshot to be acked
	top    pull.Msg         // the newest of held (by stream sequence): the one acked
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
	// the delta baseDue weighed last; deltaSlot is the slot of the delta
	// last written (see writeDelta).
	needBase                              bool
	baseUnits, chainUnits, lastDeltaUnits int
	deltaSlot                             int
	pinID                                 string
	lastBatch                             time.Time
	// backlog: the last batch's consumer had more pending after it.
	backlog bool
	// burst: a batch had a backlog since the last snapshot that saw
	// none (Options.Freed is called at that snapshot).
	burst bool
	// pending holds the encoded tables of folded days not yet put in the
	// bucket, by day.
	pending map[int32][]byte
	buf     []byte         // snapshot encoding buffer, reused
	batch   rowbatch.Batch // row batch decoding buffers, reused
	name    []byte         // run name buffer, reused
}

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
// (a dead-letter copy that could not be published, a panic)
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
	before := s.LastSeq
	var poison []int
	for i, m := range msgs {
		s.Begin()
		if err := h.applySafe(s, m, seqs[i]); err != nil {
			s.Rollback()
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
	// Copy the poison records before anything is snapshotted, as the
	// catch-up does: the next snapshot holds the batch's newest sequence
	// as the partition's, so a copy failing after it would leave a reload
	// to catch up past the record, and the next ack would ack it
	// uncopied. A copy made again after a reload is dropped by its
	// dead-letter id.
	for _, i := range poison {
		if err := h.deadLetter(ctx, msgs[i], errs[i]); err != nil {
			return fail("dead-letter on partition", err)
		}
	}
	if s.ChangedSince(before) {
		h.dirty = true
	}
	for i, m := range msgs {
		errs[i] = pull.ErrDeferred
		h.hold(m, seqs[i])
	}
	h.heldDead += len(poison)
	h.lastDseq = dseqs[len(dseqs)-1]
	// Snapshot when snapshotDue: a snapshot is written whole, so its
	// cost grows with the partition. When records stop coming, the
	// ticker's idle rule (see flush) acks what waits.
	if time.Since(h.lastSnap) >= h.snapshotDue() {
		h.flushLocked(ctx)
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
	h.f.log.Debug("partition deliveries skipped a sequence: catching up", "partition", h.p, "last_seq", h.state.LastSeq)
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
func (h *partHandler) applySafe(s *partstate.State, m pull.Msg, seq uint64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = pull.Permanent("handler panic", fmt.Errorf("stream seq %d: %v", seq, r))
		}
	}()
	s.HoursOn, s.HoursFrom = h.f.hoursFrom()
	return h.apply(s, m, seq)
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

// apply folds one message into s: a row batch or a record's call. A
// message at or below the state's sequence is already in it (redelivered);
// rows and calls already applied (in a segment's row set, or with a dedupe
// key applied) are skipped. Errors are classified for the pull loop.
func (h *partHandler) apply(s *partstate.State, m pull.Msg, seq uint64) error {
	if seq != 0 && seq <= s.LastSeq {
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
		var rec calls.Record
		if derr := calls.DecodeRecord(data, &rec); derr != nil {
			return pull.Permanent("malformed trace record", fmt.Errorf("stream seq %d: %w", seq, derr))
		}
		err = h.applyRecord(s, &rec, m.Headers(), seq)
	}
	if err == nil && seq > s.LastSeq {
		s.LastSeq = seq
	}
	return err
}

// applyBatch applies a row batch as one unit: every row of it that the
// partition has not applied yet, or (an error) none.
func (h *partHandler) applyBatch(s *partstate.State, data []byte, seq uint64) error {
	b := &h.batch
	// The batch's strings but run ids come interned (fold keeps outcomes
	// and agents): once per distinct string, not per row.
	b.Intern = s.Intern
	err := rowbatch.Decode(data, b)
	b.Intern = nil
	if err != nil {
		return pull.Permanent("malformed row batch", fmt.Errorf("stream seq %d: %w", seq, err))
	}
	if b.Parts != s.Parts || b.Part != h.p {
		return pull.Permanent("row batch on the wrong partition",
			fmt.Errorf("stream seq %d: rows of partition %d of %d published to %s (this worker uses %d partitions)", seq, b.Part, b.Parts, h.subject, s.Parts))
	}
	lo, hi := b.Rows[0], b.Rows[len(b.Rows)-1]
	done := s.Segs[b.Digest]
	digest := hex.EncodeToString(b.Digest[:])
	if done.Covers(lo, hi) {
		return nil
	}
	order := partstate.SegmentOrder(b.Segment, digest, 0)
	for i := range b.Calls {
		c, row := &b.Calls[i], b.Rows[i]
		if err := calls.CheckCostMicroUSD(c.CostMicroUSD); err != nil {
			return pull.Permanent("invalid row batch", fmt.Errorf("stream seq %d: segment %s row %d: %w", seq, b.Segment, row, err))
		}
		var key tracemsg.Key
		name := h.name[:0]
		if c.HasRunID {
			if p := tracemsg.PartitionOf(c.RunID, s.Parts); p != h.p {
				return pull.Permanent("row batch on the wrong partition", fmt.Errorf("stream seq %d: segment %s row %d: run %q is in partition %d", seq, b.Segment, row, c.RunID, p))
			}
			name = append(append(name, partstate.RunPrefix), c.RunID...)
		} else {
			k := tracemsg.RowKey(digest, row)
			if p := tracemsg.PartitionOf(k, s.Parts); p != h.p {
				return pull.Permanent("row batch on the wrong partition", fmt.Errorf("stream seq %d: segment %s row %d is in partition %d", seq, b.Segment, row, p))
			}
			key = tracemsg.HashKey(k)
			name = append(append(name, partstate.Independent), key[:]...)
		}
		h.name = name
		if len(done) > 0 && done.Has(row) {
			continue
		}
		order[3] = row
		if _, err := s.FoldCall(name, c, order, true); err != nil {
			return pull.Permanent("cost sum overflow", fmt.Errorf("stream seq %d: segment %s row %d: %w", seq, b.Segment, row, err))
		}
		if h.f.opts.afterFold != nil {
			h.f.opts.afterFold(*c)
		}
	}
	s.AddRows(b.Digest, lo, hi)
	return nil
}

// applyRecord folds one per-call record message into s, once: its key
// (tracemsg.RecordKey: call_id, else the message id, else its digest)
// must route to this partition and is kept in s, so a redelivery or a
// republish of the same call changes nothing.
func (h *partHandler) applyRecord(s *partstate.State, rec *calls.Record, hdr nats.Header, seq uint64) error {
	msgID := tracemsg.MsgID(hdr)
	c := rec.Call()
	key, err := tracemsg.RecordKey(rec, msgID)
	if err != nil {
		return pull.Permanent("invalid trace record", err)
	}
	want := tracemsg.PartitionOf(key, s.Parts)
	if c.HasRunID {
		want = tracemsg.PartitionOf(c.RunID, s.Parts)
	}
	if want != h.p {
		return pull.Permanent("trace record on the wrong partition",
			fmt.Errorf("stream seq %d: belongs to partition %d of %d, published to %s", seq, want, s.Parts, h.subject))
	}
	k := tracemsg.HashKey(key)
	if s.Has(k) {
		return nil
	}
	if err := s.Apply(k, &c, partstate.RecordOrder(c.TSMillis, key)); err != nil {
		return pull.Permanent("cost sum overflow", fmt.Errorf("trace record (stream seq %d): %w", seq, err))
	}
	if h.f.opts.afterFold != nil {
		h.f.opts.afterFold(c)
	}
	return nil
}

// gain loads the partition from its newest snapshot (the pointer's base
// and deltas; a fresh state when it has none), with the keys of its folded
// days, then catches up through everything the consumer delivered, and
// at least through stream sequence upTo (the newest record of the batch
// being handled).
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
		if ptr, err = decodePointer(h.p, entry.Value()); err != nil {
			return err
		}
		if ptr.Partitions != parts {
			return fmt.Errorf("partition %d was published with %d partitions, this worker uses %d (Subjects.Partitions)", h.p, ptr.Partitions, parts)
		}
	}
	s := partstate.NewState(h.p, parts)
	if rev != 0 {
		b, err := getBlob(ctx, h.f.kv, ptr.Snapshot)
		if err != nil {
			return fmt.Errorf("partition %d snapshot: %w", h.p, err)
		}
		if s, err = partstate.DecodeState(b); err != nil {
			return err
		}
		if s.Part != h.p || s.Parts != parts {
			return fmt.Errorf("snapshot %s holds partition %d of %d", ptr.Snapshot.Prefix, s.Part, s.Parts)
		}
		if err := applyDeltaBlobs(ctx, h.f.kv, s, ptr.Deltas); err != nil {
			return fmt.Errorf("partition %d snapshot: %w", h.p, err)
		}
		// The folded days' keys come with their tables.
		if _, err := fetchDays(ctx, h.f.kv, s, partstate.AllDays(), true); err != nil {
			return err
		}
		h.f.log.Info("partition loaded from snapshot", "partition", h.p, "revision", rev, "writer", ptr.Writer, "last_seq", s.LastSeq,
			"run_states", s.RunCount(), "folded_days", len(s.Folded), "deltas", len(ptr.Deltas))
	}
	h.state, h.rev, h.blobs, h.tried, h.needBase, h.pending = s, rev, nil, nil, true, nil
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
	if target <= s.LastSeq {
		return nil
	}
	from := s.LastSeq
	oc, err := h.f.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{h.subject},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: s.LastSeq + 1, MaxResetAttempts: 5})
	if err != nil {
		return fmt.Errorf("partition %d catch-up: %w", h.p, err)
	}
	it, err := oc.Messages(jetstream.PullMaxBytes(pullBytes))
	if err != nil {
		return fmt.Errorf("partition %d catch-up: %w", h.p, err)
	}
	defer it.Stop()
	applied := 0
	for s.LastSeq < target {
		before, n := s.LastSeq, 0
		done := false
		var fail error
		for n < h.f.opts.Batch && s.LastSeq < target {
			m, err := it.Next(jetstream.NextMaxWait(5 * time.Second))
			if err != nil {
				fail = fmt.Errorf("partition %d catch-up stopped at stream seq %d of %d: %w", h.p, s.LastSeq, target, err)
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
			s.Begin()
			if err := h.applySafe(s, m, seq); err != nil {
				s.Rollback()
				if derr := h.deadLetter(ctx, m, err); derr != nil {
					fail = fmt.Errorf("partition %d catch-up, stream seq %d: %w", h.p, seq, derr)
					break
				}
				s.LastSeq = max(s.LastSeq, seq)
			}
		}
		if fail != nil {
			s.Settle(false)
			s.LastSeq = before
			return fail
		}
		applied += n
		if done {
			break
		}
	}
	h.f.log.Info("partition caught up", "partition", h.p, "records", applied, "from_seq", from, "last_seq", s.LastSeq)
	return nil
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
