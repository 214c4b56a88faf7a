package partstate

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/verdryx/verdryx/internal/wire"
	"github.com/verdryx/verdryx/tracemsg"
)

// Delta snapshots. A partition's snapshot is a base (the whole state,
// EncodeBoth) followed by deltas: each holds what changed since the
// snapshot before it (base or delta), so its cost follows the rate of
// change, not the state's size. A delta holds the partition's head (last
// stream sequence, flags, watermark, late calls), the run partial states
// changed since (whole: applying one replaces the run's state), the days
// in memory (a day not among them was folded since: its runs and keys
// leave the state), the small per-day parts whole (dropped calls, folded
// days, pruned ranges, segment row sets) and the dedupe keys committed
// since. Applied in order to the base, the deltas give exactly the state
// the last one was written from (TestDeltaChainRebuildsTheState). A new
// base is written (compaction) when the deltas since the last one would
// hold more than half of the state's runs and keys, after the consumer's limit of
// deltas (fleet), and at the first snapshot after the state was loaded.
//
// Encoding: see docs/formats.md, "Partition delta". A blob with another
// magic than deltaMagic is refused.
var deltaMagic = []byte("VDXDLTA1")

// memDays returns the days with runs or keys in memory, ascending.
func (s *State) memDays() []int32 {
	days := map[int32]struct{}{}
	for d := range s.Runs {
		days[d] = struct{}{}
	}
	for d := range s.dayKeys {
		days[d] = struct{}{}
	}
	return slices.Sorted(maps.Keys(days))
}

// Dirty returns the run partial states changed since the last snapshot
// written, and the keys committed since.
func (s *State) Dirty() (runs, keys int) {
	for _, day := range s.Runs {
		for _, a := range day {
			if a.gen > s.snapGen {
				runs++
			}
		}
	}
	return runs, len(s.deltaKeys)
}

// Size returns the run partial states and the keys of the days in memory.
func (s *State) Size() (runs, keys int) {
	for _, kb := range s.dayKeys {
		keys += len(kb) / tracemsg.KeySize
	}
	return s.RunCount(), keys
}

// EncodeDelta encodes what changed since the last snapshot written (see
// Wrote) into buf (reused when large enough).
func (s *State) EncodeDelta(buf []byte) []byte {
	b := s.appendHead(append(buf[:0], deltaMagic...))
	since := s.snapGen
	b = s.appendRuns(b, func(a *runAgg) bool { return a.gen > since })
	days := s.memDays()
	b = binary.AppendUvarint(b, uint64(len(days)))
	for _, d := range days {
		b = binary.AppendVarint(b, int64(d))
	}
	b = s.appendDays(b)
	b = s.appendSegs(b)
	keys := slices.Clone(s.deltaKeys)
	slices.SortStableFunc(keys, func(a, b dayKey) int { return cmp.Compare(a.day, b.day) })
	b = binary.AppendUvarint(b, uint64(countDays(keys)))
	for i := 0; i < len(keys); {
		j := i
		for j < len(keys) && keys[j].day == keys[i].day {
			j++
		}
		b = binary.AppendVarint(b, int64(keys[i].day))
		b = binary.AppendUvarint(b, uint64(j-i))
		for _, k := range keys[i:j] {
			b = append(b, k.key[:]...)
		}
		i = j
	}
	return b
}

// countDays counts the runs of equal days in keys (sorted by day).
func countDays(keys []dayKey) int {
	n := 0
	for i := range keys {
		if i == 0 || keys[i].day != keys[i-1].day {
			n++
		}
	}
	return n
}

// Wrote records that a snapshot encoded at gen (s.gen then) is written:
// the next delta holds what changed after it.
func (s *State) Wrote(gen uint64) {
	s.snapGen = gen
	clear(s.deltaKeys)
	s.deltaKeys = s.deltaKeys[:0]
}

// decodeDelta reads an encoded delta into a state holding only what it
// carries, and the days it names in memory.
func decodeDelta(b []byte) (*State, []int32, error) {
	body, err := checkMagic("partition delta", b, deltaMagic)
	if err != nil {
		return nil, nil, err
	}
	d := decoder{wire.Reader{B: body}}
	s, err := d.head()
	if err != nil {
		return nil, nil, err
	}
	if err := d.runs(s); err != nil {
		return nil, nil, err
	}
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Err = fmt.Errorf("%d days in %d bytes", n, len(d.B))
	}
	open := make([]int32, 0, min(n, 1<<10))
	for i := uint64(0); i < n && d.Err == nil; i++ {
		open = append(open, d.callDay())
	}
	d.days(s)
	if err := d.segs(s); err != nil {
		return nil, nil, err
	}
	d.keys(s)
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, nil, fmt.Errorf("partition %d delta: %w", s.Part, d.Err)
	}
	return s, open, nil
}

// ApplyDeltas applies encoded deltas, in order, to s (a decoded base that
// has not had its folded days' keys added yet).
func (s *State) ApplyDeltas(deltas [][]byte) error {
	removed := false
	for i, b := range deltas {
		d, open, err := decodeDelta(b)
		if err != nil {
			return fmt.Errorf("delta %d of %d: %w", i+1, len(deltas), err)
		}
		if d.Part != s.Part || d.Parts != s.Parts {
			return fmt.Errorf("delta %d of %d holds partition %d of %d, the base %d of %d", i+1, len(deltas), d.Part, d.Parts, s.Part, s.Parts)
		}
		if d.LastSeq < s.LastSeq {
			return fmt.Errorf("delta %d of %d is at stream sequence %d, before the state's %d", i+1, len(deltas), d.LastSeq, s.LastSeq)
		}
		s.LastSeq, s.watermark, s.late = d.LastSeq, d.watermark, d.late
		for day, runs := range d.Runs {
			for name, a := range runs {
				s.addRun(day, name, a)
			}
		}
		for day, kb := range d.dayKeys {
			for j := 0; j+tracemsg.KeySize <= len(kb); j += tracemsg.KeySize {
				s.loadKey(tracemsg.Key(kb[j:j+tracemsg.KeySize]), day)
			}
		}
		s.dropped, s.Folded, s.Pruned, s.Segs, s.segDays = d.dropped, d.Folded, d.Pruned, d.Segs, d.segDays
		for day := range s.Runs {
			if !slices.Contains(open, day) {
				delete(s.Runs, day)
			}
		}
		for day := range s.dayKeys {
			if !slices.Contains(open, day) {
				delete(s.dayKeys, day)
				removed = true
			}
		}
	}
	if removed { // the keys of the days folded since are in their tables
		clear(s.Keys)
		for _, kb := range s.dayKeys {
			for j := 0; j+tracemsg.KeySize <= len(kb); j += tracemsg.KeySize {
				s.Keys[tracemsg.Key(kb[j:j+tracemsg.KeySize])] = struct{}{}
			}
		}
	}
	return nil
}
