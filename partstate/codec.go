package partstate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/verdryx/verdryx/internal/wire"
	"github.com/verdryx/verdryx/tracemsg"
)

// encode appends a run state: calls, blocked, refused, cost (zig-zag),
// newest ts (zig-zag), then the outcome, its step and order, and the agent,
// its step and order (orders as four varints).
func (a *runAgg) encode(b []byte) []byte {
	b = binary.AppendUvarint(b, a.Calls)
	b = binary.AppendUvarint(b, a.Blocked)
	b = binary.AppendUvarint(b, a.Refused)
	b = binary.AppendVarint(b, a.Cost)
	b = binary.AppendVarint(b, a.LastTS)
	b = appendString(b, a.Outcome.Value)
	b = binary.AppendUvarint(b, uint64(a.Outcome.Step))
	b = appendOrder(b, a.Outcome.Pos)
	b = appendString(b, a.Agent.Value)
	b = binary.AppendUvarint(b, uint64(a.Agent.Step))
	return appendOrder(b, a.Agent.Pos)
}

func appendOrder(b []byte, o Order) []byte {
	for _, w := range o {
		b = binary.AppendUvarint(b, w)
	}
	return b
}

func (d *decoder) order() Order {
	var o Order
	for i := range o {
		o[i] = d.Uvarint()
	}
	return o
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads what the encoders above wrote; the first error sticks.
type decoder struct{ wire.Reader }

func (d *decoder) uint32() uint32 {
	v := d.Uvarint()
	if v > 1<<32-1 && d.Err == nil {
		d.Err = fmt.Errorf("%d overflows uint32", v)
	}
	return uint32(v)
}

func decodeRunAgg(b []byte) (runAgg, error) {
	d := decoder{wire.Reader{B: b}}
	var a runAgg
	a.Calls, a.Blocked, a.Refused = d.Uvarint(), d.Uvarint(), d.Uvarint()
	a.Cost, a.LastTS = d.Varint(), d.Varint()
	a.Outcome.Value = string(d.Bytes(math.MaxUint64))
	a.Outcome.Step, a.Outcome.Pos = d.uint32(), d.order()
	a.Agent.Value = string(d.Bytes(math.MaxUint64))
	a.Agent.Step, a.Agent.Pos = d.uint32(), d.order()
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%d trailing bytes", len(d.B))
	}
	if d.Err == nil && (a.Blocked > a.Refused || a.Refused > a.Calls) {
		d.Err = errors.New("inconsistent call counts")
	}
	if d.Err != nil {
		return runAgg{}, fmt.Errorf("run state: %w", d.Err)
	}
	return a, nil
}

// Snapshot and aggregate encoding: see docs/formats.md, "Partition
// snapshot". snapMagic leads both; a blob with another magic is refused.
var snapMagic = []byte("VDXSNAP1")

// EncodeBoth encodes the snapshot and the aggregate in one pass over the
// run states, into buf (reused when large enough): both share everything
// up to the row sets. The results alias the returned buffer.
func (s *State) EncodeBoth(buf []byte) (snap, agg, out []byte) {
	b := s.appendHead(append(buf[:0], snapMagic...))
	b = s.appendRuns(b, nil)
	b = s.appendDays(b)
	common := len(b)
	b = s.appendSegs(b)
	b = s.appendKeys(b, nil)
	// The snapshot, then a copy of the shared prefix and the aggregate's
	// empty row sets and key days after it, in the same buffer.
	snapEnd := len(b)
	b = append(b, b[:common]...)
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, 0)
	return b[:snapEnd:snapEnd], b[snapEnd:], b
}

// appendHead appends the partition, partition count, last applied stream
// sequence, watermark and late calls.
func (s *State) appendHead(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(s.Part))
	b = binary.AppendUvarint(b, uint64(s.Parts))
	b = binary.AppendUvarint(b, s.LastSeq)
	b = binary.AppendVarint(b, s.watermark)
	return binary.AppendUvarint(b, s.late)
}

// appendRuns appends the count and the run partial states for which keep
// (nil: every one) is true, in map order: a snapshot is read into maps,
// and sorting the open days' names at every snapshot cost a third of
// encoding them.
func (s *State) appendRuns(b []byte, keep func(*runAgg) bool) []byte {
	n := 0
	for _, runs := range s.Runs {
		if keep == nil {
			n += len(runs)
			continue
		}
		for _, a := range runs {
			if keep(a) {
				n++
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	var tmp []byte
	for day, runs := range s.Runs {
		for name, a := range runs {
			if keep != nil && !keep(a) {
				continue
			}
			b = binary.AppendVarint(b, int64(day))
			b = appendString(b, name)
			tmp = a.encode(tmp[:0])
			b = binary.AppendUvarint(b, uint64(len(tmp)))
			b = append(b, tmp...)
		}
	}
	return b
}

// appendDays appends the dropped calls per day, the folded days (day,
// revision, calls, written, and the blob's prefix, chunks, digest and
// size) and the pruned day ranges.
func (s *State) appendDays(b []byte) []byte {
	days := slices.Sorted(maps.Keys(s.dropped))
	b = binary.AppendUvarint(b, uint64(len(days)))
	for _, d := range days {
		b = binary.AppendVarint(b, int64(d))
		b = binary.AppendUvarint(b, s.dropped[d])
	}
	days = slices.Sorted(maps.Keys(s.Folded))
	b = binary.AppendUvarint(b, uint64(len(days)))
	for _, d := range days {
		r := s.Folded[d]
		b = binary.AppendVarint(b, int64(d))
		b = binary.AppendUvarint(b, uint64(r.Rev))
		b = binary.AppendUvarint(b, r.calls)
		b = binary.AppendVarint(b, r.written)
		b = appendString(b, r.Blob.Prefix)
		b = binary.AppendUvarint(b, uint64(r.Blob.Chunks))
		b = appendString(b, r.Blob.SHA256)
		b = binary.AppendUvarint(b, uint64(r.Blob.Size))
	}
	b = binary.AppendUvarint(b, uint64(len(s.Pruned)))
	for _, r := range s.Pruned {
		b = binary.AppendVarint(b, int64(r.lo))
		b = binary.AppendVarint(b, int64(r.hi))
	}
	return b
}

// appendSegs appends the segment row sets sorted by digest, each with its
// first and last day.
func (s *State) appendSegs(b []byte) []byte {
	digests := slices.SortedFunc(maps.Keys(s.Segs), func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	b = binary.AppendUvarint(b, uint64(len(digests)))
	var tmp []byte
	for _, d := range digests {
		b = append(b, d[:]...)
		tmp = s.Segs[d].encode(tmp[:0])
		b = binary.AppendUvarint(b, uint64(len(tmp)))
		b = append(b, tmp...)
		sd, ok := s.segDays[d]
		if !ok {
			sd = [2]int32{noDay, noDay}
		}
		b = binary.AppendVarint(b, int64(sd[0]))
		b = binary.AppendVarint(b, int64(sd[1]))
	}
	return b
}

// appendKeys appends the dedupe keys of the days in memory, per day in
// the order they were committed; with from, only each day's keys after
// its first from[day] bytes (the days with none after them left out).
func (s *State) appendKeys(b []byte, from map[int32]int) []byte {
	days := slices.Sorted(maps.Keys(s.dayKeys))
	if from != nil {
		days = slices.DeleteFunc(days, func(d int32) bool { return len(s.dayKeys[d]) <= from[d] })
	}
	b = binary.AppendUvarint(b, uint64(len(days)))
	for _, d := range days {
		keys := s.dayKeys[d][from[d]:]
		b = binary.AppendVarint(b, int64(d))
		b = binary.AppendUvarint(b, uint64(len(keys)/tracemsg.KeySize))
		b = append(b, keys...)
	}
	return b
}

// checkMagic returns b after magic, or an error naming what leads b
// instead.
func checkMagic(what string, b, magic []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, magic) {
		head := b[:min(len(b), len(magic))]
		return nil, fmt.Errorf("%s: format %q, this build reads %q only", what, head, magic)
	}
	return b[len(magic):], nil
}

// day reads a zig-zag day number.
func (d *decoder) day() int32 {
	v := d.Varint()
	if d.Err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		d.Err = fmt.Errorf("day %d out of range", v)
	}
	return int32(v)
}

// callDay reads the day of calls (a run's, dropped calls', a folded
// day's): never noDay.
func (d *decoder) callDay() int32 {
	v := d.day()
	if d.Err == nil && v == noDay {
		d.Err = fmt.Errorf("day %d out of range for calls", v)
	}
	return v
}

// DecodeState reads an encoded snapshot or aggregate.
func DecodeState(b []byte) (*State, error) {
	body, err := checkMagic("partition snapshot", b, snapMagic)
	if err != nil {
		return nil, err
	}
	d := decoder{wire.Reader{B: body}}
	s, err := d.head()
	if err != nil {
		return nil, err
	}
	if err := d.runs(s); err != nil {
		return nil, err
	}
	d.days(s)
	if err := d.segs(s); err != nil {
		return nil, err
	}
	d.keys(s)
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, fmt.Errorf("partition %d snapshot: %w", s.Part, d.Err)
	}
	return s, nil
}

// head reads what appendHead wrote into a new state.
func (d *decoder) head() (*State, error) {
	part, parts := d.Uvarint(), d.Uvarint()
	if d.Err == nil && (parts == 0 || parts > 1<<16 || part >= parts) {
		d.Err = fmt.Errorf("partition %d of %d", part, parts)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("partition snapshot: %w", d.Err)
	}
	s := NewState(int(part), int(parts))
	s.LastSeq = d.Uvarint()
	s.watermark, s.late = d.Varint(), d.Uvarint()
	return s, nil
}

// runs reads what appendRuns wrote into s.
func (d *decoder) runs(s *State) error {
	n := d.Uvarint()
	for i := uint64(0); i < n && d.Err == nil; i++ {
		day := d.callDay()
		name := string(d.Bytes(math.MaxUint64))
		st := d.Bytes(math.MaxUint64)
		if d.Err != nil {
			break
		}
		a, err := decodeRunAgg(st)
		if err != nil {
			return fmt.Errorf("partition %d snapshot: %w", s.Part, err)
		}
		s.addRun(day, name, &a)
	}
	return nil
}

// days reads what appendDays wrote into s.
func (d *decoder) days(s *State) {
	for i, n := uint64(0), d.Uvarint(); i < n && d.Err == nil; i++ {
		day := d.callDay()
		s.dropped[day] = d.Uvarint()
	}
	for i, n := uint64(0), d.Uvarint(); i < n && d.Err == nil; i++ {
		day := d.callDay()
		r := &DayRef{Rev: d.uint32(), calls: d.Uvarint(), written: d.Varint()}
		r.Blob.Prefix = string(d.Bytes(math.MaxUint64))
		r.Blob.Chunks = int(d.uint32())
		r.Blob.SHA256 = string(d.Bytes(math.MaxUint64))
		r.Blob.Size = int(d.uint32())
		s.Folded[day] = r
	}
	for i, n := uint64(0), d.Uvarint(); i < n && d.Err == nil; i++ {
		s.Pruned = append(s.Pruned, dayRange{d.day(), d.day()})
	}
}

// segs reads what appendSegs wrote into s.
func (d *decoder) segs(s *State) error {
	for i, n := uint64(0), d.Uvarint(); i < n && d.Err == nil; i++ {
		if len(d.B) < 32 {
			d.Err = errors.New("truncated segment digest")
			break
		}
		digest := [32]byte(d.B[:32])
		d.B = d.B[32:]
		st := d.Bytes(math.MaxUint64)
		days := [2]int32{d.day(), d.day()}
		if d.Err != nil {
			break
		}
		r, err := decodeRowSet(st)
		if err != nil {
			return fmt.Errorf("partition %d snapshot: %w", s.Part, err)
		}
		s.Segs[digest] = r
		if days[0] != noDay {
			s.segDays[digest] = days
		}
	}
	return nil
}

// keys reads what appendKeys wrote into s (appended to its days' keys;
// keys s has already are skipped).
func (d *decoder) keys(s *State) {
	for i, n := uint64(0), d.Uvarint(); i < n && d.Err == nil; i++ {
		day := d.day()
		nk := d.Uvarint()
		if d.Err == nil && nk > uint64(len(d.B))/tracemsg.KeySize {
			d.Err = fmt.Errorf("%d keys in %d bytes", nk, len(d.B))
		}
		if d.Err != nil {
			break
		}
		kb := d.B[:nk*tracemsg.KeySize]
		d.B = d.B[nk*tracemsg.KeySize:]
		if s.dayKeys[day] == nil {
			s.dayKeys[day] = make([]byte, 0, len(kb))
		}
		for j := 0; j < len(kb); j += tracemsg.KeySize {
			s.loadKey(tracemsg.Key(kb[j:j+tracemsg.KeySize]), day)
		}
	}
}
