package outcome

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/verdryx/verdryx/internal/wire"
)

// State encoding (MarshalBinary), version 1. All integers are varints
// (unsigned uvarint, signed zig-zag varint); a string is a uvarint length
// and its bytes.
//
//	magic "VXRS", version byte 1
//	options: By string; From, To each a flag byte (0 open, 1 set) then
//	  varint Unix seconds and uvarint nanoseconds
//	stats: Calls, OutsideWindow, DroppedUntagged, Records uvarints
//	overflow: the message of Err() ("" none)
//	symbols: count, then the strings the state refers to, sorted, unique,
//	  non-empty; a symbol reference is 0 for "" or 1 + its index here
//	runs: count, then per run, sorted by run id: the byte length shared
//	  with the previous run id and the rest of the id, then runBody, then,
//	  when By is set, count and per group sorted by symbol: symbol, calls,
//	  blocked uvarints, cost varint
//	independent calls: count, then each as runBody preceded by its group
//	  symbol, sorted by their bytes
//	flat records: count, then each outcome symbol and cost varint, sorted
//	  by their bytes
//	CRC-32C (Castagnoli) of everything before, 4 bytes little endian
//
// runBody is calls, blocked, refused uvarints, cost and last ts_millis
// varints, the outcome symbol and, when not 0, its step and position, then
// the agent symbol and, when not 0, its step and position.
const (
	stateMagic   = "VXRS"
	stateVersion = 1
)

// checksum is the CRC-32C of b (crc32 caches the table).
func checksum(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// ErrCorruptState marks state bytes UnmarshalBinary cannot take.
var ErrCorruptState = errors.New("corrupt reducer state")

// MarshalBinary encodes the whole state of r (options, stats, every run,
// independent call, flat record and, with By set, every run x group): what
// Report, SLO and Merge read. The position (SetPos) is a cursor of the
// input, not state: it is not encoded, and a decoded reducer is at 0. Equal states encode to equal bytes
// (runs sorted by id, strings by value), whatever the order calls were
// added in or the symbol ids they got. A reducer with an open transaction
// is refused. The encoding is versioned; see the comment above stateMagic.
// MarshalBinary does not change r.
func (r *Reducer) MarshalBinary() ([]byte, error) {
	if r.tx.open {
		return nil, errors.New("marshal reducer state: a transaction is open (Commit or Rollback first)")
	}
	if r.syms == nil {
		return nil, errors.New("marshal reducer state: reducer not made by NewReducer")
	}
	if r.opts.CostOnly {
		return nil, fmt.Errorf("marshal reducer state: %w", errCostOnly)
	}
	// Symbols referred to, sorted: old id -> reference (0 = "").
	used := make([]bool, r.syms.Len())
	mark := func(rs *runState) {
		used[rs.outcome], used[rs.agent] = true, true
	}
	var live []int32
	for i := range r.runs {
		if r.runs[i].calls > 0 {
			live = append(live, int32(i))
			mark(&r.runs[i])
		}
	}
	for i := range r.anon {
		mark(&r.anon[i])
		used[r.anonGrp[i]] = true
	}
	for i := range r.flat {
		mark(&r.flat[i])
	}
	for k := range r.groups {
		used[int32(uint32(k))] = true
	}
	var names []string
	for id, u := range used {
		if u && id != 0 {
			names = append(names, r.syms.Name(int32(id)))
		}
	}
	slices.Sort(names)
	ref := make([]uint64, len(used))
	for i, n := range names {
		id, _ := r.syms.Lookup(n)
		ref[id] = uint64(i + 1)
	}

	b := make([]byte, 0, 64+len(live)*24)
	b = append(b, stateMagic...)
	b = append(b, stateVersion)
	b = putString(b, r.opts.By)
	b = putTime(b, r.opts.From)
	b = putTime(b, r.opts.To)
	for _, v := range []int64{r.stats.Calls, r.stats.OutsideWindow, r.stats.DroppedUntagged, r.stats.Records} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	var msg string
	if r.err != nil {
		msg = r.err.Error()
	}
	b = putString(b, msg)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = putString(b, n)
	}

	slices.SortFunc(live, func(x, y int32) int { return strings.Compare(r.runSyms.Name(x), r.runSyms.Name(y)) })
	type groupEntry struct {
		sym uint64
		acc *groupAcc
	}
	var byRun map[int32][]groupEntry
	if r.grouped {
		byRun = make(map[int32][]groupEntry, len(live))
		for k, acc := range r.groups {
			run := int32(k >> 32)
			byRun[run] = append(byRun[run], groupEntry{ref[int32(uint32(k))], acc})
		}
	}
	b = binary.AppendUvarint(b, uint64(len(live)))
	prev := ""
	for _, id := range live {
		name := r.runSyms.Name(id)
		shared := commonPrefix(prev, name)
		b = binary.AppendUvarint(b, uint64(shared))
		b = putString(b, name[shared:])
		prev = name
		b = putRunBody(b, &r.runs[id], ref)
		if r.grouped {
			gs := byRun[id]
			slices.SortFunc(gs, func(x, y groupEntry) int { return cmp.Compare(x.sym, y.sym) })
			b = binary.AppendUvarint(b, uint64(len(gs)))
			for _, g := range gs {
				b = binary.AppendUvarint(b, g.sym)
				b = binary.AppendUvarint(b, uint64(g.acc.calls))
				b = binary.AppendUvarint(b, uint64(g.acc.blocked))
				b = binary.AppendVarint(b, g.acc.cost)
			}
		}
	}
	b = putSorted(b, len(r.anon), func(e []byte, i int) []byte {
		e = binary.AppendUvarint(e, ref[r.anonGrp[i]])
		return putRunBody(e, &r.anon[i], ref)
	})
	b = putSorted(b, len(r.flat), func(e []byte, i int) []byte {
		e = binary.AppendUvarint(e, ref[r.flat[i].outcome])
		return binary.AppendVarint(e, r.flat[i].cost)
	})
	return binary.LittleEndian.AppendUint32(b, checksum(b)), nil
}

func putString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func putTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func putRunBody(b []byte, rs *runState, ref []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(rs.calls))
	b = binary.AppendUvarint(b, uint64(rs.blocked))
	b = binary.AppendUvarint(b, uint64(rs.refused))
	b = binary.AppendVarint(b, rs.cost)
	b = binary.AppendVarint(b, rs.lastTS)
	b = binary.AppendUvarint(b, ref[rs.outcome])
	if rs.outcome != 0 {
		b = binary.AppendUvarint(b, uint64(rs.outStep))
		b = binary.AppendUvarint(b, rs.outPos)
	}
	b = binary.AppendUvarint(b, ref[rs.agent])
	if rs.agent != 0 {
		b = binary.AppendUvarint(b, uint64(rs.agentStep))
		b = binary.AppendUvarint(b, rs.agentPos)
	}
	return b
}

// putSorted appends n and n entries, entry i encoded by enc, in byte order
// (so the bytes do not depend on the order of adding).
func putSorted(b []byte, n int, enc func([]byte, int) []byte) []byte {
	entries := make([][]byte, n)
	for i := range entries {
		entries[i] = enc(nil, i)
	}
	slices.SortFunc(entries, bytes.Compare)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = append(b, e...)
	}
	return b
}

// restoredError is an overflow error read back from state bytes.
type restoredError struct{ msg string }

func (e *restoredError) Error() string        { return e.msg }
func (e *restoredError) Is(target error) bool { return target == ErrOverflow }

// UnmarshalBinary replaces r's whole state, options included, with the
// state encoded in data by MarshalBinary; r may be a zero Reducer. Bytes
// that are not such a state (bad magic, unknown version, checksum, bounds,
// order or trailing bytes) give an error wrapping ErrCorruptState and leave
// r unchanged; no input makes it panic. To combine a snapshot with a live
// reducer, unmarshal into a new Reducer and Merge it.
func (r *Reducer) UnmarshalBinary(data []byte) error {
	if len(data) < len(stateMagic)+1+4 {
		return fmt.Errorf("%w: %d bytes", ErrCorruptState, len(data))
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if string(body[:len(stateMagic)]) != stateMagic {
		return fmt.Errorf("%w: not a reducer state", ErrCorruptState)
	}
	if v := body[len(stateMagic)]; v != stateVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrCorruptState, v, stateVersion)
	}
	if checksum(body) != sum {
		return fmt.Errorf("%w: checksum mismatch", ErrCorruptState)
	}
	nr, err := decodeState(body[len(stateMagic)+1:])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	*r = *nr
	return nil
}

// decoder reads the varint encoding, keeping the first error, which
// names what was being read.
type decoder struct{ wire.Reader }

// bounded reads a uvarint that must be at most limit.
// named runs read, naming what in the first error it causes.
func named[T any](d *decoder, what string, read func() T) T {
	if d.Err != nil {
		var zero T
		return zero
	}
	v := read()
	if d.Err != nil {
		d.Err = fmt.Errorf("%s: %w", what, d.Err)
	}
	return v
}

func (d *decoder) uvarint(what string) uint64 { return named(d, what, d.Uvarint) }

func (d *decoder) varint(what string) int64 { return named(d, what, d.Varint) }

func (d *decoder) byte(what string) byte { return named(d, what, d.Byte) }

func (d *decoder) bounded(what string, limit uint64) uint64 {
	v := d.uvarint(what)
	if v > limit {
		d.Fail("%s: %d out of range [0, %d]", what, v, limit)
		return 0
	}
	return v
}

// count reads a list length: each entry takes at least one byte.
func (d *decoder) count(what string) int {
	v := d.uvarint(what)
	if v > uint64(len(d.B)) {
		d.Fail("%s: %d, more than the %d bytes left", what, v, len(d.B))
		return 0
	}
	return int(v)
}

func (d *decoder) str(what string) string {
	n := d.count(what)
	if d.Err != nil {
		return ""
	}
	s := string(d.B[:n])
	d.B = d.B[n:]
	return s
}

func (d *decoder) time(what string) time.Time {
	switch d.byte(what) {
	case 0:
		return time.Time{}
	case 1:
		sec := d.varint(what)
		nsec := d.bounded(what, 999_999_999)
		t := time.Unix(sec, int64(nsec)).UTC()
		if t.IsZero() {
			d.Fail("%s: the zero time marked as set", what)
		}
		return t
	}
	d.Fail("%s: bad flag", what)
	return time.Time{}
}

// runBody reads a runBody, symbol references mapped through syms.
func (d *decoder) runBody(rs *runState, syms []int32) {
	rs.calls = uint32(d.bounded("calls", math.MaxUint32))
	rs.blocked = uint32(d.bounded("blocked calls", uint64(rs.calls)))
	rs.refused = uint32(d.bounded("refused calls", uint64(rs.calls)))
	if d.Err == nil && (rs.calls == 0 || rs.refused < rs.blocked) {
		d.Fail("run counts: %d calls, %d blocked, %d refused", rs.calls, rs.blocked, rs.refused)
	}
	rs.cost = d.varint("cost")
	rs.lastTS = d.varint("last ts_millis")
	rs.outcome = syms[d.bounded("outcome symbol", uint64(len(syms)-1))]
	if rs.outcome != 0 {
		rs.outStep = uint32(d.bounded("outcome step", math.MaxUint32))
		rs.outPos = d.uvarint("outcome position")
	}
	rs.agent = syms[d.bounded("agent symbol", uint64(len(syms)-1))]
	if rs.agent != 0 {
		rs.agentStep = uint32(d.bounded("agent step", math.MaxUint32))
		rs.agentPos = d.uvarint("agent position")
	}
}

// decodeState decodes the body after magic and version into a new reducer.
func decodeState(body []byte) (*Reducer, error) {
	d := &decoder{wire.Reader{B: body}}
	var opts Options
	opts.By = d.str("by")
	opts.From = d.time("from")
	opts.To = d.time("to")
	if d.Err != nil {
		return nil, d.Err
	}
	r, err := NewReducer(opts)
	if err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	var st [4]int64
	for i := range st {
		st[i] = int64(d.bounded("stats", math.MaxInt64))
	}
	r.stats = Stats{Calls: st[0], OutsideWindow: st[1], DroppedUntagged: st[2], Records: st[3]}
	if msg := d.str("overflow"); msg != "" {
		r.err = &restoredError{msg}
	}
	n := d.count("symbols")
	syms := make([]int32, 1, n+1) // reference -> symbol id
	prev := ""
	for i := range n {
		s := d.str("symbol")
		if d.Err != nil {
			break
		}
		if s == "" || (i > 0 && s <= prev) {
			d.Fail("symbols: not sorted, unique and non-empty at %d", i)
			break
		}
		prev = s
		syms = append(syms, r.syms.InternString(s))
	}
	if d.Err != nil {
		return nil, d.Err
	}
	r.sync()

	nRuns := d.count("runs")
	prev = ""
	for i := 0; i < nRuns && d.Err == nil; i++ {
		shared := int(d.bounded("run id prefix", uint64(len(prev))))
		rest := d.str("run id")
		if d.Err != nil {
			break
		}
		name := prev[:shared] + rest
		if i > 0 && name <= prev {
			d.Fail("runs: not sorted and unique at %d", i)
			break
		}
		prev = name
		id := r.runSyms.InternString(name)
		r.sync()
		rs := &r.runs[id]
		d.runBody(rs, syms)
		if !r.grouped {
			continue
		}
		ng := d.count("groups")
		last := uint64(0)
		for j := 0; j < ng && d.Err == nil; j++ {
			ref := d.bounded("group symbol", uint64(len(syms)-1))
			if j > 0 && ref <= last {
				d.Fail("run %q: groups not sorted and unique", name)
				break
			}
			last = ref
			acc := &groupAcc{}
			acc.calls = int64(d.bounded("group calls", uint64(rs.calls)))
			acc.blocked = int64(d.bounded("group blocked calls", uint64(acc.calls)))
			acc.cost = d.varint("group cost")
			r.groups[uint64(id)<<32|uint64(uint32(syms[ref]))] = acc
		}
	}
	nAnon := d.count("independent calls")
	for i := 0; i < nAnon && d.Err == nil; i++ {
		var rs runState
		grp := syms[d.bounded("group symbol", uint64(len(syms)-1))]
		d.runBody(&rs, syms)
		r.anon = append(r.anon, rs)
		r.anonGrp = append(r.anonGrp, grp)
	}
	nFlat := d.count("flat records")
	for i := 0; i < nFlat && d.Err == nil; i++ {
		rs := runState{calls: 1}
		rs.outcome = syms[d.bounded("record outcome", uint64(len(syms)-1))]
		rs.cost = d.varint("record cost")
		r.flat = append(r.flat, rs)
	}
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, d.Err
	}
	r.sync()
	return r, nil
}
