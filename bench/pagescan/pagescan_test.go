package pagescan

import (
	"testing"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/tracegen"
)

// BenchmarkPageScan is the floor outcome/segfold.BenchmarkReduce is compared with: the same
// columns read page by page, values summed, nothing else.
func BenchmarkPageScan(b *testing.B) {
	dir := b.TempDir()
	opts := tracegen.DefaultFleetOptions()
	opts.Rows = 1_000_000
	opts.SegmentRows = 500_000
	opts.RowGroupRows = 250_000
	if _, err := tracegen.GenerateFleet(dir, opts); err != nil {
		b.Fatal(err)
	}
	segs, _, err := segment.List(dir)
	if err != nil {
		b.Fatal(err)
	}
	r, _ := outcome.NewReducer(outcome.Options{})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, s := range segs {
			if _, _, err := scanAll(s.Path, r.Fields()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(opts.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
