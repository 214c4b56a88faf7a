package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/partstate"
)

// maxDeltas is the most deltas a base is followed by; deltaSlots the
// ring of bucket slots a partition handler writes its deltas into (more
// than maxDeltas: the slot written next is never one a chain names, and
// a handler writes a delta only after a base of its own, so a slot a
// previous process of the instance left named is replaced first).
const (
	maxDeltas  = 16
	deltaSlots = 2 * maxDeltas
)

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
	h.flushLocked(ctx)
}

// flushLocked writes the snapshot when anything waits for it, then acks
// what was held. A snapshot that fails keeps the acks held (the next
// flush tries again); one whose pointer another worker moved drops the
// state and naks them.
func (h *partHandler) flushLocked(ctx context.Context) {
	if h.state == nil || (!h.dirty && len(h.held) == 0 && !h.state.PruneDue(h.f.now(), h.f.opts.Subjects.Retention)) {
		return
	}
	err := h.snapshot(ctx)
	switch {
	case errors.Is(err, errLost):
		h.f.warn.Warn("partition lost", "partition", h.p, "naked", len(h.held))
		h.drop()
		return
	case err != nil:
		// Keep the acks held: the next flush tries again, and what times
		// out is redelivered and deduplicated.
		h.f.warn.Warn("partition snapshot", "partition", h.p, "err", err)
		return
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
	s.Settle(true) // the keys applied join their days' key lists the snapshot copies
	before := map[int32]blobRef{}
	for d, r := range s.Folded {
		before[d] = r.Blob
	}
	now := h.f.now()
	load := func(d int32, ref *partstate.DayRef) (*partstate.DayTable, error) { return h.loadDay(ctx, d, ref) }
	tables, skipped := s.FoldDays(now, h.f.foldAfter(), load)
	keys := func(d int32, ref *partstate.DayRef) ([]byte, error) {
		b, err := h.loadDayBytes(ctx, d, ref)
		if err != nil {
			return nil, err
		}
		_, _, _, kb, err := partstate.DayTableKeys(b)
		return kb, err
	}
	prunedDays, skipped2 := s.PruneDays(now, h.f.opts.Subjects.Retention, keys)
	for _, err := range append(skipped, skipped2...) {
		h.f.warn.Warn("fold partition day", "partition", h.p, "err", err)
	}
	// The tables folded wait in pending until they are in the bucket:
	// the snapshot names them.
	for _, t := range tables {
		if h.pending == nil {
			h.pending = map[int32][]byte{}
		}
		h.pending[t.Day] = t.Encode(nil)
	}
	for _, d := range prunedDays {
		delete(h.pending, d)
	}
	published, err := h.publishDays(ctx)
	if err != nil {
		return err
	}
	gen, base := s.Gen, h.baseDue(s)
	var blobs []blobRef
	if base {
		blobs, err = h.writeBase(ctx, published)
	} else {
		blobs, err = h.writeDelta(ctx, published)
	}
	if err != nil {
		return err
	}
	ptr, _ := json.Marshal(partPointer{Partition: h.p, Partitions: s.Parts, LastSeq: s.LastSeq, Snapshot: blobs[0],
		Aggregate: blobs[1], Deltas: blobs[2:], Writer: h.f.opts.Instance, Runs: s.RunCount(), Keys: len(s.Keys), Written: time.Now().UTC()})
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
	s.Wrote(gen)
	if base {
		runs, keys := s.Size()
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
		if r, ok := s.Folded[d]; old.Prefix != "" && (!ok || r.Blob.Prefix != old.Prefix) {
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
func (h *partHandler) baseDue(s *partstate.State) bool {
	if h.rev == 0 || h.needBase || len(h.blobs) < 2 || len(h.blobs)-2 >= maxDeltas {
		return true
	}
	runs, keys := s.Dirty()
	h.lastDeltaUnits = deltaUnits(runs, keys)
	return h.chainUnits+h.lastDeltaUnits > h.baseUnits/2
}

// writeBase puts the snapshot and (when written apart) the aggregate
// into the slot the pointer does not name. It returns the blobs the
// pointer is to name. published is the bytes of day tables put before.
func (h *partHandler) writeBase(ctx context.Context, published int) ([]blobRef, error) {
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
	snapData, aggData, buf := s.EncodeBoth(h.buf)
	h.buf = buf
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

// writeDelta puts what changed since the last snapshot in the bucket as a
// delta. It returns the blobs the pointer is to name: the base's and its
// deltas with this one. published is the bytes of day tables put before.
func (h *partHandler) writeDelta(ctx context.Context, published int) ([]blobRef, error) {
	data := h.state.EncodeDelta(h.buf)
	h.buf = data
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

// loadDay returns a fresh copy of folded day d's table.
func (h *partHandler) loadDay(ctx context.Context, d int32, ref *partstate.DayRef) (*partstate.DayTable, error) {
	b, err := h.loadDayBytes(ctx, d, ref)
	if err != nil {
		return nil, err
	}
	t, err := partstate.DecodeDayTable(b)
	if err != nil {
		return nil, fmt.Errorf("partition %d day %s: %w", h.p, partstate.DayString(d), err)
	}
	return t, nil
}

// loadDayBytes returns folded day d's encoded table, checked (its
// checksum, and that it is revision ref.rev of this partition's day d):
// the one waiting to be published, else the bucket's.
func (h *partHandler) loadDayBytes(ctx context.Context, d int32, ref *partstate.DayRef) ([]byte, error) {
	b := h.pending[d]
	if b == nil {
		if ref.Blob.Prefix == "" {
			return nil, fmt.Errorf("partition %d day %s: table revision %d neither pending nor published", h.p, partstate.DayString(d), ref.Rev)
		}
		var err error
		if b, err = getBlob(ctx, h.f.kv, ref.Blob); err != nil {
			return nil, fmt.Errorf("partition %d day %s: %w", h.p, partstate.DayString(d), err)
		}
	}
	part, day, rev, _, err := partstate.DayTableKeys(b)
	if err != nil {
		return nil, fmt.Errorf("partition %d day %s: %w", h.p, partstate.DayString(d), err)
	}
	if part != h.p || day != d || rev != ref.Rev {
		return nil, fmt.Errorf("partition %d day %s: the table holds partition %d day %s revision %d, want revision %d",
			h.p, partstate.DayString(d), part, partstate.DayString(day), rev, ref.Rev)
	}
	return b, nil
}

// publishDays puts in the bucket the folded days' tables that wait in
// pending (folded by this snapshot, or by one whose puts failed), and
// records their blobs in the state's references. It returns the bytes put.
func (h *partHandler) publishDays(ctx context.Context) (int, error) {
	s := h.state
	n := 0
	for _, d := range slices.Sorted(maps.Keys(h.pending)) {
		ref := s.Folded[d]
		if ref == nil {
			delete(h.pending, d)
			continue
		}
		data := h.pending[d]
		blob, err := putBlob(ctx, h.f.kv, fmt.Sprintf("%s.%s.%d", dayBlobPrefix(h.p, d), h.f.opts.Instance, ref.Rev), data)
		if err != nil {
			return n, err
		}
		ref.Blob = blob
		delete(h.pending, d)
		n += len(data)
	}
	return n, nil
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
	if ptr, err := decodePointer(h.p, entry.Value()); err == nil && ptr.Writer == h.f.opts.Instance &&
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
}
