// Package traces is the harness of `verdryx bench traces`: it generates a
// fleet trace directory (or reuses one) and measures, in the same run, a
// bare page scan of the reduction's columns and the full reduction (cost
// per outcome and SLOs) over it.
package traces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/internal/bench/pagescan"
	"github.com/verdryx/verdryx/internal/bench/rss"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/replay"
	"github.com/verdryx/verdryx/tracegen"
)

// Options configures Run. Zero Rows and RowGroupRows take the
// tracegen.DefaultFleetOptions values, zero Rounds and Procs 3 and 1.
type Options struct {
	Rows         int64  // rows to generate
	Dir          string // directory for the segments; "" is a temporary one, removed after; existing segments are reused
	Rounds       int    // measured passes of each kind; the best is reported
	Procs        int    // GOMAXPROCS during the measured passes
	RowGroupRows int64  // rows per row group
	// OnGenerate, when set, is called after each generated segment with the
	// rows generated so far (tracegen.FleetOptions.OnSegment).
	OnGenerate func(done int64)
}

// Result holds the figures of one run (`verdryx bench traces --json`).
type Result struct {
	Rows             int64   `json:"rows"`
	Runs             int64   `json:"runs"`
	Segments         int     `json:"segments"`
	Bytes            int64   `json:"bytes"`
	RowGroupRows     int64   `json:"row_group_rows"`
	Generated        bool    `json:"generated"`
	GenerateSeconds  float64 `json:"generate_seconds"`
	Rounds           int     `json:"rounds"`
	GOMAXPROCS       int     `json:"gomaxprocs"`
	Columns          string  `json:"columns"`
	ScanSeconds      float64 `json:"scan_seconds"`
	ScanRowsPerSec   float64 `json:"scan_rows_per_sec"`
	ReduceSeconds    float64 `json:"reduce_seconds"`
	ReduceRowsPerSec float64 `json:"reduce_rows_per_sec"`
	Ratio            float64 `json:"scan_to_reduce_ratio"`
	PeakRSSMiB       float64 `json:"peak_rss_mib"`
	ScanPeakRSSMiB   float64 `json:"scan_peak_rss_mib"`
}

// inputError marks an error of the input directory (its listing).
type inputError struct{ error }

func (e inputError) Unwrap() error { return e.error }

// IsInput reports whether err came from reading the input directory rather
// than from the measurement.
func IsInput(err error) bool { var ie inputError; return errors.As(err, &ie) }

// Run generates or reuses the segments of opts.Dir and measures the page
// scan and the full reduction over them, best of opts.Rounds.
func Run(ctx context.Context, opts Options) (Result, error) {
	d := tracegen.DefaultFleetOptions()
	if opts.Rows == 0 {
		opts.Rows = d.Rows
	}
	if opts.RowGroupRows == 0 {
		opts.RowGroupRows = d.RowGroupRows
	}
	if opts.Rounds == 0 {
		opts.Rounds = 3
	}
	if opts.Procs == 0 {
		opts.Procs = 1
	}
	if opts.Rows < 0 || opts.Rounds < 0 || opts.Procs < 0 || opts.RowGroupRows < 0 {
		return Result{}, errors.New("bench traces: rows, rounds, procs and row-group rows must be positive")
	}
	target := opts.Dir
	if target == "" {
		tmp, err := os.MkdirTemp("", "verdryx-bench-traces-")
		if err != nil {
			return Result{}, fmt.Errorf("bench traces: %w", err)
		}
		defer os.RemoveAll(tmp)
		target = tmp
	} else if err := os.MkdirAll(target, 0o755); err != nil {
		return Result{}, fmt.Errorf("bench traces: %w", err)
	}
	res := Result{Rounds: opts.Rounds, RowGroupRows: opts.RowGroupRows, GOMAXPROCS: opts.Procs}
	gen := d
	gen.Rows, gen.RowGroupRows, gen.OnSegment = opts.Rows, opts.RowGroupRows, opts.OnGenerate
	segs, err := segments(target, gen, &res)
	if err != nil {
		return Result{}, err
	}
	for _, s := range segs {
		res.Bytes += s.Size
	}
	res.Segments = len(segs)

	probe, _ := outcome.NewReducer(outcome.Options{})
	fields := probe.Fields()
	var names []string
	for f := range calls.NumFields {
		if fields.Has(f) {
			names = append(names, f.Name())
		}
	}
	res.Columns = strings.Join(names, ",")

	prev := runtime.GOMAXPROCS(opts.Procs)
	defer runtime.GOMAXPROCS(prev)
	bestScan, bestReduce, err := measure(ctx, segs, fields, opts.Rounds, &res)
	if err != nil {
		return Result{}, err
	}
	res.ScanSeconds = bestScan.Seconds()
	res.ReduceSeconds = bestReduce.Seconds()
	res.ScanRowsPerSec = float64(res.Rows) / res.ScanSeconds
	res.ReduceRowsPerSec = float64(res.Rows) / res.ReduceSeconds
	res.Ratio = res.ReduceSeconds / res.ScanSeconds
	return res, nil
}

// segments lists the segments of target, generating them with gen first
// when there are none.
func segments(target string, gen tracegen.FleetOptions, res *Result) ([]segment.Segment, error) {
	segs, _, err := segment.List(target)
	if err != nil {
		return nil, inputError{err}
	}
	if len(segs) == 0 {
		t0 := time.Now()
		sum, err := tracegen.GenerateFleet(target, gen)
		if err != nil {
			return nil, fmt.Errorf("bench traces: %w", err)
		}
		res.GenerateSeconds = time.Since(t0).Seconds()
		res.Generated = true
		res.Runs = sum.Runs
		if segs, _, err = segment.List(target); err != nil {
			return nil, err
		}
	}
	return segs, nil
}

// measure runs rounds passes of the page scan and of the full reduction
// over segs and returns the best time of each.
func measure(ctx context.Context, segs []segment.Segment, fields calls.FieldSet, rounds int, res *Result) (bestScan, bestReduce time.Duration, err error) {
	bestScan, bestReduce = time.Duration(1<<62), time.Duration(1<<62)
	for round := 0; round < rounds; round++ {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		resetPeakRSS()
		t0 := time.Now()
		var scanned int64
		var sink uint64
		for _, s := range segs {
			n, sum, err := pagescan.Scan(s.Path, fields)
			if err != nil {
				return 0, 0, fmt.Errorf("bench traces: page scan: %w", err)
			}
			scanned += n
			sink += sum
		}
		bestScan = min(bestScan, time.Since(t0))
		res.ScanPeakRSSMiB = max(res.ScanPeakRSSMiB, peakRSSMiB())
		res.Rows = scanned
		_ = sink

		resetPeakRSS()
		t0 = time.Now()
		r, _ := outcome.NewReducer(outcome.Options{})
		st, err := replay.ReduceSegments(ctx, segs, 0, r, replay.DirOptions{Strict: true})
		if err != nil {
			return 0, 0, fmt.Errorf("bench traces: reduce: %w", err)
		}
		rep := r.Report()
		if _, err := r.SLO(outcome.DefaultSLOOptions(), envelope.ValidAgentID); err != nil {
			return 0, 0, err
		}
		bestReduce = min(bestReduce, time.Since(t0))
		res.PeakRSSMiB = max(res.PeakRSSMiB, peakRSSMiB())
		if st.Rows != scanned {
			return 0, 0, fmt.Errorf("bench traces: reduction read %d rows, page scan %d", st.Rows, scanned)
		}
		res.Runs = rep.Groups[0].Overall.Runs
	}
	return bestScan, bestReduce, nil
}

// resetPeakRSS returns freed memory to the OS and resets VmHWM, so the next
// reading is the next pass's peak.
func resetPeakRSS() {
	runtime.GC()
	debug.FreeOSMemory()
	rss.ResetPeak()
}

// peakRSSMiB is the peak resident set in MiB; 0 where unavailable.
func peakRSSMiB() float64 { return float64(rss.Peak()) / (1 << 20) }
