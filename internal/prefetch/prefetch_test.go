package prefetch

import (
	"testing"
	"unsafe"
)

// TestHintsNeverFault: hints over every length the loops handle, with
// indexes and hashes that name addresses far outside any allocation (and
// a nil base), return without touching memory or faulting; the arrays
// hinted are unchanged.
func TestHintsNeverFault(t *testing.T) {
	states := make([][64]byte, 16)
	states[3][0] = 7
	base := unsafe.Pointer(&states[0])
	for n := range 40 {
		idxs := make([]int32, n)
		hashes := make([]uint64, n)
		for i := range idxs {
			idxs[i] = int32(i*7919) - 1<<20 // negative and far past the end
			hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
		}
		Indexed(base, idxs, 6)
		Indexed(nil, idxs, 6)
		Hashed(base, hashes, 1<<40-1, 5)
		Hashed(nil, hashes, ^uint64(0), 0)
	}
	Indexed(base, nil, 6)
	Hashed(base, nil, 15, 5)
	if states[3][0] != 7 {
		t.Fatal("a hint changed memory")
	}
}

// BenchmarkRandomStates folds a counter into 64-byte states picked at
// random from 6.4 MB (100,000 runs' states), with and without hinting the
// next chunk's states: ns per row.
func BenchmarkRandomStates(b *testing.B) {
	const nStates, rows, ahead = 100_000, 4096, 256
	states := make([][8]uint64, nStates)
	var idx [64][rows]int32
	x := uint32(1)
	for k := range idx {
		for i := range idx[k] {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			idx[k][i] = int32(x % nStates)
		}
	}
	for _, hint := range []bool{false, true} {
		name := "plain"
		if hint {
			name = "hinted"
		}
		b.Run(name, func(b *testing.B) {
			base := unsafe.Pointer(&states[0])
			for k := 0; b.Loop(); k++ {
				run := idx[k%len(idx)][:]
				if hint {
					Indexed(base, run[:ahead], 6)
				}
				for i, r := range run {
					if hint && i%ahead == 0 && i+ahead < rows {
						Indexed(base, run[i+ahead:min(rows, i+2*ahead)], 6)
					}
					states[r][0]++
					states[r][1] += uint64(i)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}
