package main

import (
	"context"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/internal/bench/pagescan"
	"github.com/verdryx/verdryx/internal/bench/rss"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/replay"
	"github.com/verdryx/verdryx/tracegen"
)

// benchTracesResult is what `verdryx bench traces --json` prints.
type benchTracesResult struct {
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

// benchTraces generates a fleet trace directory and measures, in the same
// run, a bare page scan of the reduction's columns and the full reduction
// (cost per outcome and SLOs) over it.
func benchTraces(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench traces", "",
		"Generate a TokenFuse trace directory (or reuse the segments already in --dir) and measure the full\n"+
			"reduction (cost per outcome + SLOs) against a bare page scan of the same columns: rows/s of each,\n"+
			"their ratio and the peak RSS (VmHWM, reset before each measured pass). Best of --rounds.", stderr)
	d := tracegen.DefaultFleetOptions()
	rows := fs.Int64("rows", d.Rows, "rows to generate")
	dir := fs.String("dir", "", "directory for the segments (default: a temporary directory, removed after); existing segments there are reused")
	rounds := fs.Int("rounds", 3, "measured passes of each kind; the best is reported")
	procs := fs.Int("procs", 1, "GOMAXPROCS during the measured passes (the reduction is single-threaded)")
	rowGroup := fs.Int64("row-group", d.RowGroupRows, "rows per row group (100k-1M is typical)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("bench traces: unexpected argument %q", pos[0])
	}
	if *rows <= 0 || *rounds <= 0 || *procs <= 0 || *rowGroup <= 0 {
		return usageErrorf("bench traces: --rows, --rounds, --procs and --row-group must be positive")
	}
	target := *dir
	if target == "" {
		tmp, err := os.MkdirTemp("", "verdryx-bench-traces-")
		if err != nil {
			return fmt.Errorf("bench traces: %w", err)
		}
		defer os.RemoveAll(tmp)
		target = tmp
	} else if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("bench traces: %w", err)
	}
	res := benchTracesResult{Rounds: *rounds, RowGroupRows: *rowGroup, GOMAXPROCS: *procs}
	segs, err := benchTracesSegments(target, d, *rows, *rowGroup, stderr, &res)
	if err != nil {
		return err
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

	prev := runtime.GOMAXPROCS(*procs)
	defer runtime.GOMAXPROCS(prev)
	bestScan, bestReduce, err := measureTraces(ctx, segs, fields, *rounds, &res)
	if err != nil {
		return err
	}
	res.ScanSeconds = bestScan.Seconds()
	res.ReduceSeconds = bestReduce.Seconds()
	res.ScanRowsPerSec = float64(res.Rows) / res.ScanSeconds
	res.ReduceRowsPerSec = float64(res.Rows) / res.ReduceSeconds
	res.Ratio = res.ReduceSeconds / res.ScanSeconds
	if *asJSON {
		return writeJSON(stdout, res)
	}
	printBenchTraces(stdout, res)
	return nil
}

// benchTracesSegments lists the segments of target, generating them first
// when there are none.
func benchTracesSegments(target string, d tracegen.FleetOptions, rows, rowGroup int64, stderr io.Writer, res *benchTracesResult) ([]segment.Segment, error) {
	segs, _, err := segment.List(target)
	if err != nil {
		return nil, inputError(err)
	}
	if len(segs) == 0 {
		opts := d
		opts.Rows = rows
		opts.RowGroupRows = rowGroup
		if isTerminal(stderr) {
			bar := progressbar.NewOptions64(opts.Rows, progressbar.OptionSetWriter(stderr),
				progressbar.OptionSetDescription("generating traces"), progressbar.OptionClearOnFinish())
			last := int64(0)
			opts.OnSegment = func(done int64) { _ = bar.Add64(done - last); last = done }
			defer bar.Finish()
		}
		t0 := time.Now()
		sum, err := tracegen.GenerateFleet(target, opts)
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

// measureTraces runs rounds passes of the page scan and of the full
// reduction over segs and returns the best time of each.
func measureTraces(ctx context.Context, segs []segment.Segment, fields calls.FieldSet, rounds int, res *benchTracesResult) (bestScan, bestReduce time.Duration, err error) {
	bestScan, bestReduce = time.Duration(1<<62), time.Duration(1<<62)
	for round := 0; round < rounds; round++ {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		tracesResetPeakRSS()
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
		res.ScanPeakRSSMiB = max(res.ScanPeakRSSMiB, tracesPeakRSSMiB())
		res.Rows = scanned
		_ = sink

		tracesResetPeakRSS()
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
		res.PeakRSSMiB = max(res.PeakRSSMiB, tracesPeakRSSMiB())
		if st.Rows != scanned {
			return 0, 0, fmt.Errorf("bench traces: reduction read %d rows, page scan %d", st.Rows, scanned)
		}
		res.Runs = rep.Groups[0].Overall.Runs
	}
	return bestScan, bestReduce, nil
}

func printBenchTraces(stdout io.Writer, res benchTracesResult) {
	fmt.Fprintf(stdout, "bench traces: %d rows, %d runs, %d segments, %.1f MiB, row groups of %d rows",
		res.Rows, res.Runs, res.Segments, float64(res.Bytes)/(1<<20), res.RowGroupRows)
	if res.Generated {
		fmt.Fprintf(stdout, " (generated in %.1fs)", res.GenerateSeconds)
	}
	fmt.Fprintf(stdout, "\ncolumns: %s; GOMAXPROCS=%d; best of %d\n", res.Columns, res.GOMAXPROCS, res.Rounds)
	fmt.Fprintf(stdout, "page scan:      %6.1fM rows/s  (%.3fs)  peak RSS %.1f MiB\n", res.ScanRowsPerSec/1e6, res.ScanSeconds, res.ScanPeakRSSMiB)
	fmt.Fprintf(stdout, "full reduction: %6.1fM rows/s  (%.3fs)  peak RSS %.1f MiB\n", res.ReduceRowsPerSec/1e6, res.ReduceSeconds, res.PeakRSSMiB)
	fmt.Fprintf(stdout, "reduction takes %.2fx the page scan's time\n", res.Ratio)
}

// tracesResetPeakRSS returns freed memory to the OS and resets VmHWM, so
// the next reading is the next pass's peak.
func tracesResetPeakRSS() {
	runtime.GC()
	debug.FreeOSMemory()
	rss.ResetPeak()
}

// tracesPeakRSSMiB is the peak resident set in MiB; 0 where unavailable.
func tracesPeakRSSMiB() float64 { return float64(rss.Peak()) / (1 << 20) }
