// Package chain is the harness of `verdryx bench chain`: the chained NDJSON
// writer (fsync off) against JCS canonicalization + SHA-256 alone, on the
// same ~400-byte event, in one run.
package chain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/verdryx/verdryx/envelope"
)

// Options configures Run. A zero MinTime is 2s.
type Options struct {
	MinTime time.Duration // minimum time per measurement
}

// Result holds the figures of one run.
type Result struct {
	EventBytes int     `json:"event_bytes"`
	Floor      Rate    `json:"floor"`  // canonicalize + SHA-256
	Writer     Rate    `json:"writer"` // chained writer, fsync off
	Ratio      float64 `json:"writer_to_floor_ratio"`
}

// Rate is one measurement: calls, their time and heap allocations, and the
// figures derived from them.
type Rate struct {
	N              int           `json:"n"`
	Elapsed        time.Duration `json:"elapsed_ns"`
	Allocs         uint64        `json:"allocs"`
	EventsPerSec   float64       `json:"events_per_sec"`
	NsPerEvent     float64       `json:"ns_per_event"`
	AllocsPerEvent float64       `json:"allocs_per_event"`
}

// Run measures the floor and the writer for at least opts.MinTime each.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.MinTime == 0 {
		opts.MinTime = 2 * time.Second
	}
	ev := envelope.New(envelope.TypeQualityScore, "agent://acme.example/support/tier1-bot", "run-20260724-0001",
		map[string]any{"case_id": "numeric-source-verdigris-dose", "value": 0.8333333333333334, "tokens": 1234, "cost_usd": 0.001234,
			"grader": "rag", "eval_set": "grimoire-golden-v1", "reasons": []any{"must_contain: 3 drams", "cited [verdigris-dose-verdant]"}},
		time.Now())
	line, err := ev.MarshalJSON()
	if err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "verdryx-bench-chain-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	w, err := envelope.OpenWriter(filepath.Join(dir, "events.ndjson"), envelope.WriterOptions{})
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	floor, ferr := measure(opts.MinTime, func() error { _, err := ev.Hash(); return err })
	writer, werr := measure(opts.MinTime, func() error { _, err := w.Append(ev); return err })
	if ferr != nil || werr != nil {
		return Result{}, fmt.Errorf("bench chain: %v %v", ferr, werr)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return Result{EventBytes: len(line), Floor: floor, Writer: writer, Ratio: writer.NsPerEvent / floor.NsPerEvent}, nil
}

// measure calls f repeatedly for at least d and reports the rate and the
// heap allocations per call.
func measure(d time.Duration, f func() error) (Rate, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		for i := 0; i < 1000; i++ {
			if err := f(); err != nil {
				return Rate{}, err
			}
		}
		n += 1000
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	r := Rate{N: n, Elapsed: elapsed, Allocs: after.Mallocs - before.Mallocs}
	r.EventsPerSec = float64(r.N) / r.Elapsed.Seconds()
	r.NsPerEvent = float64(r.Elapsed.Nanoseconds()) / float64(r.N)
	r.AllocsPerEvent = float64(r.Allocs) / float64(r.N)
	return r, nil
}
