package partstate

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/verdryx/verdryx/internal/wire"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/tracemsg"
)

// DayMillis is a UTC day in milliseconds.
const DayMillis = 24 * 60 * 60 * 1000

// DayOf returns the UTC day ts_millis falls in, as days since 1970-01-01
// (floored: -1 is 1969-12-31), clamped to the int32 range above noDay.
func DayOf(ts int64) int32 {
	d := ts / DayMillis
	if ts%DayMillis < 0 {
		d--
	}
	return int32(min(max(d, noDay+1), math.MaxInt32))
}

// merge folds b (the state of other calls of the same run) into a,
// exactly as adding b's calls one by one after a's would (outcome.Run's
// Merge). It fails, changing nothing, when the cost would overflow.
func (a *runAgg) merge(b *runAgg) error {
	err := a.Merge(&b.Run)
	if errors.Is(err, outcome.ErrOverflow) {
		return fmt.Errorf("field cost_microusd: %w", errOverflow)
	}
	return err
}

// DayTable is one folded day of a partition: the state, per run, of the
// calls whose ts falls in the day (a run spanning days has a partial
// state in each), the untagged independent calls of the day that were
// dropped, and the dedupe keys of the day's records. A day is folded out
// of memory once the partition's newest call is past it by the fold
// grace; calls of the day that arrive after that correct the table (a new
// revision, the partials merged in), so nothing is counted twice.
type DayTable struct {
	part, parts int
	Day         int32
	rev         uint32
	runs        map[string]*runAgg
	dropped     uint64
	keys        []byte // tracemsg.KeySize bytes each
}

func newDayTable(part, parts int, day int32) *DayTable {
	return &DayTable{part: part, parts: parts, Day: day, runs: map[string]*runAgg{}}
}

// calls returns the calls the table holds, dropped ones included.
func (t *DayTable) calls() uint64 {
	n := t.dropped
	for _, a := range t.runs {
		n += a.Calls
	}
	return n
}

// add merges a run's partial state into the table; a fails the merge,
// changing nothing, on a cost overflow. a is not retained.
func (t *DayTable) add(name string, a *runAgg) error {
	have, ok := t.runs[name]
	if !ok {
		c := *a
		c.gen = 0
		t.runs[name] = &c
		return nil
	}
	if err := have.merge(a); err != nil {
		return fmt.Errorf("day %s run %q: %w", DayString(t.Day), name, err)
	}
	return nil
}

// Day table encoding: see docs/formats.md, "Day table". A table with
// another magic than dayMagic is refused.
var dayMagic = []byte("VDXDAY01")

// castagnoli is the CRC-32C table of the day table checksum.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// dayTableEncoder holds the dictionaries of one table's encoding.
type dayTableEncoder struct {
	strs     map[string]uint64
	strList  []string
	prefixes map[[3]uint64]uint64
	preList  [][3]uint64
}

func (e *dayTableEncoder) str(s string) uint64 {
	i, ok := e.strs[s]
	if !ok {
		i = uint64(len(e.strList))
		e.strs[s] = i
		e.strList = append(e.strList, s)
	}
	return i
}

func (e *dayTableEncoder) prefix(o Order) uint64 {
	k := [3]uint64{o[0], o[1], o[2]}
	i, ok := e.prefixes[k]
	if !ok {
		i = uint64(len(e.preList))
		e.prefixes[k] = i
		e.preList = append(e.preList, k)
	}
	return i
}

// Encode appends the table's encoding to b.
func (t *DayTable) Encode(b []byte) []byte {
	e := dayTableEncoder{strs: map[string]uint64{}, prefixes: map[[3]uint64]uint64{}}
	// The runs first, into their own buffer, so the dictionaries they
	// fill can be written before them.
	runs := make([]byte, 0, 48*len(t.runs))
	dayStart := int64(t.Day) * DayMillis
	for name, a := range t.runs {
		runs = appendString(runs, name)
		flags := uint64(0)
		if a.Outcome.Value != "" {
			flags |= 1
		}
		if a.Agent.Value != "" {
			flags |= 2
		}
		runs = binary.AppendUvarint(runs, flags)
		runs = binary.AppendUvarint(runs, a.Calls)
		runs = binary.AppendUvarint(runs, a.Blocked)
		runs = binary.AppendUvarint(runs, a.Refused)
		runs = binary.AppendVarint(runs, a.Cost)
		runs = binary.AppendVarint(runs, a.LastTS-dayStart)
		if a.Outcome.Value != "" {
			runs = binary.AppendUvarint(runs, e.str(a.Outcome.Value))
			runs = binary.AppendUvarint(runs, uint64(a.Outcome.Step))
			runs = binary.AppendUvarint(runs, e.prefix(a.Outcome.Pos))
			runs = binary.AppendUvarint(runs, a.Outcome.Pos[3])
		}
		if a.Agent.Value != "" {
			runs = binary.AppendUvarint(runs, e.str(a.Agent.Value))
			runs = binary.AppendUvarint(runs, uint64(a.Agent.Step))
			runs = binary.AppendUvarint(runs, e.prefix(a.Agent.Pos))
			runs = binary.AppendUvarint(runs, a.Agent.Pos[3])
		}
	}
	b = slices.Grow(b, 64+len(t.keys)+len(runs)+32*len(e.preList)+16*len(e.strList))
	start := len(b)
	b = append(b, dayMagic...)
	b = binary.AppendUvarint(b, uint64(t.part))
	b = binary.AppendUvarint(b, uint64(t.parts))
	b = binary.AppendVarint(b, int64(t.Day))
	b = binary.AppendUvarint(b, uint64(t.rev))
	b = binary.AppendUvarint(b, t.dropped)
	b = binary.AppendUvarint(b, uint64(len(t.keys)/tracemsg.KeySize))
	b = append(b, t.keys...)
	b = binary.AppendUvarint(b, uint64(len(e.strList)))
	for _, s := range e.strList {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(e.preList)))
	for _, p := range e.preList {
		b = binary.AppendUvarint(b, p[0])
		b = binary.AppendUvarint(b, p[1])
		b = binary.AppendUvarint(b, p[2])
	}
	b = binary.AppendUvarint(b, uint64(len(t.runs)))
	b = append(b, runs...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli()))
}

// checkDayTable checks an encoded table's magic and checksum and returns
// its body (after the magic, before the checksum).
func checkDayTable(b []byte) (body []byte, err error) {
	if _, err := checkMagic("day table", b, dayMagic); err != nil {
		return nil, err
	}
	if len(b) < len(dayMagic)+4 {
		return nil, errors.New("day table: truncated")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli()) != sum {
		return nil, errors.New("day table: checksum mismatch (damaged)")
	}
	return body[len(dayMagic):], nil
}

// dayTableHead reads a table's header up to its keys.
func dayTableHead(d *decoder) (t *DayTable) {
	part, parts := d.Uvarint(), d.Uvarint()
	day := d.Varint()
	if d.Err == nil && (parts == 0 || parts > 1<<16 || part >= parts || day < math.MinInt32 || day > math.MaxInt32) {
		d.Err = fmt.Errorf("partition %d of %d, day %d", part, parts, day)
	}
	t = newDayTable(int(part), int(parts), int32(day))
	t.rev = d.uint32()
	t.dropped = d.Uvarint()
	return t
}

// dayKeysOf reads a table's key count and keys (aliasing d's buffer).
func dayKeysOf(d *decoder) []byte {
	nk := d.Uvarint()
	if d.Err == nil && nk > uint64(len(d.B))/tracemsg.KeySize {
		d.Err = fmt.Errorf("%d keys in %d bytes", nk, len(d.B))
	}
	if d.Err != nil {
		return nil
	}
	k := d.B[: nk*tracemsg.KeySize : nk*tracemsg.KeySize]
	d.B = d.B[nk*tracemsg.KeySize:]
	return k
}

// DecodeDayTable reads what encode wrote; a damaged table is an error.
func DecodeDayTable(b []byte) (*DayTable, error) {
	body, err := checkDayTable(b)
	if err != nil {
		return nil, err
	}
	d := decoder{wire.Reader{B: body}}
	t := dayTableHead(&d)
	t.keys = append([]byte(nil), dayKeysOf(&d)...)
	var states []runAgg
	err = eachDayRun(&d, t.Day, func(n int) {
		states = make([]runAgg, n)
		t.runs = make(map[string]*runAgg, n)
	}, func(i int, name []byte, _ int, a *runAgg) {
		states[i] = *a
		t.runs[string(name)] = &states[i]
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// eachDayTableRun calls fn with each run state of the encoded day table b
// (checked as DecodeDayTable checks it) and returns the table's day and
// dropped calls. name is a substring of one copy of the table's runs made
// for the call (no string per run: a report merges a run's partial states
// of every day under one name), so fn clones it to keep it apart; a is
// reused between calls. fn may have been called when a later run fails
// to decode.
func eachDayTableRun(b []byte, fn func(name string, a *runAgg)) (day int32, dropped uint64, err error) {
	body, err := checkDayTable(b)
	if err != nil {
		return 0, 0, err
	}
	d := decoder{wire.Reader{B: body}}
	t := dayTableHead(&d)
	dayKeysOf(&d)
	// The rest of the body as one string: each name is a slice of it.
	rest := string(d.B)
	err = eachDayRun(&d, t.Day, nil, func(_ int, name []byte, after int, a *runAgg) {
		end := len(rest) - after
		fn(rest[end-len(name):end], a)
	})
	return t.Day, t.dropped, err
}

// eachDayRun reads the rest of a table body after its keys (the
// strings, the order prefixes, the runs) and calls start, when set, with
// the run count, then fn with each run's index, name (aliasing d's
// buffer), how many bytes of the buffer follow the name, and state (one
// value reused between calls). It fails on anything malformed or left
// over.
func eachDayRun(d *decoder, day int32, start func(n int), fn func(i int, name []byte, after int, a *runAgg)) error {
	strs := make([]string, d.count(1))
	for i := range strs {
		strs[i] = string(d.Bytes(math.MaxUint64))
	}
	pres := make([][3]uint64, d.count(3))
	for i := range pres {
		pres[i] = [3]uint64{d.Uvarint(), d.Uvarint(), d.Uvarint()}
	}
	n := d.count(7)
	if start != nil {
		start(n)
	}
	dayStart := int64(day) * DayMillis
	ref := func(step *uint32, order *Order) string {
		si, st, pi, last := d.Uvarint(), d.uint32(), d.Uvarint(), d.Uvarint()
		if d.Err == nil && (si >= uint64(len(strs)) || pi >= uint64(len(pres))) {
			d.Err = fmt.Errorf("string %d of %d, order prefix %d of %d", si, len(strs), pi, len(pres))
		}
		if d.Err != nil {
			return ""
		}
		p := pres[pi]
		*step, *order = st, Order{p[0], p[1], p[2], last}
		return strs[si]
	}
	var a runAgg
	for i := range n {
		name := d.Bytes(math.MaxUint64)
		at := len(d.B)
		a = runAgg{}
		flags := d.Uvarint()
		a.Calls, a.Blocked, a.Refused = d.Uvarint(), d.Uvarint(), d.Uvarint()
		a.Cost, a.LastTS = d.Varint(), d.Varint()+dayStart
		if flags&1 != 0 {
			a.Outcome.Value = ref(&a.Outcome.Step, &a.Outcome.Pos)
		}
		if flags&2 != 0 {
			a.Agent.Value = ref(&a.Agent.Step, &a.Agent.Pos)
		}
		if d.Err == nil && (flags > 3 || a.Calls == 0 || a.Refused < a.Blocked || a.Calls < a.Refused) {
			d.Err = fmt.Errorf("run %q: flags %d, %d calls, %d refused, %d blocked", name, flags, a.Calls, a.Refused, a.Blocked)
		}
		// An outcome or agent is written only when there is one: an empty
		// one flagged is not a table this build wrote.
		if d.Err == nil && (flags&1 != 0 && a.Outcome.Value == "" || flags&2 != 0 && a.Agent.Value == "") {
			d.Err = fmt.Errorf("run %q: an empty outcome or agent flagged", name)
		}
		if d.Err != nil {
			break
		}
		fn(i, name, at, &a)
	}
	if d.Err == nil && len(d.B) > 0 {
		d.Err = fmt.Errorf("%d bytes after the runs", len(d.B))
	}
	if d.Err != nil {
		return fmt.Errorf("day table: %w", d.Err)
	}
	return nil
}

// count reads a count of items that take at least size bytes each, and
// fails (returning 0) when the rest of the buffer cannot hold them.
func (d *decoder) count(size int) int {
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)/size) {
		d.Err = fmt.Errorf("%d items of at least %d bytes in %d bytes", n, size, len(d.B))
	}
	if d.Err != nil {
		return 0
	}
	return int(n)
}

// DayTableKeys checks an encoded day table (its checksum and header) and
// returns its partition, day, revision and keys (aliasing b) without
// decoding its run states: what a takeover needs of every retained day.
func DayTableKeys(b []byte) (part int, day int32, rev uint32, keys []byte, err error) {
	body, err := checkDayTable(b)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	d := decoder{wire.Reader{B: body}}
	t := dayTableHead(&d)
	keys = dayKeysOf(&d)
	if d.Err != nil {
		return 0, 0, 0, nil, fmt.Errorf("day table: %w", d.Err)
	}
	return t.part, t.Day, t.rev, keys, nil
}

// AddFoldedKeysOf adds the keys of an encoded day table to the dedupe set.
func (s *State) AddFoldedKeysOf(keys []byte) {
	for i := 0; i+tracemsg.KeySize <= len(keys); i += tracemsg.KeySize {
		s.Keys[tracemsg.Key(keys[i:i+tracemsg.KeySize])] = struct{}{}
	}
}

// DayString formats a day number as YYYY-MM-DD.
func DayString(day int32) string {
	return unixDay(day).Format("2006-01-02")
}

// unixDay returns the midnight (UTC) day begins at.
func unixDay(day int32) time.Time { return time.Unix(int64(day)*DayMillis/1000, 0).UTC() }

// DefaultFoldAfter is how far past a day's end (by the partition's newest
// call) the day is folded out of memory.
const DefaultFoldAfter = 2 * time.Hour

// openDays returns the days (other than noDay) with state in memory.
func (s *State) openDays() []int32 {
	days := map[int32]bool{}
	for d := range s.Runs {
		days[d] = true
	}
	for d := range s.dropped {
		days[d] = true
	}
	for d := range s.dayKeys {
		days[d] = true
	}
	delete(days, noDay)
	return slices.Sorted(maps.Keys(days))
}

// FoldDays folds out of memory every day whose end is at least grace
// before the horizon (the partition's newest call, or an hour from now if
// that is sooner, so a call stamped in the future folds nothing early),
// and every folded day that has calls again (late calls: its table is
// corrected, a new revision). load returns a folded day's table (from the
// pending tables, else the bucket). It returns the tables written, each a new
// revision whose reference (s.folded) has no blob until published; a day
// whose table cannot be loaded or whose merge would overflow stays in
// memory and is reported in skipped.
func (s *State) FoldDays(now time.Time, grace time.Duration, load func(day int32, ref *DayRef) (*DayTable, error)) (tables []*DayTable, skipped []error) {
	horizon := min(s.watermark, now.Add(time.Hour).UnixMilli()) - grace.Milliseconds()
	for _, d := range s.openDays() {
		ref := s.Folded[d]
		if ref == nil && int64(d+1)*DayMillis > horizon {
			continue
		}
		t := newDayTable(s.Part, s.Parts, d)
		if ref != nil {
			var err error
			if t, err = load(d, ref); err != nil {
				skipped = append(skipped, fmt.Errorf("day %s: %w", DayString(d), err))
				continue
			}
			// The merge below changes t: work on what load returned
			// only, never on a table shared with a reader.
		}
		if err := s.foldInto(t, d); err != nil {
			skipped = append(skipped, err)
			continue
		}
		if ref != nil {
			t.rev = ref.Rev + 1
		} else {
			t.rev = 1
		}
		// The retention counts from the table's first write: a late
		// call's correction does not extend it (stragglers could keep a
		// day forever).
		written := now.Unix()
		if ref != nil {
			written = ref.written
		}
		s.Folded[d] = &DayRef{Rev: t.rev, calls: t.calls(), written: written}
		tables = append(tables, t)
	}
	return tables, skipped
}

// foldInto merges day d's state in memory into t and drops it from
// memory; on a cost overflow nothing changes in s (t may be half merged:
// the caller drops it).
func (s *State) foldInto(t *DayTable, d int32) error {
	if len(t.runs) == 0 && s.Runs[d] != nil {
		// A new table takes the day's states over: nothing to merge.
		t.runs = s.Runs[d]
		for _, a := range t.runs {
			a.gen = 0
		}
	} else {
		for name, a := range s.Runs[d] {
			if err := t.add(name, a); err != nil {
				return err
			}
		}
	}
	t.dropped += s.dropped[d]
	t.keys = append(t.keys, s.dayKeys[d]...)
	delete(s.Runs, d)
	delete(s.dropped, d)
	delete(s.dayKeys, d)
	return nil
}

// PruneDays drops every folded day whose table was first written more than
// retention before now (retention 0: never): its keys leave the dedupe
// set, its day joins the pruned ranges (a call of it is late from now on),
// and the row sets of segments whose every day has no state left go too.
// keys returns a folded day's dedupe keys (from its table, not decoded
// whole). It returns the days pruned.
func (s *State) PruneDays(now time.Time, retention time.Duration, keys func(day int32, ref *DayRef) ([]byte, error)) (days []int32, skipped []error) {
	if retention <= 0 {
		return nil, nil
	}
	cut := now.Add(-retention).Unix()
	open := s.openDays()
	for _, d := range slices.Sorted(maps.Keys(s.Folded)) {
		ref := s.Folded[d]
		if ref.written > cut || s.isOpen(d) {
			continue // a late call of the day waits to be folded first
		}
		kb, err := keys(d, ref)
		if err != nil {
			skipped = append(skipped, fmt.Errorf("prune day %s: %w", DayString(d), err))
			continue
		}
		for i := 0; i+tracemsg.KeySize <= len(kb); i += tracemsg.KeySize {
			delete(s.Keys, tracemsg.Key(kb[i:i+tracemsg.KeySize]))
		}
		delete(s.Folded, d)
		s.addPruned(d)
		days = append(days, d)
	}
	if len(days) == 0 {
		return nil, skipped
	}
	kept := open
	for d := range s.Folded {
		kept = append(kept, d)
	}
	for digest, span := range s.segDays {
		if !slices.ContainsFunc(kept, func(d int32) bool { return d >= span[0] && d <= span[1] }) {
			delete(s.Segs, digest)
			delete(s.segDays, digest)
		}
	}
	return days, skipped
}

// PruneDue reports whether PruneDays(now, retention) would prune a day:
// a partition that receives nothing still drops its days at the
// retention (the flush tick snapshots it).
func (s *State) PruneDue(now time.Time, retention time.Duration) bool {
	if retention <= 0 {
		return false
	}
	cut := now.Add(-retention).Unix()
	for d, ref := range s.Folded {
		if ref.written <= cut && !s.isOpen(d) {
			return true
		}
	}
	return false
}

// isOpen reports whether day d has state in memory (runs, dropped calls
// or keys): one of openDays.
func (s *State) isOpen(d int32) bool {
	_, runs := s.Runs[d]
	_, dropped := s.dropped[d]
	_, keys := s.dayKeys[d]
	return d != noDay && (runs || dropped || keys)
}

// addPruned adds day to the pruned ranges, merging neighbours.
func (s *State) addPruned(day int32) {
	i, _ := slices.BinarySearchFunc(s.Pruned, day, func(r dayRange, d int32) int { return cmp.Compare(r.lo, d) })
	s.Pruned = slices.Insert(s.Pruned, i, dayRange{day, day})
	merged := s.Pruned[:0]
	for _, r := range s.Pruned {
		if n := len(merged); n > 0 && int64(merged[n-1].hi)+1 >= int64(r.lo) {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	s.Pruned = merged
}
