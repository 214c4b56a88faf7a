package fleet

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/testkit/calltest"
)

// benchBatches encodes rows rows of the shape `bench traces` calls "every
// run in flight" into compressed row batches of one partition of one:
// runs runs, round robin (a 4,096-row batch names 4,096 runs), each run's
// ~100 calls spread over 28 days, its outcome on its last call.
func benchBatches(rows, runs int) [][]byte {
	var b rowbatch.Builder
	runSyms, syms := calls.NewSymbols(), calls.NewSymbols()
	steps := rows / runs
	const base = int64(1_780_000_000_000)
	decisions := []string{"allow", "allow", "allow", "allow", "budget_exceeded", "wardryx_deny"}
	var out [][]byte
	var pending []calls.Call
	flush := func(first uint64) {
		if len(pending) == 0 {
			return
		}
		calltest.AppendCalls(&b, pending, first, runSyms, syms)
		pending = pending[:0]
		h := rowbatch.Header{Segment: "bench.parquet", Parts: 1, Part: 0}
		h.Digest[0] = 24
		enc := b.Encode(nil, h, calls.Fields(calls.FieldTSMillis, calls.FieldRunID, calls.FieldDecision, calls.FieldCostMicroUSD,
			calls.FieldStep, calls.FieldAgentID, calls.FieldOutcome), 0, b.Len(), runSyms, syms)
		out = append(out, rowbatch.Compress(nil, enc))
		b.Reset()
	}
	for i := range rows {
		run, step := i%runs, i/runs
		c := calls.Call{TSMillis: base + int64(step)*28*partstate.DayMillis/int64(steps) + int64(run)*1000, RunID: fmt.Sprintf("run-%08d-%x", run, run*7919),
			HasRunID: true, Decision: decisions[(run+step)%len(decisions)], CostMicroUSD: int64(100 + run%977), Step: uint32(step), HasStep: true,
			AgentID: fmt.Sprintf("agent-%d", run%7)}
		if step == steps-1 {
			c.Outcome = []string{"case_resolved", "escalated", "abandoned"}[run%3]
		}
		pending = append(pending, c)
		if len(pending) == 4096 {
			flush(uint64(i + 1 - len(pending)))
		}
	}
	flush(uint64(rows - len(pending)))
	return out
}

// applyBenchBatches applies batches (of benchBatches) to a fresh
// partition state of one partition, each as the handler applies a
// message, and returns the state.
func applyBenchBatches(b *testing.B, batches [][]byte) *partstate.State {
	return applyBenchBatchesHourly(b, batches, false)
}

// applyBenchBatchesHourly is applyBenchBatches keeping every call by the
// hour when hourly is set.
func applyBenchBatchesHourly(b *testing.B, batches [][]byte, hourly bool) *partstate.State {
	h := &partHandler{f: &Fleet{}, p: 0, subject: "bench"}
	s := partstate.NewState(0, 1)
	s.HoursOn, s.HoursFrom = hourly, 0
	for i, data := range batches {
		s.Begin()
		if err := h.applyBatch(s, data, uint64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
	s.Keep()
	return s
}

// BenchmarkApplyBatch applies 1.2 M rows of 12,500 runs in flight, as
// row batches, to a fresh partition state: the worker's per-row cost,
// with the calls kept by the day (older than the hours kept) and by the
// hour; states/run is the partial states held per run.
func BenchmarkApplyBatch(b *testing.B) {
	const rows, runs = 1_250_000, 12_500
	batches := benchBatches(rows, runs)
	for _, hourly := range []bool{false, true} {
		name := "by-day"
		if hourly {
			name = "by-hour"
		}
		b.Run(name, func(b *testing.B) {
			cpu0 := cpuTime()
			var s *partstate.State
			for range b.N {
				s = applyBenchBatchesHourly(b, batches, hourly)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/rows, "cpu-ns/row")
			b.ReportMetric(float64(s.RunCount())/runs, "states/run")
		})
	}
}

// cpuTime returns the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkReportOfFoldedDays reports on a partition whose 1.2 M rows of
// 12,500 runs in flight over 28 days are folded into day tables: what
// `serve --once`, `cost-per-correct --nats` and /report do with a
// month of tables (a partial state per run and day: 28 per run here).
func BenchmarkReportOfFoldedDays(b *testing.B) {
	const rows = 1_250_000
	batches := benchBatches(rows, 12_500)
	s := applyBenchBatches(b, batches)
	s.Settle(true)
	loads := memLoad{}
	tables, skipped := s.FoldDays(time.Unix(1<<40, 0), 0, loads.load)
	if len(skipped) > 0 || len(tables) < 28 {
		b.Fatalf("folded %d days, skipped %v", len(tables), skipped)
	}
	loads.keep(tables)
	enc := map[int32][]byte{}
	for d := range s.Folded {
		enc[d] = loads[d]
	}
	agg := &partstate.Aggregate{Parts: map[int]*partstate.State{0: s}, Tables: map[int]map[int32][]byte{0: enc}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r, err := agg.Reducer(outcome.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r == nil {
			b.Fatal("no reducer")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
}
