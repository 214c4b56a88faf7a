package segment

import (
	"fmt"
	"testing"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/tracegen"
)

// BenchmarkScanDictionarySize scans the reduction's columns of one
// 400,000-row segment (two 200,000-row row groups) with a warm Scanner
// whose tables already hold every string, as a directory replay meets
// later row groups: with ~1,000 runs in flight (run_id dictionaries of a
// few thousand entries) and with every run in flight (~85,000 entries per
// dictionary). The per-row cost (ns/row) is a slice index per row plus the
// dictionary mapped once per row group; allocs/row is the allocations of a
// pass (file, footer, pages) over its rows: 0 to many decimals, none per row.
// Each shape is read through the fast path for string chunks (dictChunk)
// and through parquet-go's pages alone (generic).
func BenchmarkScanDictionarySize(b *testing.B) {
	fields := calls.Fields(calls.FieldTSMillis, calls.FieldRunID, calls.FieldDecision, calls.FieldCostMicroUSD,
		calls.FieldStep, calls.FieldAgentID, calls.FieldOutcome)
	for _, shape := range []struct {
		name            string
		meanCalls, live int
		all             bool
	}{{"in-flight-1000", 100, 1000, false}, {"in-flight-all", 4, 0, true}} {
		dir := b.TempDir()
		o := tracegen.DefaultFleetOptions()
		o.Rows, o.SegmentRows, o.RowGroupRows = 400_000, 400_000, 200_000
		o.MeanCallsPerRun, o.Concurrent, o.AllInFlight = shape.meanCalls, shape.live, shape.all
		if _, err := tracegen.GenerateFleet(dir, o); err != nil {
			b.Fatal(err)
		}
		for _, generic := range []bool{false, true} {
			name := shape.name + "/fast"
			if generic {
				name = shape.name + "/generic"
			}
			benchScan(b, name, dir, fields, generic)
		}
	}
}

func benchScan(b *testing.B, name, dir string, fields calls.FieldSet, generic bool) {
	b.Run(name, func(b *testing.B) {
		segs, _, err := List(dir)
		if err != nil || len(segs) != 1 {
			b.Fatal(len(segs), err)
		}
		runs, syms := calls.NewSymbols(), calls.NewSymbols()
		sc := NewScanner(fields, runs, syms)
		sc.generic = generic
		var rows int64
		var sum int64
		pass := func() {
			rows = 0
			if err := sc.ScanFile(segs[0].Path, func(bt *calls.Batch) error {
				rows += int64(bt.Len)
				for _, id := range bt.RunID[:bt.Len] {
					sum += int64(id)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		pass()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			pass()
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*rows), "ns/row")
		b.ReportMetric(testing.AllocsPerRun(1, pass)/float64(rows), "allocs/row")
		b.ReportMetric(float64(runs.Len()-1), "runs")
		_ = fmt.Sprint(sum)
	})
}
