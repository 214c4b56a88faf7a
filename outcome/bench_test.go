package outcome

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/verdryx/verdryx/calls"
)

// BenchmarkAddBatch folds 4096-row batches whose rows hit runs at random,
// with 1,000 and 100,000 runs: the per-row cost of the hot path and how it
// grows with the runs' working set (cache misses, not work). 0 allocs.
func BenchmarkAddBatch(b *testing.B) {
	for _, nRuns := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("runs=%d", nRuns), func(b *testing.B) {
			r, _ := NewReducer(Options{})
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range nRuns {
				r.RunSymbols().InternString(fmt.Sprintf("run-%08d", i))
			}
			dec := []int32{r.Symbols().InternString("allow"), r.Symbols().InternString("killed")}
			out := r.Symbols().InternString("case_resolved")
			agent := r.Symbols().InternString("agent://x/a")
			const n = 4096
			bt := calls.Batch{Len: n, HasRunID: true, TSMillis: make([]int64, n), RunID: make([]int32, n),
				Decision: make([]int32, n), CostMicroUSD: make([]int64, n), Step: make([]uint32, n),
				AgentID: make([]int32, n), Outcome: make([]int32, n)}
			for i := range n {
				bt.TSMillis[i] = int64(i)
				bt.RunID[i] = int32(1 + rng.IntN(nRuns))
				bt.Decision[i] = dec[rng.IntN(20)/19]
				bt.CostMicroUSD[i] = int64(rng.IntN(1000))
				bt.Step[i] = uint32(i)
				bt.AgentID[i] = agent
				if rng.IntN(100) == 0 {
					bt.Outcome[i] = out
				}
			}
			batches := make([][]int32, 64)
			for k := range batches {
				batches[k] = make([]int32, n)
				for i := range n {
					batches[k][i] = int32(1 + rng.IntN(nRuns))
				}
			}
			r.AddBatch(&bt)
			b.ReportAllocs()
			b.ResetTimer()
			for k := 0; b.Loop(); k++ {
				bt.RunID = batches[k%len(batches)]
				r.AddBatch(&bt)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}
