package tracegen

import (
	"errors"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// FleetOptions shapes a generated fleet directory.
type FleetOptions struct {
	// Rows is the total number of calls.
	Rows int64
	// MeanCallsPerRun sets the number of runs (about Rows / MeanCallsPerRun);
	// run lengths are uniform in [1, 2*MeanCallsPerRun-1].
	MeanCallsPerRun int
	// Concurrent is the number of runs in flight at once: their calls
	// interleave, so runs span row groups and segments.
	Concurrent int
	// AllInFlight puts every run in flight for the whole directory (the
	// widest interleave): about Rows / MeanCallsPerRun runs are drawn up
	// front and their calls shuffled together, so each row group holds
	// calls of nearly every run. Concurrent is ignored, and the directory
	// holds the sum of the drawn run lengths, close to but not exactly Rows.
	AllInFlight bool
	// SegmentRows and RowGroupRows cut files and row groups.
	SegmentRows  int64
	RowGroupRows int64
	// Agents is the number of distinct agent ids; about 5% of runs carry none.
	Agents int
	// Seed makes the output reproducible.
	Seed uint64
	// Start and Span place the ts_millis of the calls.
	Start time.Time
	Span  time.Duration
	// OnSegment, if non-nil, is called after each segment is written with
	// the rows written so far.
	OnSegment func(rowsDone int64)
}

// DefaultFleetOptions returns the shape of `verdryx bench traces`: 10M rows,
// about 100,000 runs of 100 calls, 1,000 runs in flight, 2M-row segments of
// 500k-row row groups, 40 agents over 28 days.
func DefaultFleetOptions() FleetOptions {
	return FleetOptions{
		Rows:            10_000_000,
		MeanCallsPerRun: 100,
		Concurrent:      1000,
		SegmentRows:     2_000_000,
		RowGroupRows:    500_000,
		Agents:          40,
		Seed:            1,
		Start:           time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		Span:            28 * 24 * time.Hour,
	}
}

// FleetSummary describes a generated directory.
type FleetSummary struct {
	Rows     int64
	Runs     int64
	Segments int
	Bytes    int64
}

type liveRun struct {
	id      string
	agent   string
	key     string
	model   string
	left    int
	step    uint32
	outcome string // final tag, "" for untagged
	early   string // an earlier tag a later step overrides
}

// GenerateFleet writes a directory of segments shaped by opts into dir
// (which must exist). The content is a pure function of opts.
func GenerateFleet(dir string, opts FleetOptions) (FleetSummary, error) {
	if opts.Rows <= 0 || opts.MeanCallsPerRun <= 0 || (opts.Concurrent <= 0 && !opts.AllInFlight) || opts.SegmentRows <= 0 {
		return FleetSummary{}, errors.New("tracegen: fleet needs positive Rows, MeanCallsPerRun, Concurrent (or AllInFlight) and SegmentRows")
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	decisions := []string{"budget_exceeded", "policy_violation", "loop_detected", "killed", "wasm_policy",
		"taint_blocked", "dlp_blocked", "unit_budget_exceeded", "identity_mismatch"}
	models := []string{"claude-haiku-4-5", "claude-sonnet-4-5", "gpt-4.1-mini"}
	var sum FleetSummary
	nextRun := int64(0)
	newRun := func() liveRun {
		nextRun++
		r := liveRun{
			id:    fmt.Sprintf("run-%08d", nextRun),
			key:   fmt.Sprintf("key-%02d", rng.IntN(12)),
			model: models[rng.IntN(len(models))],
			left:  1 + rng.IntN(2*opts.MeanCallsPerRun-1),
		}
		if opts.Agents > 0 && rng.IntN(20) != 0 {
			r.agent = fmt.Sprintf("agent://fleet.example/support/bot-%02d", rng.IntN(opts.Agents))
		}
		switch p := rng.IntN(100); {
		case p < 60:
			r.outcome = "case_resolved"
		case p < 75:
			r.outcome = "escalated"
		case p < 90:
			r.outcome = "abandoned"
		}
		if r.outcome != "" && rng.IntN(10) == 0 {
			r.early = "escalated"
		}
		return r
	}
	var live []liveRun
	var order []int32 // AllInFlight: the run of each row
	if opts.AllInFlight {
		live = make([]liveRun, max(1, opts.Rows/int64(opts.MeanCallsPerRun)))
		total := int64(0)
		for i := range live {
			live[i] = newRun()
			total += int64(live[i].left)
		}
		order = make([]int32, 0, total)
		for i := range live {
			for range live[i].left {
				order = append(order, int32(i))
			}
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		opts.Rows = total
	} else {
		live = make([]liveRun, opts.Concurrent)
		for i := range live {
			live[i] = newRun()
		}
	}
	start := opts.Start.UnixMilli()
	span := opts.Span.Milliseconds()
	batch := make([]calls.Call, 0, 8192)
	for seq := uint64(0); sum.Rows < opts.Rows; seq++ {
		n := min(opts.SegmentRows, opts.Rows-sum.Rows)
		ts := start + span*sum.Rows/opts.Rows
		name := SegmentName(4242, uint64(ts)*1_000_000, seq)
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return sum, fmt.Errorf("create segment: %w", err)
		}
		sw, err := NewSegmentWriter(f, Current, Options{RowGroupRows: opts.RowGroupRows})
		if err != nil {
			f.Close()
			return sum, err
		}
		for i := int64(0); i < n; i++ {
			row := sum.Rows + i
			var k int
			if order != nil {
				k = int(order[row])
			} else {
				k = rng.IntN(len(live))
			}
			r := &live[k]
			c := calls.Call{
				TSMillis: start + span*row/opts.Rows,
				RunID:    r.id, HasRunID: true,
				Model:        r.model,
				Decision:     "allow",
				InputTokens:  uint64(200 + rng.IntN(4000)),
				OutputTokens: uint64(20 + rng.IntN(800)),
				Step:         r.step, HasStep: true,
				AgentID: r.agent,
				KeyID:   r.key,
				Unit:    "tokens",
			}
			c.CostMicroUSD = int64(c.InputTokens)/4 + int64(c.OutputTokens)*2
			switch p := rng.IntN(1000); {
			case p < 30:
				c.Decision = decisions[rng.IntN(len(decisions))]
			case p < 40:
				c.Decision = "wardryx_deny"
			case p < 45:
				c.Decision = "wardryx_hold"
			case p < 100:
				c.Decision = "cache_hit"
				c.SavedMicroUSD = c.CostMicroUSD
				c.CostMicroUSD = 0
			}
			if c.Decision == "allow" || c.Decision == "cache_hit" {
				tc := uint32(rng.IntN(4))
				c.ToolCalls = &tc
			}
			if r.step == 0 {
				sum.Runs++
			}
			r.step++
			r.left--
			if r.left == 0 {
				c.Outcome = r.outcome
				if order == nil {
					live[k] = newRun()
				}
			} else if r.early != "" && r.left == 1 {
				c.Outcome = r.early
			}
			batch = append(batch, c)
			if len(batch) == cap(batch) {
				if err := sw.Write(batch); err != nil {
					f.Close()
					return sum, err
				}
				batch = batch[:0]
			}
		}
		if err := sw.Write(batch); err != nil {
			f.Close()
			return sum, err
		}
		batch = batch[:0]
		if err := sw.Close(); err != nil {
			f.Close()
			return sum, err
		}
		info, err := f.Stat()
		if err == nil {
			sum.Bytes += info.Size()
		}
		if err := f.Close(); err != nil {
			return sum, fmt.Errorf("close segment: %w", err)
		}
		sum.Rows += n
		sum.Segments++
		if opts.OnSegment != nil {
			opts.OnSegment(sum.Rows)
		}
	}
	return sum, nil
}
