package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/store"
)

// runAgg is the reduction state of one run (or one independent call): what
// outcome's cost-per-outcome and SLO reports need of it, exactly. The
// outcome and agent kept are the non-empty ones with the highest (step,
// order), order being the call's place in the records' own order (see
// callOrder), so the state is a function of the set of calls applied, never
// of the order they arrived in.
type runAgg struct {
	calls, blocked, refused uint64
	cost                    int64 // micro-USD of non-blocked calls
	lastTS                  int64 // newest ts_millis
	outcome, agent          string
	outStep, agentStep      uint32
	outOrder, agentOrder    callOrder
	gen                     uint32 // partState.gen of its last undo entry; not encoded
}

// callOrder is a call's place in the records' own order, the tie-break of
// "last outcome by step" between calls of a run at the same step. It is
// compared word by word. A segment row's order is its segment's place in
// a directory (the file name's nanos, sequence and pid, as segment.List
// sorts them) and its row, so that any split of a directory into
// replays gives the order a sequential reduction of the whole directory
// reads them in; see segmentOrder and recordOrder.
type callOrder [4]uint64

// Compare returns -1, 0 or +1 as o sorts before, with or after p.
func (o callOrder) Compare(p callOrder) int {
	for i := range o {
		if o[i] != p[i] {
			if o[i] < p[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// segmentOrder is the order of row of the segment file named base (its
// content digest breaking ties between files whose names do not parse as
// TokenFuse segment names).
func segmentOrder(base, digest string, row uint64) callOrder {
	if pid, nanos, seq, ok := segment.ParseName(base); ok {
		return callOrder{nanos, seq, pid, row}
	}
	sum := sha256.Sum256([]byte(digest))
	return callOrder{0, binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16]), row}
}

// recordOrder is the order of a per-call record that is not a segment row
// (NDJSON from the tail forwarder or another publisher): its ts_millis as
// nanoseconds (placing it among segments by time), then its dedupe key.
func recordOrder(tsMillis int64, key string) callOrder {
	ns := uint64(0)
	if tsMillis > 0 {
		ns = uint64(min(tsMillis, math.MaxInt64/1_000_000)) * 1_000_000
	}
	sum := sha256.Sum256([]byte(key))
	return callOrder{ns, binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16]), 0}
}

// later reports whether (step, order) comes after (s2, o2).
func later(step uint32, order callOrder, s2 uint32, o2 callOrder) bool {
	return step > s2 || step == s2 && order.Compare(o2) >= 0
}

// add folds one call in; it fails, changing nothing, when the run's cost
// would overflow.
func (a *runAgg) add(c *calls.Call, order callOrder) error {
	cls := calls.Classify(c.Decision)
	cost := a.cost
	if cls != calls.ClassBlocked {
		var ok bool
		if cost, ok = addInt64(a.cost, c.CostMicroUSD); !ok {
			return fmt.Errorf("run %q: field cost_microusd %d: %w", c.RunID, c.CostMicroUSD, errOverflow)
		}
	}
	a.cost = cost
	a.calls++
	switch cls {
	case calls.ClassBlocked:
		a.blocked++
		a.refused++
	case calls.ClassWardryx:
		a.refused++
	}
	step := c.Step
	if !c.HasStep {
		step = 0
	}
	if c.Outcome != "" && (a.outcome == "" || later(step, order, a.outStep, a.outOrder)) {
		a.outcome, a.outStep, a.outOrder = c.Outcome, step, order
	}
	if c.AgentID != "" && (a.agent == "" || later(step, order, a.agentStep, a.agentOrder)) {
		a.agent, a.agentStep, a.agentOrder = c.AgentID, step, order
	}
	if c.TSMillis > a.lastTS || a.calls == 1 {
		a.lastTS = c.TSMillis
	}
	return nil
}

// An encoded runAgg starts with runAggMarker (a state of the first format
// starts with its call count, never 0) and runAggVersion.
const (
	runAggMarker  byte = 0
	runAggVersion byte = 2
)

func (a *runAgg) encode(b []byte) []byte {
	b = append(b, runAggMarker, runAggVersion)
	b = binary.AppendUvarint(b, a.calls)
	b = binary.AppendUvarint(b, a.blocked)
	b = binary.AppendUvarint(b, a.refused)
	b = binary.AppendVarint(b, a.cost)
	b = binary.AppendVarint(b, a.lastTS)
	b = appendString(b, a.outcome)
	b = binary.AppendUvarint(b, uint64(a.outStep))
	b = appendOrder(b, a.outOrder)
	b = appendString(b, a.agent)
	b = binary.AppendUvarint(b, uint64(a.agentStep))
	return appendOrder(b, a.agentOrder)
}

func appendOrder(b []byte, o callOrder) []byte {
	for _, w := range o {
		b = binary.AppendUvarint(b, w)
	}
	return b
}

func (d *decoder) order() callOrder {
	var o callOrder
	for i := range o {
		o[i] = d.uvarint()
	}
	return o
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads what the encoders above wrote; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated or malformed varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated or malformed varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("a length of %d past the end", n)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 && d.err == nil {
		d.err = fmt.Errorf("%d overflows uint32", v)
	}
	return uint32(v)
}

func decodeRunAgg(b []byte) (runAgg, error) {
	d := decoder{b: b}
	// The first format (no marker) kept a one-word, arrival-based order:
	// it is read as the lowest orders of its step (replay the directory
	// to give such a run its records' own order).
	v2 := len(b) >= 2 && b[0] == runAggMarker
	if v2 {
		if b[1] != runAggVersion {
			return runAgg{}, fmt.Errorf("run state: format version %d, want %d", b[1], runAggVersion)
		}
		d.b = b[2:]
	}
	readOrder := func() callOrder {
		if v2 {
			return d.order()
		}
		return callOrder{0, 0, 0, d.uvarint()}
	}
	var a runAgg
	a.calls, a.blocked, a.refused = d.uvarint(), d.uvarint(), d.uvarint()
	a.cost, a.lastTS = d.varint(), d.varint()
	a.outcome = string(d.bytes())
	a.outStep, a.outOrder = d.uint32(), readOrder()
	a.agent = string(d.bytes())
	a.agentStep, a.agentOrder = d.uint32(), readOrder()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err == nil && (a.blocked > a.refused || a.refused > a.calls) {
		d.err = errors.New("inconsistent call counts")
	}
	if d.err != nil {
		return runAgg{}, fmt.Errorf("run state: %w", d.err)
	}
	return a, nil
}

// Run names in partition state: a run by its id, an independent call (a
// record without run_id, a run of one call) by its dedupe key.
const (
	runPrefix   = 'r'
	independent = 'i'
	// segmentRows names a segment's row set (see rowSet) among the runs
	// of a store written by a build that kept a row per run.
	segmentRows = 's'
)

// partState is one partition's reduction state: every run's aggregate, the
// dedupe keys of the calls applied, the untagged independent calls dropped
// (they count as calls in the report's stats) and the highest stream
// sequence applied. Not safe for concurrent use.
type partState struct {
	part, parts int
	lastSeq     uint64
	dropped     uint64
	runs        map[string]*runAgg
	keys        map[store.Key]struct{}
	// keyLog holds the committed keys of keys, KeySize bytes each, in the
	// order they were committed: a snapshot copies it as is instead of
	// collecting and sorting the key set each time.
	keyLog []byte
	// segs holds, per segment content digest, the rows of the segment
	// applied to the partition (batches and segment references).
	segs map[[32]byte]rowSet
	// rowKeys is set when keys may hold per-row segment keys (a row
	// published as its own record, or a state written before row sets):
	// a batch then also checks each row's key.
	rowKeys bool
	// names interns the outcomes and agents runs keep.
	names map[string]string

	// The message being applied: its undo log. gen counts messages (see
	// mark): a run saves its state to the undo log on its first change in
	// a message (runAgg.gen), so the log grows with the runs a message
	// touches, not with its calls.
	undo []undoEntry
	gen  uint32
	// The keys applied since the last commit (kept in keyLog once
	// committed), and whether anything changed at all.
	newKeys []store.Key
	changed bool
}

type undoEntry struct {
	run     string
	prev    runAgg
	had     bool
	key     store.Key
	hasKey  bool
	dropped bool
	seg     *[32]byte
	segPrev rowSet
}

func newPartState(part, parts int) *partState {
	return &partState{part: part, parts: parts, runs: map[string]*runAgg{}, keys: map[store.Key]struct{}{}, segs: map[[32]byte]rowSet{}}
}

// hashKey is the stored form of a dedupe key: 128 bits of its SHA-256.
func hashKey(key string) store.Key {
	sum := sha256.Sum256([]byte(key))
	return store.Key(sum[:store.KeySize])
}

// segmentDoneKey marks, in a partition's keys, a segment whose rows of the
// partition were all applied.
func segmentDoneKey(digest string) store.Key { return hashKey("segdone:" + digest) }

// loadKey adds a key of a loaded state (a snapshot, the store) to the
// committed keys.
func (s *partState) loadKey(k store.Key) {
	if _, ok := s.keys[k]; ok {
		return
	}
	s.keys[k] = struct{}{}
	s.keyLog = append(s.keyLog, k[:]...)
}

// has reports whether a key was applied.
func (s *partState) has(k store.Key) bool { _, ok := s.keys[k]; return ok }

// begin starts a message: what the messages before it changed is kept
// (to commit), and rollback undoes only the new message.
func (s *partState) begin() {
	s.keep()
	s.gen++
}

// keep moves the undo log's keys into what the next commit keeps.
func (s *partState) keep() {
	for _, u := range s.undo {
		s.changed = true
		if u.hasKey {
			s.newKeys = append(s.newKeys, u.key)
		}
	}
	clear(s.undo)
	s.undo = s.undo[:0]
}

// apply folds one call identified by key (already checked new) with its
// order and records the key; an error (a cost overflow) changes nothing.
func (s *partState) apply(key store.Key, c *calls.Call, order callOrder) error {
	var name []byte
	if c.HasRunID {
		name = append(append(make([]byte, 0, 1+len(c.RunID)), runPrefix), c.RunID...)
	} else {
		name = append([]byte{independent}, key[:]...)
	}
	if err := s.fold(name, c, order); err != nil {
		return err
	}
	s.keys[key] = struct{}{}
	s.undo = append(s.undo, undoEntry{key: key, hasKey: true})
	return nil
}

// fold folds c into the run called name (runPrefix and the run id, or
// independent and the call's key), or counts an untagged independent call
// as dropped; an error (a cost overflow) changes nothing. name is not
// retained.
func (s *partState) fold(name []byte, c *calls.Call, order callOrder) error {
	if name[0] == independent && c.Outcome == "" {
		s.undo = append(s.undo, undoEntry{dropped: true})
		s.dropped++
		return nil
	}
	// A run keeps its outcome and agent: interned, so that it does not
	// keep the message they were decoded from alive.
	if c.Outcome != "" {
		c.Outcome = s.intern(c.Outcome)
	}
	if c.AgentID != "" {
		c.AgentID = s.intern(c.AgentID)
	}
	a, had := s.runs[string(name)]
	if !had {
		a = &runAgg{}
		if err := a.add(c, order); err != nil {
			return err
		}
		a.gen = s.gen
		n := string(name)
		s.runs[n] = a
		s.undo = append(s.undo, undoEntry{run: n})
		return nil
	}
	if a.gen == s.gen { // saved already: rollback restores it
		return a.add(c, order)
	}
	s.undo = append(s.undo, undoEntry{run: string(name), prev: *a, had: true})
	if err := a.add(c, order); err != nil {
		s.undo = s.undo[:len(s.undo)-1]
		return err
	}
	a.gen = s.gen
	return nil
}

// intern returns the partition's copy of v.
func (s *partState) intern(v string) string {
	if w, ok := s.names[v]; ok {
		return w
	}
	if s.names == nil {
		s.names = map[string]string{}
	}
	w := strings.Clone(v)
	s.names[w] = w
	return w
}

// addRows records rows [lo, hi] of the segment with this digest as applied.
func (s *partState) addRows(digest [32]byte, lo, hi uint64) {
	prev, had := s.segs[digest]
	s.segs[digest] = prev.add(lo, hi)
	d := digest
	if !had {
		prev = nil
	}
	s.undo = append(s.undo, undoEntry{seg: &d, segPrev: prev})
}

// rollback undoes everything applied since begin.
func (s *partState) rollback() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		u := s.undo[i]
		if u.hasKey {
			delete(s.keys, u.key)
		}
		switch {
		case u.seg != nil:
			if u.segPrev == nil {
				delete(s.segs, *u.seg)
			} else {
				s.segs[*u.seg] = u.segPrev
			}
		case u.dropped:
			s.dropped--
		case u.run == "":
		case u.had:
			*s.runs[u.run] = u.prev
		default:
			delete(s.runs, u.run)
		}
	}
	s.undo = s.undo[:0]
}

// loadStored adds a run state (or a segment's row set) read from the store.
func (s *partState) loadStored(name, state []byte) error {
	if len(name) == 1+32 && name[0] == segmentRows {
		r, err := decodeRowSet(state)
		if err != nil {
			return fmt.Errorf("partition %d segment %x: %w", s.part, name[1:], err)
		}
		s.segs[[32]byte(name[1:])] = r
		return nil
	}
	a, err := decodeRunAgg(state)
	if err != nil {
		return fmt.Errorf("partition %d run %q: %w", s.part, name, err)
	}
	s.runs[string(name)] = &a
	return nil
}

// changedSince reports whether anything was applied since the last commit
// (or settle), or the sequence moved from before.
func (s *partState) changedSince(before uint64) bool {
	s.keep()
	return s.changed || s.lastSeq != before
}

// settle ends what was applied since the last settle: committed appends
// its keys to the key log (a snapshot encodes the log); otherwise the
// state no longer matches the store and the caller must drop it.
func (s *partState) settle(committed bool) {
	s.keep()
	if committed {
		for _, k := range s.newKeys {
			s.keyLog = append(s.keyLog, k[:]...)
		}
	}
	s.newKeys, s.changed = s.newKeys[:0], false
}

// stateRun is the name under which the store holds a partition's whole
// state (its snapshot encoding) as one run; a store written before that
// holds a row per run and its keys (see readStoredPartition).
var stateRun = []byte{0}

// stored returns the commit that stores the state, snap its snapshot
// encoding, in the worker's store: one row, however many runs.
func (s *partState) stored(baseRev uint64, snap []byte) store.PartitionCommit {
	return store.PartitionCommit{Head: store.PartitionMeta{LastSeq: s.lastSeq, BaseRev: baseRev, Meta: s.meta()},
		Runs: []store.RunState{{Run: stateRun, State: snap}}}
}

// readStoredPartition reads partition p's state from the store, of either
// form: one state row, or (an older store) a row per run and its keys.
func readStoredPartition(ctx context.Context, st *store.Store, p int, head store.PartitionMeta) (*partState, error) {
	d := decoder{b: head.Meta}
	n := int(d.uvarint())
	if d.err != nil {
		return nil, fmt.Errorf("partition %d meta: %w", p, d.err)
	}
	s := newPartState(p, n)
	if err := s.setMeta(head.Meta); err != nil {
		return nil, err
	}
	s.lastSeq = head.LastSeq
	var whole *partState
	if err := st.EachPartitionRun(ctx, p, func(run, state []byte) error {
		if bytes.Equal(run, stateRun) {
			w, err := decodePartState(state)
			if err != nil {
				return fmt.Errorf("partition %d stored state: %w", p, err)
			}
			whole = w
			return nil
		}
		return s.loadStored(run, state)
	}); err != nil {
		return nil, err
	}
	if whole != nil {
		if whole.part != p {
			return nil, fmt.Errorf("partition %d stored state holds partition %d", p, whole.part)
		}
		whole.lastSeq = head.LastSeq
		return whole, nil
	}
	if err := st.EachPartitionKey(ctx, p, s.loadKey); err != nil {
		return nil, err
	}
	return s, nil
}

// meta is the partition's head metadata: partitions, dropped calls, and
// flags (bit 0: rowKeys). A head without flags (written before row sets)
// reads as rowKeys.
func (s *partState) meta() []byte {
	b := binary.AppendUvarint(nil, uint64(s.parts))
	b = binary.AppendUvarint(b, s.dropped)
	flags := uint64(0)
	if s.rowKeys {
		flags |= 1
	}
	return binary.AppendUvarint(b, flags)
}

func (s *partState) setMeta(b []byte) error {
	d := decoder{b: b}
	parts, dropped := d.uvarint(), d.uvarint()
	flags := uint64(1)
	if d.err == nil && len(d.b) > 0 {
		flags = d.uvarint()
	}
	if d.err != nil {
		return fmt.Errorf("partition %d meta: %w", s.part, d.err)
	}
	if int(parts) != s.parts {
		return fmt.Errorf("partition %d was written with %d partitions, this worker uses %d (--partitions)", s.part, parts, s.parts)
	}
	s.dropped, s.rowKeys = dropped, flags&1 != 0
	return nil
}

// Snapshot and aggregate encoding (the blobs of the verdryx-partitions
// bucket): magic, partition, partition count, last applied stream
// sequence, dropped calls, flags, the run states sorted by name, then
// (snapshots only) the segment row sets sorted by digest and the dedupe
// keys in the order they were committed (an aggregate has no row sets and
// a key count of 0). Varints throughout, strings length-prefixed. The
// first format (snapMagicV1) had no flags and no row sets.
var (
	snapMagic   = []byte("VDXPART2")
	snapMagicV1 = []byte("VDXPART1")
)

// encodeBoth encodes the snapshot and the aggregate in one pass over the
// run states, into buf (reused when large enough): both share everything
// up to the row sets. The results alias the returned buffer.
func (s *partState) encodeBoth(buf []byte) (snap, agg, out []byte) {
	b := append(buf[:0], snapMagic...)
	b = binary.AppendUvarint(b, uint64(s.part))
	b = binary.AppendUvarint(b, uint64(s.parts))
	b = binary.AppendUvarint(b, s.lastSeq)
	b = binary.AppendUvarint(b, s.dropped)
	flags := uint64(0)
	if s.rowKeys {
		flags |= 1
	}
	b = binary.AppendUvarint(b, flags)
	names := slices.Sorted(maps.Keys(s.runs))
	b = binary.AppendUvarint(b, uint64(len(names)))
	var tmp []byte
	for _, n := range names {
		b = appendString(b, n)
		tmp = s.runs[n].encode(tmp[:0])
		b = binary.AppendUvarint(b, uint64(len(tmp)))
		b = append(b, tmp...)
	}
	common := len(b)
	digests := slices.SortedFunc(maps.Keys(s.segs), func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	b = binary.AppendUvarint(b, uint64(len(digests)))
	for _, d := range digests {
		b = append(b, d[:]...)
		tmp = s.segs[d].encode(tmp[:0])
		b = binary.AppendUvarint(b, uint64(len(tmp)))
		b = append(b, tmp...)
	}
	nk := len(s.keyLog) / store.KeySize
	// The snapshot, then a copy of the shared prefix and the aggregate's
	// empty row sets and key list after it, in the same buffer.
	b = binary.AppendUvarint(b, uint64(nk))
	b = append(b, s.keyLog...)
	snapEnd := len(b)
	b = append(b, b[:common]...)
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, 0)
	return b[:snapEnd:snapEnd], b[snapEnd:], b
}

// decodePartState reads an encoded snapshot or aggregate, of either format.
func decodePartState(b []byte) (*partState, error) {
	v1 := bytes.HasPrefix(b, snapMagicV1)
	if !v1 && !bytes.HasPrefix(b, snapMagic) {
		return nil, errors.New("partition snapshot: bad magic")
	}
	d := decoder{b: b[len(snapMagic):]}
	part, parts := d.uvarint(), d.uvarint()
	if d.err == nil && (parts == 0 || parts > 1<<16 || part >= parts) {
		d.err = fmt.Errorf("partition %d of %d", part, parts)
	}
	if d.err != nil {
		return nil, fmt.Errorf("partition snapshot: %w", d.err)
	}
	s := newPartState(int(part), int(parts))
	s.lastSeq, s.dropped = d.uvarint(), d.uvarint()
	s.rowKeys = true
	if !v1 {
		s.rowKeys = d.uvarint()&1 != 0
	}
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		name := string(d.bytes())
		st := d.bytes()
		if d.err != nil {
			break
		}
		a, err := decodeRunAgg(st)
		if err != nil {
			return nil, fmt.Errorf("partition %d snapshot: %w", part, err)
		}
		s.runs[name] = &a
	}
	if !v1 {
		ns := d.uvarint()
		for i := uint64(0); i < ns && d.err == nil; i++ {
			if len(d.b) < 32 {
				d.err = errors.New("truncated segment digest")
				break
			}
			digest := [32]byte(d.b[:32])
			d.b = d.b[32:]
			st := d.bytes()
			if d.err != nil {
				break
			}
			r, err := decodeRowSet(st)
			if err != nil {
				return nil, fmt.Errorf("partition %d snapshot: %w", part, err)
			}
			s.segs[digest] = r
		}
	}
	nk := d.uvarint()
	if d.err == nil && nk*store.KeySize != uint64(len(d.b)) {
		d.err = fmt.Errorf("%d keys in %d bytes", nk, len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("partition %d snapshot: %w", part, d.err)
	}
	s.keyLog = make([]byte, 0, len(d.b))
	for i := uint64(0); i < nk; i++ {
		s.loadKey(store.Key(d.b[i*store.KeySize : (i+1)*store.KeySize]))
	}
	return s, nil
}

// Aggregate is the union of partition states: every run is in exactly one
// partition, so the union is the whole fleet's reduction state.
type Aggregate struct {
	parts map[int]*partState
}

// Partitions returns the partitions the aggregate holds, ascending.
func (g *Aggregate) Partitions() []int { return slices.Sorted(maps.Keys(g.parts)) }

// Calls returns how many calls the aggregate holds (dropped untagged
// independent calls included).
func (g *Aggregate) Calls() int64 {
	var n uint64
	for _, s := range g.parts {
		n += s.dropped
		for _, a := range s.runs {
			n += a.calls
		}
	}
	return int64(n)
}

// Runs returns each run's call count (independent calls not included).
func (g *Aggregate) Runs() map[string]uint64 {
	out := map[string]uint64{}
	for _, s := range g.parts {
		for name, a := range s.runs {
			if name[0] == runPrefix {
				out[name[1:]] += a.calls
			}
		}
	}
	return out
}

// Reducer returns an outcome.Reducer holding exactly the aggregate's
// runs: each run is folded in as calls that reproduce its state (its call,
// blocked and refused counts, its cost on one non-blocked call, its
// outcome, agent and newest ts), so the reducer's reports equal those of
// reducing the original calls. Cost is O(calls).
func (g *Aggregate) Reducer(opts outcome.Options) (*outcome.Reducer, error) {
	r, err := outcome.NewReducer(opts)
	if err != nil {
		return nil, err
	}
	for _, p := range g.Partitions() {
		s := g.parts[p]
		for _, name := range slices.Sorted(maps.Keys(s.runs)) {
			feedRun(r, name, s.runs[name])
		}
		for range s.dropped {
			r.Add(calls.Call{Decision: "allow"})
		}
	}
	return r, nil
}

// feedRun adds calls to r reproducing run state a.
func feedRun(r *outcome.Reducer, name string, a *runAgg) {
	base := calls.Call{TSMillis: a.lastTS, HasStep: true}
	if name[0] == runPrefix {
		base.RunID, base.HasRunID = name[1:], true
	}
	blocked, wardryx, allowed := a.blocked, a.refused-a.blocked, a.calls-a.refused
	carrier := base
	carrier.Outcome, carrier.AgentID, carrier.CostMicroUSD = a.outcome, a.agent, a.cost
	switch {
	case allowed > 0:
		carrier.Decision = "allow"
		allowed--
	case wardryx > 0:
		carrier.Decision = "wardryx_deny"
		wardryx--
	default:
		carrier.Decision = "budget_exceeded" // cost is 0: blocked calls are not costed
		blocked--
	}
	r.Add(carrier)
	for _, k := range []struct {
		n   uint64
		dec string
	}{{blocked, "budget_exceeded"}, {wardryx, "wardryx_deny"}, {allowed, "allow"}} {
		c := base
		c.Decision = k.dec
		for range k.n {
			r.Add(c)
		}
	}
}

// errOverflow marks a record whose cost or tokens would overflow the
// stored totals.
var errOverflow = errors.New("sum overflows int64")

// addInt64 returns a+b and whether it did not overflow.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}
