package chaos

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/verdryx/verdryx/calls"

	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/tracegen"
)

// traceSet describes the generated trace directory.
type traceSet struct {
	rows          int64
	segments      int
	equalStepRows int
}

// generateTraces writes records rows into dir: a tracegen fleet (runs
// interleaved across several segments and row groups) plus one segment of
// runs whose step 1 holds two calls, a blocked call and its allowed retry
// tagged case_resolved. The reduction keeps both (the later-read wins the
// tag), so a store deduplicating on (run_id, step) shows up as lost calls
// and a wrong tag. records must be at least minRecords.
func generateTraces(dir string, records int, seed uint64) (traceSet, error) {
	eqRuns := max(4, records/300)
	eqRows := 3 * eqRuns
	fleetRows := int64(records - eqRows)
	segRows := max(1000, (fleetRows+5)/6)
	// Three days ending the day before yesterday (UTC): recent enough
	// that the workers keep the calls by the hour (the serve children
	// get --hours-kept 7d), as they do a live fleet's, so the faults hit
	// that state. The seed fixes everything but the dates.
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -4)
	sum, err := tracegen.GenerateFleet(dir, tracegen.FleetOptions{
		Rows:            fleetRows,
		MeanCallsPerRun: 20,
		Concurrent:      200,
		SegmentRows:     segRows,
		RowGroupRows:    min(segRows, 5000),
		Agents:          8,
		Seed:            seed,
		Start:           start,
		Span:            72 * time.Hour, // three days: the workers fold days while they are killed
	})
	if err != nil {
		return traceSet{}, fmt.Errorf("generate fleet traces: %w", err)
	}
	after := start.Add(25 * time.Hour)
	cl := make([]calls.Call, 0, eqRows)
	for i := range eqRuns {
		run := fmt.Sprintf("chaos-eq-%06d", i)
		ts := after.UnixMilli() + int64(i)*10
		base := calls.Call{RunID: run, HasRunID: true, Model: "claude-haiku-4-5", HasStep: true,
			AgentID: "agent://chaos.example/bench/retry-bot", KeyID: "key-eq", Unit: "tokens", InputTokens: 300, OutputTokens: 40}
		first, blocked, retry := base, base, base
		first.TSMillis, first.Step, first.Decision, first.CostMicroUSD = ts, 0, "allow", 100
		blocked.TSMillis, blocked.Step, blocked.Decision, blocked.CostMicroUSD = ts+1, 1, "budget_exceeded", 400
		retry.TSMillis, retry.Step, retry.Decision, retry.CostMicroUSD, retry.Outcome = ts+2, 1, "allow", 150, "case_resolved"
		cl = append(cl, first, blocked, retry)
	}
	name := tracegen.SegmentName(4243, uint64(after.UnixNano()), 0)
	if err := tracegen.WriteFile(filepath.Join(dir, name), tracegen.Current, cl, tracegen.Options{RowGroupRows: 1000}); err != nil {
		return traceSet{}, fmt.Errorf("write equal-step segment: %w", err)
	}
	return traceSet{rows: sum.Rows + int64(eqRows), segments: sum.Segments + 1, equalStepRows: 2 * eqRuns}, nil
}

// directRunCalls counts the calls of each run of the directory's readable
// segments, and all of them (independent calls included).
func directRunCalls(dir string) (map[string]uint64, int64, error) {
	segs, _, err := segment.List(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", dir, err)
	}
	counts := make(map[string]uint64)
	var n int64
	for _, s := range segs {
		seg := map[string]uint64{}
		var segN int64
		err := segment.Read(s.Path, func(c calls.Call) error {
			if c.HasRunID {
				seg[c.RunID]++
			}
			segN++
			return nil
		})
		if err != nil {
			if segment.IsError(err) {
				continue
			}
			return nil, 0, fmt.Errorf("read %s: %w", s.Path, err)
		}
		for run, k := range seg {
			counts[run] += k
		}
		n += segN
	}
	return counts, n, nil
}
