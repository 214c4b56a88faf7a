package fleet

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/tracemsg"
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
	gen                     uint64 // partState.gen of its last undo entry; not encoded
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

// apply is add, or for an untagged independent call dropped (see
// droppedCalls) a count of it.
func (a *runAgg) apply(c *calls.Call, order callOrder, dropped bool) error {
	if !dropped {
		return a.add(c, order)
	}
	a.calls++
	if c.TSMillis > a.lastTS || a.calls == 1 {
		a.lastTS = c.TSMillis
	}
	return nil
}

// Run names in partition state: a run by its id, an independent call (a
// record without run_id, a run of one call) by its dedupe key. A call
// kept by the hour (see partState.hoursFrom) is in the partial state
// named hourly, the hour of its ts in its day (0-23, one byte), then its
// run's name; the untagged independent calls dropped in an hour are
// counted (calls only) in the partial named hourly, the hour and
// droppedCalls. Merged by the name after the hour, a day's partial
// states are those a day kept whole would hold (runAgg.merge).
const (
	runPrefix    = 'r'
	independent  = 'i'
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

// undated is the day of state written before state was kept per day (a
// snapshot of an older build): its runs count in every all-time report,
// are never folded or pruned, and make a report by time window refuse.
// dayOf never returns it.
const undated = math.MinInt32

// runKey names a run's partial state: the UTC day of the calls it holds
// and the run (see runPrefix). A run whose calls span days has one
// partial state per day; merged, they are the run's state (runAgg.merge).
type runKey struct {
	day  int32
	name string
}

// dayKey is a dedupe key and the day of the call it names (undated for a
// key that names no call: a segment done marker).
type dayKey struct {
	key tracemsg.Key
	day int32
}

// partState is one partition's reduction state, kept per UTC day of the
// calls' ts: the partial state of every run per day of its calls, the
// untagged independent calls dropped per day (they count as calls in the
// report's stats), the dedupe keys of the calls applied per day, the
// segments' row sets, and the highest stream sequence applied. Days past
// the fold grace are folded out of memory into day tables (foldDays), and
// day tables past the retention are pruned (pruneDays): memory holds the
// open days, and the store and the KV bucket the retained ones. Not safe
// for concurrent use.
type partState struct {
	part, parts int
	lastSeq     uint64
	// runs holds the partial run states by day, then by run name.
	runs    map[int32]map[string]*runAgg
	dropped map[int32]uint64
	// keys holds the dedupe keys of every retained day (open or folded);
	// dayKeys those of the days in memory, by day, in the order they were
	// committed: a snapshot copies them as they are.
	keys    map[tracemsg.Key]struct{}
	dayKeys map[int32][]byte
	// segs holds, per segment content digest, the rows of the segment
	// applied to the partition (by row batches), and segDays the first
	// and last day of those rows' calls.
	segs    map[[32]byte]rowSet
	segDays map[[32]byte][2]int32
	// names interns the outcomes and agents runs keep.
	names map[string]string
	// watermark is the newest ts_millis applied; folded the days folded
	// out of memory; pruned the days dropped at the retention (sorted,
	// disjoint ranges); late counts the calls refused because their day
	// was pruned (their dedupe keys are gone with it: applying them could
	// count a call twice).
	watermark int64
	folded    map[int32]*dayRef
	pruned    []dayRange
	late      uint64
	// hoursOn and hoursFrom: a call with ts_millis at or after hoursFrom
	// is kept by the hour (see hourly), the others by the day. Set by
	// the partition's owner from its clock (Options.HoursKept); not part
	// of the encoded state. hname is the buffer of an hourly name.
	hoursOn   bool
	hoursFrom int64
	hname     []byte

	// The message being applied: its undo logs. gen counts messages (see
	// begin): a run saves its state (saves) on its first change in a
	// message (runAgg.gen), and a run it creates is listed in newRuns, so
	// the logs grow with the runs a message touches, not with its calls;
	// undo holds the rest (keys, row sets, dropped and late calls).
	// msgDays is the first and last day the message's calls fell in.
	undo      []undoEntry
	saves     []runSave
	newRuns   []runKey
	gen       uint64
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

// dayRef is a folded day: its table's revision, calls, when its first
// revision was written (Unix seconds, the retention's clock) and its blob in the KV
// bucket (Prefix "" until published).
type dayRef struct {
	rev     uint32
	calls   uint64
	written int64
	blob    blobRef
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

func newPartState(part, parts int) *partState {
	return &partState{part: part, parts: parts, runs: map[int32]map[string]*runAgg{}, dropped: map[int32]uint64{},
		keys: map[tracemsg.Key]struct{}{}, dayKeys: map[int32][]byte{}, segs: map[[32]byte]rowSet{},
		segDays: map[[32]byte][2]int32{}, folded: map[int32]*dayRef{}}
}

// loadKey adds a key of a loaded state (a snapshot, the store) of day to
// the committed keys.
func (s *partState) loadKey(k tracemsg.Key, day int32) {
	if _, ok := s.keys[k]; ok {
		return
	}
	s.keys[k] = struct{}{}
	s.dayKeys[day] = append(s.dayKeys[day], k[:]...)
}

// has reports whether a key was applied.
func (s *partState) has(k tracemsg.Key) bool { _, ok := s.keys[k]; return ok }

// begin starts a message: what the messages before it changed is kept
// (to commit), and rollback undoes only the new message.
func (s *partState) begin() {
	s.keep()
	s.gen++
	s.msgMark = s.watermark
	s.msgHasDay = false
}

// keep moves the undo log's keys into what the next commit keeps.
func (s *partState) keep() {
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
func (s *partState) forgetRunUndo() {
	if cap(s.saves) > maxKeptSaves || cap(s.newRuns) > maxKeptSaves {
		s.saves, s.newRuns = nil, nil
		return
	}
	s.saves, s.newRuns = s.saves[:0], s.newRuns[:0]
}

// isPruned reports whether day was dropped at the retention.
func (s *partState) isPruned(day int32) bool {
	_, ok := slices.BinarySearchFunc(s.pruned, day, func(r dayRange, d int32) int {
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

// apply folds one call identified by key (already checked new) with its
// order and records the key; an error (a cost overflow) changes nothing.
// A call of a pruned day is counted late instead, its key not recorded.
func (s *partState) apply(key tracemsg.Key, c *calls.Call, order callOrder) error {
	var name []byte
	if c.HasRunID {
		name = append(append(make([]byte, 0, 1+len(c.RunID)), runPrefix), c.RunID...)
	} else {
		name = append([]byte{independent}, key[:]...)
	}
	late, err := s.fold(name, c, order)
	if err != nil || late {
		return err
	}
	s.keys[key] = struct{}{}
	s.undo = append(s.undo, undoEntry{key: key, hasKey: true, keyDay: dayOf(c.TSMillis)})
	return nil
}

// fold folds c into the partial state of the run called name (runPrefix
// and the run id, or independent and the call's key) for the day of its
// ts, or counts an untagged independent call as dropped; an error (a cost
// overflow) changes nothing. A call of a pruned day is not applied: fold
// counts it late and reports it. name is not retained.
func (s *partState) fold(name []byte, c *calls.Call, order callOrder) (late bool, err error) {
	return s.foldCall(name, c, order, false)
}

// foldCall is fold; interned says c's outcome and agent are the
// partition's copies already (see intern).
func (s *partState) foldCall(name []byte, c *calls.Call, order callOrder, interned bool) (late bool, err error) {
	day := dayOf(c.TSMillis)
	if len(s.pruned) > 0 && s.isPruned(day) {
		s.late++
		s.undo = append(s.undo, undoEntry{late: true})
		return true, nil
	}
	if !s.msgHasDay {
		s.msgDays, s.msgHasDay = [2]int32{day, day}, true
	} else {
		s.msgDays[0], s.msgDays[1] = min(s.msgDays[0], day), max(s.msgDays[1], day)
	}
	drop := name[0] == independent && c.Outcome == ""
	hour := int64(-1)
	if s.hoursOn && c.TSMillis >= s.hoursFrom {
		hour = (c.TSMillis - int64(day)*dayMillis) / hourMillis // outside 0-23 only where dayOf clamps
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
		c.Outcome = s.intern(c.Outcome)
	}
	if c.AgentID != "" && !interned && !drop { // a dropped call's agent is not kept
		c.AgentID = s.intern(c.AgentID)
	}
	runs := s.runs[day]
	if runs == nil {
		runs = map[string]*runAgg{}
		s.runs[day] = runs
	}
	a, had := runs[string(name)]
	switch {
	case !had:
		a = &runAgg{}
		if err := a.apply(c, order, drop); err != nil {
			return false, err
		}
		a.gen = s.gen
		k := runKey{day, string(name)}
		runs[k.name] = a
		s.newRuns = append(s.newRuns, k)
	case a.gen == s.gen: // saved or created by this message already
		if err := a.apply(c, order, drop); err != nil {
			return false, err
		}
	default:
		s.saves = append(s.saves, runSave{a: a, prev: *a})
		if err := a.apply(c, order, drop); err != nil {
			s.saves = s.saves[:len(s.saves)-1]
			return false, err
		}
		a.gen = s.gen
	}
	s.watermark = max(s.watermark, c.TSMillis)
	return false, nil
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

// addRows records rows [lo, hi] of the segment with this digest as
// applied, their calls in the days of the message (msgDays).
func (s *partState) addRows(digest [32]byte, lo, hi uint64) {
	prev, had := s.segs[digest]
	prevDays, hadDays := s.segDays[digest]
	s.segs[digest] = prev.add(lo, hi)
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
		runs := s.runs[k.day]
		delete(runs, k.name)
		if len(runs) == 0 {
			delete(s.runs, k.day) // else the day would read as open
		}
	}
	s.forgetRunUndo()
	s.watermark = s.msgMark
}

// addRun sets a loaded run partial state.
func (s *partState) addRun(day int32, name string, a *runAgg) {
	runs := s.runs[day]
	if runs == nil {
		runs = map[string]*runAgg{}
		s.runs[day] = runs
	}
	runs[name] = a
}

// runCount returns the number of run partial states in memory.
func (s *partState) runCount() int {
	n := 0
	for _, runs := range s.runs {
		n += len(runs)
	}
	return n
}

// changedSince reports whether anything was applied since the last commit
// (or settle), or the sequence moved from before.
func (s *partState) changedSince(before uint64) bool {
	s.keep()
	return s.changed || s.lastSeq != before
}

// settle ends what was applied since the last settle: committed appends
// its keys to their days' key lists (a snapshot encodes them); otherwise
// the state no longer matches the store and the caller must drop it.
func (s *partState) settle(committed bool) {
	s.keep()
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

// addInt64 returns a+b and whether it did not overflow.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}
