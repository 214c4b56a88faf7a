// Package traces is the harness of `verdryx bench traces`: it generates
// fleet trace directories of two shapes (the generator's default runs in
// flight, and every run in flight) or takes a given one, and measures, in
// the same run, a bare page scan of the reduction's columns and the full
// reduction (cost per outcome and SLOs) over each.
package traces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdryx/verdryx/bench/pagescan"
	"github.com/verdryx/verdryx/bench/proc"
	"github.com/verdryx/verdryx/bench/rss"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/tracegen"
)

// Layout defaults of the generated shapes: the held-out directory of issue
// 13 (10 segments of ~1M rows, row groups of 200,000 rows).
const (
	DefaultSegmentRows  = 1_000_000
	DefaultRowGroupRows = 200_000
)

// Options configures Run. Zero Rows takes tracegen.DefaultFleetOptions'
// value, zero SegmentRows and RowGroupRows the defaults above, zero Rounds
// and Procs 3 and 1.
type Options struct {
	Rows         int64  // rows to generate per shape
	Dir          string // see Run; "" is a temporary directory, removed after
	Rounds       int    // measured passes of each kind; the best is reported
	Procs        int    // GOMAXPROCS during the measured passes, and the workers of each
	RowGroupRows int64  // rows per row group
	SegmentRows  int64  // rows per segment
	// InFlight is the number of runs in flight in the interleaved shape;
	// 0 is every run (tracegen.FleetOptions.AllInFlight).
	InFlight int
	// OnGenerate, when set, is called after each generated segment with the
	// rows generated so far, over all shapes.
	OnGenerate func(done int64)
}

// Shape holds the figures of one directory.
type Shape struct {
	// Name is in-flight-<N>, in-flight-all or, for a directory given with
	// its segments, dir.
	Name string `json:"shape"`
	// InFlight is the runs in flight the shape was generated with: 0 for
	// all, -1 for a given directory.
	InFlight         int     `json:"in_flight"`
	Rows             int64   `json:"rows"`
	Runs             int64   `json:"runs"`
	Segments         int     `json:"segments"`
	RowGroups        int     `json:"row_groups"`
	Bytes            int64   `json:"bytes"`
	RowGroupRows     int64   `json:"row_group_rows"` // rows of the first row group
	Generated        bool    `json:"generated"`
	GenerateSeconds  float64 `json:"generate_seconds"`
	ScanSeconds      float64 `json:"scan_seconds"`
	ScanCPUSeconds   float64 `json:"scan_cpu_seconds"`
	ScanRowsPerSec   float64 `json:"scan_rows_per_sec"`
	ReduceSeconds    float64 `json:"reduce_seconds"`
	ReduceCPUSeconds float64 `json:"reduce_cpu_seconds"`
	ReduceRowsPerSec float64 `json:"reduce_rows_per_sec"`
	// Ratio is the reduction's time over the page scan's (best of each).
	Ratio          float64 `json:"scan_to_reduce_ratio"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	ScanPeakRSSMiB float64 `json:"scan_peak_rss_mib"`
}

// Result holds the figures of one run (`verdryx bench traces --json`).
type Result struct {
	Rounds     int     `json:"rounds"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	Columns    string  `json:"columns"`
	Shapes     []Shape `json:"shapes"`
}

// inputError marks an error of the input directory (its listing).
type inputError struct{ error }

func (e inputError) Unwrap() error { return e.error }

// IsInput reports whether err came from reading the input directory rather
// than from the measurement.
func IsInput(err error) bool { var ie inputError; return errors.As(err, &ie) }

// Run measures, in the same process and run, the page scan and the full
// reduction (cost per outcome and SLOs, row groups on opts.Procs workers)
// of each shape, best of opts.Rounds. When opts.Dir holds segments, they
// are the one shape measured. Otherwise two shapes are generated (or
// reused) in its subdirectories in-flight-<N>: the generator's default
// in-flight runs and opts.InFlight (all runs by default), same rows and
// layout.
func Run(ctx context.Context, opts Options) (Result, error) {
	d := tracegen.DefaultFleetOptions()
	if opts.Rows == 0 {
		opts.Rows = d.Rows
	}
	if opts.RowGroupRows == 0 {
		opts.RowGroupRows = DefaultRowGroupRows
	}
	if opts.SegmentRows == 0 {
		opts.SegmentRows = DefaultSegmentRows
	}
	if opts.Rounds == 0 {
		opts.Rounds = 3
	}
	if opts.Procs == 0 {
		opts.Procs = 1
	}
	if opts.Rows < 0 || opts.Rounds < 0 || opts.Procs < 0 || opts.RowGroupRows < 0 || opts.SegmentRows < 0 || opts.InFlight < 0 {
		return Result{}, errors.New("bench traces: rows, rounds, procs, row-group and segment rows, in-flight must be positive")
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
	res := Result{Rounds: opts.Rounds, GOMAXPROCS: opts.Procs}
	probe, _ := outcome.NewReducer(outcome.Options{})
	fields := probe.Fields()
	var names []string
	for f := range calls.NumFields {
		if fields.Has(f) {
			names = append(names, f.Name())
		}
	}
	res.Columns = strings.Join(names, ",")

	given, _, err := segment.List(target)
	if err != nil {
		return Result{}, inputError{err}
	}
	type plan struct {
		shape Shape
		dir   string
		gen   tracegen.FleetOptions
	}
	var plans []plan
	if len(given) > 0 {
		plans = append(plans, plan{shape: Shape{Name: "dir", InFlight: -1}, dir: target})
	} else {
		for _, inFlight := range []int{d.Concurrent, opts.InFlight} {
			gen := d
			gen.Rows, gen.RowGroupRows, gen.SegmentRows = opts.Rows, opts.RowGroupRows, opts.SegmentRows
			gen.Concurrent, gen.AllInFlight = inFlight, inFlight == 0
			name := fmt.Sprintf("in-flight-%d", inFlight)
			if inFlight == 0 {
				name = "in-flight-all"
			}
			plans = append(plans, plan{shape: Shape{Name: name, InFlight: inFlight}, dir: filepath.Join(target, name), gen: gen})
		}
	}
	var generated int64
	for _, p := range plans {
		sh := p.shape
		if opts.OnGenerate != nil {
			base := generated
			p.gen.OnSegment = func(done int64) { opts.OnGenerate(base + done) }
		}
		segs, err := segments(p.dir, p.gen, &sh, len(given) > 0)
		if err != nil {
			return Result{}, err
		}
		generated += sh.Rows
		if err := describe(segs, &sh); err != nil {
			return Result{}, err
		}
		prev := runtime.GOMAXPROCS(opts.Procs)
		err = measure(ctx, segs, fields, opts, &sh)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			return Result{}, err
		}
		res.Shapes = append(res.Shapes, sh)
	}
	return res, nil
}

// segments lists the segments of dir, generating them with gen first when
// there are none (and given is false).
func segments(dir string, gen tracegen.FleetOptions, sh *Shape, given bool) ([]segment.Segment, error) {
	if !given {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("bench traces: %w", err)
		}
	}
	segs, _, err := segment.List(dir)
	if err != nil {
		return nil, inputError{err}
	}
	if len(segs) == 0 && !given {
		t0 := time.Now()
		sum, err := tracegen.GenerateFleet(dir, gen)
		if err != nil {
			return nil, fmt.Errorf("bench traces: %w", err)
		}
		sh.GenerateSeconds = time.Since(t0).Seconds()
		sh.Generated = true
		sh.Rows = sum.Rows
		if segs, _, err = segment.List(dir); err != nil {
			return nil, err
		}
	}
	return segs, nil
}

// describe fills the layout figures of sh from the segments' footers.
func describe(segs []segment.Segment, sh *Shape) error {
	sh.Segments = len(segs)
	sh.Bytes, sh.RowGroups, sh.RowGroupRows = 0, 0, 0
	for _, s := range segs {
		sh.Bytes += s.Size
		rows, err := segment.RowGroups(s.Path)
		if err != nil {
			return inputError{err}
		}
		if sh.RowGroupRows == 0 && len(rows) > 0 {
			sh.RowGroupRows = rows[0]
		}
		sh.RowGroups += len(rows)
	}
	return nil
}

// group is one row group of a segment, the unit of the parallel page scan.
type group struct {
	path string
	gi   int
}

// measure runs opts.Rounds passes of the page scan and of the full
// reduction over segs and fills sh with the best time of each (and the CPU
// time of that pass).
func measure(ctx context.Context, segs []segment.Segment, fields calls.FieldSet, opts Options, sh *Shape) error {
	var work []group
	for _, s := range segs {
		rows, err := segment.RowGroups(s.Path)
		if err != nil {
			return inputError{err}
		}
		for gi := range rows {
			work = append(work, group{s.Path, gi})
		}
	}
	bestScan, bestReduce := time.Duration(1<<62), time.Duration(1<<62)
	for range opts.Rounds {
		if err := ctx.Err(); err != nil {
			return err
		}
		resetPeakRSS()
		t0, c0 := time.Now(), proc.SelfCPU()
		scanned, err := scanAll(work, fields, opts.Procs)
		if err != nil {
			return fmt.Errorf("bench traces: page scan: %w", err)
		}
		if el := time.Since(t0); el < bestScan {
			bestScan = el
			sh.ScanCPUSeconds = (proc.SelfCPU() - c0).Seconds()
		}
		sh.ScanPeakRSSMiB = max(sh.ScanPeakRSSMiB, peakRSSMiB())
		sh.Rows = scanned

		resetPeakRSS()
		t0, c0 = time.Now(), proc.SelfCPU()
		r, _ := outcome.NewReducer(outcome.Options{})
		st, err := segfold.ReduceSegments(ctx, segs, 0, r, segfold.DirOptions{Strict: true, Procs: opts.Procs, HugePages: true})
		if err != nil {
			return fmt.Errorf("bench traces: reduce: %w", err)
		}
		rep := r.Report()
		if _, err := r.SLO(outcome.DefaultSLOOptions(), envelope.ValidAgentID); err != nil {
			return err
		}
		if el := time.Since(t0); el < bestReduce {
			bestReduce = el
			sh.ReduceCPUSeconds = (proc.SelfCPU() - c0).Seconds()
		}
		sh.PeakRSSMiB = max(sh.PeakRSSMiB, peakRSSMiB())
		if st.Rows != scanned {
			return fmt.Errorf("bench traces: reduction read %d rows, page scan %d", st.Rows, scanned)
		}
		sh.Runs = rep.Groups[0].Overall.Runs
	}
	sh.ScanSeconds = bestScan.Seconds()
	sh.ReduceSeconds = bestReduce.Seconds()
	sh.ScanRowsPerSec = float64(sh.Rows) / sh.ScanSeconds
	sh.ReduceRowsPerSec = float64(sh.Rows) / sh.ReduceSeconds
	sh.Ratio = sh.ReduceSeconds / sh.ScanSeconds
	return nil
}

// scanAll page-scans every row group of work on procs goroutines and
// returns the rows scanned.
func scanAll(work []group, fields calls.FieldSet, procs int) (int64, error) {
	var (
		next    atomic.Int64
		scanned atomic.Int64
		wg      sync.WaitGroup
		errs    = make([]error, procs)
		sums    = make([]uint64, procs)
	)
	for w := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(work) {
					return
				}
				n, sum, err := pagescan.ScanRowGroup(work[k].path, fields, work[k].gi)
				if err != nil {
					errs[w] = err
					return
				}
				scanned.Add(n)
				sums[w] += sum
			}
		}()
	}
	wg.Wait()
	return scanned.Load(), errors.Join(errs...)
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
