package index

import (
	"fmt"
	"testing"
)

// BenchmarkSearch measures exact top-2 search over synthetic Gaussian rows
// at d = 1536 (the width of text-embedding-3-small) for n = 1,000, 10,000 and
// 100,000 (a 586 MiB matrix): one query per op, a batch of 64 per op
// (reported per query as ns/query), and the plain scan that is the
// memory-bandwidth floor.
func BenchmarkSearch(b *testing.B) {
	const d = 1536
	for _, n := range []int{1000, 10000, 100000} {
		idx := randomIndex(b, n, d, 42)
		qs := randomQueries(64, d, 43)
		b.Run(fmt.Sprintf("n=%d/single", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(idx.MatrixBytes())
			i := 0
			for b.Loop() {
				if _, err := idx.Search(qs[i%len(qs)], 2); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("n=%d/batch64", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := idx.SearchBatch(qs, 2); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(qs)), "ns/query")
		})
		b.Run(fmt.Sprintf("n=%d/floor", n), func(b *testing.B) {
			b.SetBytes(idx.MatrixBytes())
			for b.Loop() {
				idx.ScanFloorBytes(idx.MatrixBytes())
			}
		})
	}
}
