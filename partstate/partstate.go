package partstate

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/segname"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/tracemsg"
)

// runAgg is the reduction state of one run (or one independent call):
// outcome's run-fold kernel (outcome.Run), the outcome and agent kept
// being the non-empty ones with the highest (step, order), order being
// the call's place in the records' own order (see Order), so the state is
// a function of the set of calls applied, never of the order they
// arrived in; and gen, State.Gen of its last undo entry (not encoded).
type runAgg struct {
	outcome.Run[uint64, string, Order]
	gen uint64
}

// Order is a call's place in the records' own order, the tie-break of
// "last outcome by step" between calls of a run at the same step. It is
// compared word by word. A segment row's order is its segment's place in
// a directory (the file name's nanos, sequence and pid, as segment.List
// sorts them) and its row, so that any split of a directory into
// replays gives the order a sequential reduction of the whole directory
// reads them in; see SegmentOrder and RecordOrder.
type Order [4]uint64

// SegmentOrder is the order of row of the segment file named base (its
// content digest breaking ties between files whose names do not parse as
// TokenFuse segment names).
func SegmentOrder(base, digest string, row uint64) Order {
	if pid, nanos, seq, ok := segname.Parse(base); ok {
		return Order{nanos, seq, pid, row}
	}
	sum := sha256.Sum256([]byte(digest))
	return Order{0, binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16]), row}
}

// RecordOrder is the order of a per-call record that is not a segment row
// (NDJSON from the tail forwarder or another publisher): its ts_millis as
// nanoseconds (placing it among segments by time), then its dedupe key.
func RecordOrder(tsMillis int64, key string) Order {
	ns := uint64(0)
	if tsMillis > 0 {
		ns = uint64(min(tsMillis, math.MaxInt64/1_000_000)) * 1_000_000
	}
	sum := sha256.Sum256([]byte(key))
	return Order{ns, binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16]), 0}
}

// add folds one call in; it fails, changing nothing, when the run's cost
// would overflow.
func (a *runAgg) add(c *calls.Call, order Order) error {
	step := c.Step
	if !c.HasStep {
		step = 0
	}
	if !a.Add(calls.Classify(c.Decision), c.CostMicroUSD, step, order, c.Outcome, c.AgentID, c.TSMillis) {
		return fmt.Errorf("run %q: field cost_microusd %d: %w", c.RunID, c.CostMicroUSD, errOverflow)
	}
	return nil
}

// apply is add, or for an untagged independent call dropped (see
// droppedCalls) a count of it: a call, its ts, nothing else.
func (a *runAgg) apply(c *calls.Call, order Order, dropped bool) error {
	if !dropped {
		return a.add(c, order)
	}
	a.Add(calls.ClassAllowed, 0, 0, Order{}, "", "", c.TSMillis)
	return nil
}

// Run names in partition state: a run by its id, an independent call (a
// record without run_id, a run of one call) by its dedupe key. A call
// kept by the hour (see State.HoursFrom) is in the partial state
// named hourly, the hour of its ts in its day (0-23, one byte), then its
// run's name; the untagged independent calls dropped in an hour are
// counted (calls only) in the partial named hourly, the hour and
// droppedCalls. Merged by the name after the hour, a day's partial
// states are those a day kept whole would hold (runAgg.merge).
const (
	RunPrefix    = 'r'
	Independent  = 'i'
	hourly       = 'h'
	droppedCalls = 'x'
)

// hourMillis is an hour in milliseconds.
const hourMillis = 60 * 60 * 1000

// splitName returns the run name a partial state's name holds and, for a
// state kept by the hour, the hour of the day (else -1).
func splitName(name string) (base string, hour int) {
	if len(name) >= 3 && name[0] == hourly && name[1] < 24 {
		return name[2:], int(name[1])
	}
	return name, -1
}

// noDay is the day of a dedupe key that names no call (a segment's done
// marker) and of a segment whose days are not known; it is never a
// call's day (DayOf never returns it), and a snapshot or delta giving it
// to runs, dropped calls or a folded day is refused as corrupt.
const noDay = math.MinInt32

// runKey names a run's partial state: the UTC day of the calls it holds
// and the run (see RunPrefix). A run whose calls span days has one
// partial state per day; merged, they are the run's state (runAgg.merge).
type runKey struct {
	day  int32
	name string
}

// dayKey is a dedupe key and the day of the call it names (noDay for a
// key that names no call: a segment done marker).
type dayKey struct {
	key tracemsg.Key
	day int32
}

// State is one partition's reduction state, kept per UTC day of the
// calls' ts: the partial state of every run per day of its calls, the
// untagged independent calls dropped per day (they count as calls in the
// report's stats), the dedupe keys of the calls applied per day, the
// segments' row sets, and the highest stream sequence applied. Days past
// the fold grace are folded out of memory into day tables (FoldDays), and
// day tables past the retention are pruned (PruneDays): memory holds the
// open days, and the KV bucket (package fleet) the retained ones. Not safe
// for concurrent use.
type State struct {
	// Part is the partition of Parts the state is of; LastSeq the highest
	// stream sequence applied, set by the consumer and encoded with the
	// state (a catch-up resumes after it).
	Part, Parts int
	LastSeq     uint64
	// Runs holds the partial run states by day, then by run name.
	Runs    map[int32]map[string]*runAgg
	dropped map[int32]uint64
	// Keys holds the dedupe keys of every retained day (open or folded);
	// dayKeys those of the days in memory, by day, in the order they were
	// committed: a snapshot copies them as they are.
	Keys    map[tracemsg.Key]struct{}
	dayKeys map[int32][]byte
	// Segs holds, per segment content digest, the rows of the segment
	// applied to the partition (by row batches), and segDays the first
	// and last day of those rows' calls.
	Segs    map[[32]byte]rowSet
	segDays map[[32]byte][2]int32
	// names interns the outcomes and agents runs keep.
	names map[string]string
	// watermark is the newest ts_millis applied; folded the days folded
	// out of memory; pruned the days dropped at the retention (sorted,
	// disjoint ranges); late counts the calls refused because their day
	// was pruned (their dedupe keys are gone with it: applying them could
	// count a call twice).
	watermark int64
	Folded    map[int32]*DayRef
	Pruned    []dayRange
	late      uint64
	// HoursOn and HoursFrom: a call with ts_millis at or after HoursFrom
	// is kept by the hour (see hourly), the others by the day. Set by
	// the partition's owner from its clock (Options.HoursKept); not part
	// of the encoded state. hname is the buffer of an hourly name.
	HoursOn   bool
	HoursFrom int64
	hname     []byte

	// The message being applied: its undo logs. gen counts messages (see
	// Begin): a run saves its state (saves) on its first change in a
	// message (runAgg.gen), and a run it creates is listed in newRuns, so
	// the logs grow with the runs a message touches, not with its calls;
	// undo holds the rest (keys, row sets, dropped and late calls).
	// msgDays is the first and last day the message's calls fell in.
	undo      []undoEntry
	saves     []runSave
	newRuns   []runKey
	Gen       uint64
	msgMark   int64
	msgDays   [2]int32
	msgHasDay bool
	// The keys applied since the last commit (kept in dayKeys once
	// committed), and whether anything changed at all.
	newKeys []dayKey
	changed bool
	// snapGen is gen when the last snapshot written was encoded, and
	// deltaKeys the keys committed since: what the next delta holds
	// (runs with a newer gen, and those keys).
	snapGen   uint64
	deltaKeys []dayKey
}

// DayRef is a folded day: its table's revision, calls, when its first
// revision was written (Unix seconds, the retention's clock) and its blob in the KV
// bucket (Prefix "" until published).
type DayRef struct {
	Rev     uint32
	calls   uint64
	written int64
	Blob    BlobRef
}

// BlobRef names a chunked value in a key-value store: the keys
// Prefix.0 .. Prefix.(Chunks-1), whose concatenation is Size bytes with
// the SHA-256 (hex) SHA256. Where the chunks live is the consumer's.
type BlobRef struct {
	Prefix string `json:"prefix"`
	Chunks int    `json:"chunks"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
}

// dayRange is the closed range of days [lo, hi].
type dayRange struct{ lo, hi int32 }

// undoEntry undoes one change of the message being applied other than a
// run's: a key recorded (hasKey), an untagged call dropped on day, a late
// call, or a segment's row set (seg).
type undoEntry struct {
	key     tracemsg.Key
	hasKey  bool
	keyDay  int32
	dropped bool
	day     int32
	late    bool
	seg     *[32]byte
	segPrev rowSet
	segDays [2]int32
	segHad  bool
}

// runSave is a run's state before the message being applied first
// changed it (gen included): rollback restores it in place.
type runSave struct {
	a    *runAgg
	prev runAgg
}

// maxKeptSaves bounds the capacity of the run undo logs kept between
// messages.
const maxKeptSaves = 1 << 14

// NewState returns the empty state of partition part of parts.
func NewState(part, parts int) *State {
	return &State{Part: part, Parts: parts, Runs: map[int32]map[string]*runAgg{}, dropped: map[int32]uint64{},
		Keys: map[tracemsg.Key]struct{}{}, dayKeys: map[int32][]byte{}, Segs: map[[32]byte]rowSet{},
		segDays: map[[32]byte][2]int32{}, Folded: map[int32]*DayRef{}}
}

// loadKey adds a key of a loaded state (a snapshot or a delta) of day to
// the committed keys.
func (s *State) loadKey(k tracemsg.Key, day int32) {
	if _, ok := s.Keys[k]; ok {
		return
	}
	s.Keys[k] = struct{}{}
	s.dayKeys[day] = append(s.dayKeys[day], k[:]...)
}

// Has reports whether a key was applied.
func (s *State) Has(k tracemsg.Key) bool { _, ok := s.Keys[k]; return ok }

// Begin starts a message: what the messages before it changed is kept
// (to commit), and rollback undoes only the new message.
func (s *State) Begin() {
	s.Keep()
	s.Gen++
	s.msgMark = s.watermark
	s.msgHasDay = false
}

// Keep moves the undo log's keys into what the next commit keeps.
func (s *State) Keep() {
	if len(s.undo)+len(s.saves)+len(s.newRuns) > 0 {
		s.changed = true
	}
	for _, u := range s.undo {
		if u.hasKey {
			s.newKeys = append(s.newKeys, dayKey{u.key, u.keyDay})
		}
	}
	clear(s.undo)
	s.undo = s.undo[:0]
	s.forgetRunUndo()
}

// forgetRunUndo empties the run undo logs. Their stale entries are not
// cleared (a few thousand runs a message: clearing cost more than the
// states they keep reachable), unless the logs grew past maxKeptSaves.
func (s *State) forgetRunUndo() {
	if cap(s.saves) > maxKeptSaves || cap(s.newRuns) > maxKeptSaves {
		s.saves, s.newRuns = nil, nil
		return
	}
	s.saves, s.newRuns = s.saves[:0], s.newRuns[:0]
}

// IsPruned reports whether day was dropped at the retention.
func (s *State) IsPruned(day int32) bool {
	_, ok := slices.BinarySearchFunc(s.Pruned, day, func(r dayRange, d int32) int {
		switch {
		case r.hi < d:
			return -1
		case r.lo > d:
			return 1
		}
		return 0
	})
	return ok
}

// Apply folds one call identified by key (already checked new) with its
// order and records the key; an error (a cost overflow) changes nothing.
// A call of a pruned day is counted late instead, its key not recorded.
func (s *State) Apply(key tracemsg.Key, c *calls.Call, order Order) error {
	var name []byte
	if c.HasRunID {
		name = append(append(make([]byte, 0, 1+len(c.RunID)), RunPrefix), c.RunID...)
	} else {
		name = append([]byte{Independent}, key[:]...)
	}
	late, err := s.fold(name, c, order)
	if err != nil || late {
		return err
	}
	s.Keys[key] = struct{}{}
	s.undo = append(s.undo, undoEntry{key: key, hasKey: true, keyDay: DayOf(c.TSMillis)})
	return nil
}

// fold folds c into the partial state of the run called name (RunPrefix
// and the run id, or independent and the call's key) for the day of its
// ts, or counts an untagged independent call as dropped; an error (a cost
// overflow) changes nothing. A call of a pruned day is not applied: fold
// counts it late and reports it. name is not retained.
func (s *State) fold(name []byte, c *calls.Call, order Order) (late bool, err error) {
	return s.FoldCall(name, c, order, false)
}

// FoldCall is fold; interned says c's outcome and agent are the
// partition's copies already (see intern).
func (s *State) FoldCall(name []byte, c *calls.Call, order Order, interned bool) (late bool, err error) {
	day := DayOf(c.TSMillis)
	if len(s.Pruned) > 0 && s.IsPruned(day) {
		s.late++
		s.undo = append(s.undo, undoEntry{late: true})
		return true, nil
	}
	if !s.msgHasDay {
		s.msgDays, s.msgHasDay = [2]int32{day, day}, true
	} else {
		s.msgDays[0], s.msgDays[1] = min(s.msgDays[0], day), max(s.msgDays[1], day)
	}
	drop := name[0] == Independent && c.Outcome == ""
	hour := int64(-1)
	if s.HoursOn && c.TSMillis >= s.HoursFrom {
		hour = (c.TSMillis - int64(day)*DayMillis) / hourMillis // outside 0-23 only where dayOf clamps
	}
	if hour >= 0 && hour < 24 {
		s.hname = append(s.hname[:0], hourly, byte(hour))
		if drop {
			s.hname = append(s.hname, droppedCalls)
		} else {
			s.hname = append(s.hname, name...)
		}
		name = s.hname
	} else if drop {
		s.undo = append(s.undo, undoEntry{dropped: true, day: day})
		s.dropped[day]++
		s.watermark = max(s.watermark, c.TSMillis)
		return false, nil
	}
	// A run keeps its outcome and agent: interned, so that it does not
	// keep the message they were decoded from alive.
	if c.Outcome != "" && !interned {
		c.Outcome = s.Intern(c.Outcome)
	}
	if c.AgentID != "" && !interned && !drop { // a dropped call's agent is not kept
		c.AgentID = s.Intern(c.AgentID)
	}
	runs := s.Runs[day]
	if runs == nil {
		runs = map[string]*runAgg{}
		s.Runs[day] = runs
	}
	a, had := runs[string(name)]
	switch {
	case !had:
		a = &runAgg{}
		if err := a.apply(c, order, drop); err != nil {
			return false, err
		}
		a.gen = s.Gen
		k := runKey{day, string(name)}
		runs[k.name] = a
		s.newRuns = append(s.newRuns, k)
	case a.gen == s.Gen: // saved or created by this message already
		if err := a.apply(c, order, drop); err != nil {
			return false, err
		}
	default:
		s.saves = append(s.saves, runSave{a: a, prev: *a})
		if err := a.apply(c, order, drop); err != nil {
			s.saves = s.saves[:len(s.saves)-1]
			return false, err
		}
		a.gen = s.Gen
	}
	s.watermark = max(s.watermark, c.TSMillis)
	return false, nil
}

// Intern returns the partition's copy of v.
func (s *State) Intern(v string) string {
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

// AddRows records rows [lo, hi] of the segment with this digest as
// applied, their calls in the days of the message (msgDays).
func (s *State) AddRows(digest [32]byte, lo, hi uint64) {
	prev, had := s.Segs[digest]
	prevDays, hadDays := s.segDays[digest]
	s.Segs[digest] = prev.add(lo, hi)
	if s.msgHasDay {
		days := s.msgDays
		if hadDays {
			days = [2]int32{min(days[0], prevDays[0]), max(days[1], prevDays[1])}
		}
		s.segDays[digest] = days
	}
	d := digest
	if !had {
		prev = nil
	}
	s.undo = append(s.undo, undoEntry{seg: &d, segPrev: prev, segDays: prevDays, segHad: hadDays})
}

// Rollback undoes everything applied since begin.
func (s *State) Rollback() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		u := s.undo[i]
		if u.hasKey {
			delete(s.Keys, u.key)
		}
		switch {
		case u.seg != nil:
			if u.segPrev == nil {
				delete(s.Segs, *u.seg)
			} else {
				s.Segs[*u.seg] = u.segPrev
			}
			if u.segHad {
				s.segDays[*u.seg] = u.segDays
			} else {
				delete(s.segDays, *u.seg)
			}
		case u.late:
			s.late--
		case u.dropped:
			if s.dropped[u.day]--; s.dropped[u.day] == 0 {
				delete(s.dropped, u.day)
			}
		}
	}
	s.undo = s.undo[:0]
	// Each run is in one of the logs at most once: the order is free.
	for _, sv := range s.saves {
		*sv.a = sv.prev
	}
	for _, k := range s.newRuns {
		runs := s.Runs[k.day]
		delete(runs, k.name)
		if len(runs) == 0 {
			delete(s.Runs, k.day) // else the day would read as open
		}
	}
	s.forgetRunUndo()
	s.watermark = s.msgMark
}

// addRun sets a loaded run partial state.
func (s *State) addRun(day int32, name string, a *runAgg) {
	runs := s.Runs[day]
	if runs == nil {
		runs = map[string]*runAgg{}
		s.Runs[day] = runs
	}
	runs[name] = a
}

// RunCount returns the number of run partial states in memory.
func (s *State) RunCount() int {
	n := 0
	for _, runs := range s.Runs {
		n += len(runs)
	}
	return n
}

// ChangedSince reports whether anything was applied since the last commit
// (or settle), or the sequence moved from before.
func (s *State) ChangedSince(before uint64) bool {
	s.Keep()
	return s.changed || s.LastSeq != before
}

// Settle ends what was applied since the last settle: committed appends
// its keys to their days' key lists (a snapshot encodes them); otherwise
// the state no longer matches its last snapshot and the caller must drop it.
func (s *State) Settle(committed bool) {
	s.Keep()
	if committed {
		for _, k := range s.newKeys {
			s.dayKeys[k.day] = append(s.dayKeys[k.day], k.key[:]...)
		}
		s.deltaKeys = append(s.deltaKeys, s.newKeys...)
	}
	s.newKeys, s.changed = s.newKeys[:0], false
}

// errOverflow marks a record whose cost or tokens would overflow the
// stored totals.
var errOverflow = errors.New("sum overflows int64")
