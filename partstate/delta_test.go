package partstate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/tracemsg"
)

// stateView is what a partition state holds, comparable (gen aside).
type stateView struct {
	LastSeq, Late uint64
	Watermark     int64
	Runs          map[runKey]runAgg
	Dropped       map[int32]uint64
	Folded        map[int32]DayRef
	Pruned        []dayRange
	Segs          map[[32]byte]string
	SegDays       map[[32]byte][2]int32
	DayKeys       map[int32][]byte
	Keys          int
}

func viewOf(s *State) stateView {
	v := stateView{LastSeq: s.LastSeq, Late: s.late, Watermark: s.watermark,
		Runs: map[runKey]runAgg{}, Dropped: map[int32]uint64{}, Folded: map[int32]DayRef{},
		Pruned: slices.Clone(s.Pruned), Segs: map[[32]byte]string{}, SegDays: map[[32]byte][2]int32{},
		DayKeys: map[int32][]byte{}, Keys: len(s.Keys)}
	for day, runs := range s.Runs {
		for name, a := range runs {
			c := *a
			c.gen = 0
			v.Runs[runKey{day, name}] = c
		}
	}
	for d, n := range s.dropped {
		v.Dropped[d] = n
	}
	for d, r := range s.Folded {
		v.Folded[d] = *r
	}
	for d, r := range s.Segs {
		v.Segs[d] = fmt.Sprint(r)
	}
	for d, r := range s.segDays {
		v.SegDays[d] = r
	}
	for d, kb := range s.dayKeys {
		if len(kb) > 0 {
			v.DayKeys[d] = kb
		}
	}
	return v
}

// TestDeltaChainRebuildsTheState: calls applied over six days, mostly in
// time order with late ones, messages rolled back, segment rows recorded,
// days folded (and corrected by late calls) and pruned as a clock moves;
// after each step a snapshot is written, a base now and then and a delta
// otherwise, and the base with the deltas after it decodes to exactly the
// state (runs, dropped calls, folded and pruned days, row sets, keys).
func TestDeltaChainRebuildsTheState(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 41))
		cs := calltest.RandomDayCalls(rng, 2400, 6)
		slices.SortFunc(cs, func(a, b calls.Call) int { return int(a.TSMillis>>20) - int(b.TSMillis>>20) })
		for i := range cs { // a tenth arrive late: swapped with a call far later
			if j := i + 200 + rng.IntN(400); rng.IntN(10) == 0 && j < len(cs) {
				cs[i], cs[j] = cs[j], cs[i]
			}
		}
		s := NewState(0, 1)
		loads := memLoad{}
		var base []byte
		var chain [][]byte
		deltas, bases := 0, 0
		now := calltest.Day0
		for from, step := 0, 0; from < len(cs); step++ {
			n := min(len(cs)-from, 1+rng.IntN(120))
			for i := from; i < from+n; i++ {
				c := cs[i]
				key := fmt.Sprintf("call-%d", i)
				s.Begin()
				s.LastSeq++
				require.NoError(t, s.Apply(tracemsg.HashKey(key), &c, RecordOrder(c.TSMillis, key)))
				if rng.IntN(25) == 0 { // a message that fails: undone
					s.Rollback()
					s.LastSeq--
					i--
					continue
				}
				if rng.IntN(40) == 0 {
					var digest [32]byte
					digest[0] = byte(rng.IntN(4))
					lo := uint64(rng.IntN(1000))
					s.AddRows(digest, lo, lo+uint64(rng.IntN(50)))
				}
			}
			from += n
			s.Settle(true)
			now = now.Add(time.Duration(rng.IntN(10)) * time.Hour)
			tables, skipped := s.FoldDays(now, time.Hour, loads.load)
			require.Empty(t, skipped)
			loads.keep(tables)
			_, skipped = s.PruneDays(now, 2*24*time.Hour, loads.keys)
			require.Empty(t, skipped)
			if base == nil || rng.IntN(6) == 0 {
				snap, _, _ := s.EncodeBoth(nil)
				base, chain = bytes.Clone(snap), nil
				bases++
			} else {
				chain = append(chain, bytes.Clone(s.EncodeDelta(nil)))
				deltas++
			}
			s.Wrote(s.Gen)
			got, err := DecodeState(base)
			require.NoError(t, err)
			require.NoError(t, got.ApplyDeltas(chain), "seed %d step %d", seed, step)
			// The keys of the folded days come from their tables.
			for d := range got.Folded {
				tb, err := loads.load(d, got.Folded[d])
				require.NoError(t, err)
				got.addFoldedKeys(tb)
			}
			require.Equal(t, viewOf(s), viewOf(got), "seed %d step %d: base and %d deltas", seed, step, len(chain))
		}
		require.NotZero(t, deltas)
		require.NotZero(t, bases)
		require.NotEmpty(t, s.Pruned, "seed %d: the clock reached the retention", seed)
	}
}

// TestADeltaCostsWhatChanged: after a base of 5,000 runs, a delta for one
// changed run and one key is a small fraction of it, and a delta with
// nothing changed holds no run.
func TestADeltaCostsWhatChanged(t *testing.T) {
	s := NewState(0, 1)
	rng := rand.New(rand.NewPCG(3, 3))
	cs := calltest.RandomDayCalls(rng, 5000, 1)
	for i := range cs {
		cs[i].RunID, cs[i].HasRunID = fmt.Sprintf("run-%05d", i), true
	}
	applyAll(t, s, cs, 0)
	snap, _, _ := s.EncodeBoth(nil)
	s.Wrote(s.Gen)
	d := s.EncodeDelta(nil)
	got, _, err := decodeDelta(d)
	require.NoError(t, err)
	require.Zero(t, got.RunCount(), "nothing changed")
	require.Empty(t, got.dayKeys)

	c := cs[0]
	c.RunID = "run-00007"
	s.Begin()
	require.NoError(t, s.Apply(tracemsg.HashKey("one more"), &c, RecordOrder(c.TSMillis, "one more")))
	s.Settle(true)
	d = s.EncodeDelta(nil)
	got, _, err = decodeDelta(d)
	require.NoError(t, err)
	require.Equal(t, 1, got.RunCount())
	require.Len(t, got.dayKeys[DayOf(c.TSMillis)], tracemsg.KeySize)
	require.Less(t, len(d)*100, len(snap), "delta %d bytes, base %d", len(d), len(snap))
}

// deltasNamed returns, per partition, how many deltas its pointer names,
