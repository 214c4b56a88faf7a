// Package e2e is `verdryx bench worker`: the deployed path against the
// direct path on the same generated directory, in one run. Each round runs
// two child processes of the verdryx binary, one after the other:
// `cost-per-correct --traces DIR` and, on a fresh data directory,
// `serve --once --replay DIR` (the embedded server, the replay published as
// row batches and applied by the worker until drained), and reports their
// wall times and ratio, the worker's peak RSS and CPU, and the bytes the
// JetStream store kept per Parquet byte read and per row. The two reports
// must be equal.
//
// A third pass measures the publishing floor: `replay DIR` alone into a
// JetStream server of its own (in the bench process, no consumer), its
// wall time and the CPU of the replayer and the server. The worker path
// cannot beat it: whatever a worker does comes on top. On a machine of N
// cores, the floor's CPU over N is the least wall time publishing alone
// could take, and the worker pass's CPU over N the least its run could.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/verdryx/verdryx/bench/proc"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/tracegen"
)

// Options configure Run.
type Options struct {
	// Exe is the verdryx binary the children run (os.Executable).
	Exe string
	// Dir holds the segments; generated there (every run in flight) when
	// it holds none. Empty: a temporary directory, removed after.
	Dir string
	// Rows to generate; 0 means 10,000,000.
	Rows int64
	// Rounds of the two passes; 0 means 1. The best of each is kept.
	Rounds int
	// OnGenerate, when set, is called with the rows generated so far.
	OnGenerate func(rows int64)
	// OnRound, when set, is called with each round's figures.
	OnRound func(Round)
}

// Round holds one round's figures. Times in seconds, sizes in bytes.
type Round struct {
	Round         int     `json:"round"`
	DirectSeconds float64 `json:"direct_seconds"`
	WorkerSeconds float64 `json:"worker_seconds"`
	Ratio         float64 `json:"worker_to_direct_ratio"`
	WorkerCPU     float64 `json:"worker_cpu_seconds"`
	WorkerSysCPU  float64 `json:"worker_system_cpu_seconds"`
	WorkerFaults  int64   `json:"worker_minor_page_faults"`
	WorkerPeakRSS int64   `json:"worker_peak_rss_bytes"`
	StoreBytes    int64   `json:"jetstream_store_bytes"`
	SQLiteBytes   int64   `json:"sqlite_bytes"`
	ReportsEqual  bool    `json:"reports_equal"`
	// The publishing floor: replay alone into a server of its own.
	FloorSeconds   float64 `json:"floor_seconds"`
	FloorRatio     float64 `json:"floor_to_direct_ratio"`
	FloorCPU       float64 `json:"floor_cpu_seconds"` // replayer and server
	FloorServerCPU float64 `json:"floor_server_cpu_seconds"`
	FloorRowsNew   int64   `json:"floor_rows_new"` // rows the floor's replay stored
}

// Result is a run's figures: the directory, every round, and the best
// (least disturbed: other load only slows a pass down) time and CPU of
// each pass. The sizes held against a ceiling (WorkerPeakRSS, the store's
// bytes) are the worst round's: other load does not inflate them.
type Result struct {
	Dir               string  `json:"dir"`
	Rows              int64   `json:"rows"`
	Segments          int     `json:"segments"`
	ParquetBytes      int64   `json:"parquet_bytes"`
	Generated         bool    `json:"generated"`
	DirectSeconds     float64 `json:"direct_seconds"`
	WorkerSeconds     float64 `json:"worker_seconds"`
	Ratio             float64 `json:"worker_to_direct_ratio"`
	WorkerPeakRSS     int64   `json:"worker_peak_rss_bytes"`
	WorkerCPUPerMRows float64 `json:"worker_cpu_seconds_per_million_rows"`
	StorePerParquet   float64 `json:"jetstream_bytes_per_parquet_byte"`
	StoreBytesPerRow  float64 `json:"jetstream_bytes_per_row"`
	// Cores is the machine's CPU count (runtime.NumCPU). FloorSeconds and
	// FloorRatio are the best floor pass; FloorCPUBound is the best
	// floor's CPU over Cores, as a ratio to DirectSeconds (what publishing
	// alone would cost were both the replayer and the server spread
	// perfectly over every core), and WorkerCPUBound the same of the
	// worker pass's CPU (its ratio with every core busy throughout).
	Cores              int     `json:"cores"`
	FloorSeconds       float64 `json:"floor_seconds"`
	FloorRatio         float64 `json:"floor_to_direct_ratio"`
	FloorCPUBound      float64 `json:"floor_cpu_bound_ratio"`
	WorkerCPUBound     float64 `json:"worker_cpu_bound_ratio"`
	Rounds             []Round `json:"rounds"`
	RatioTarget        float64 `json:"ratio_target"`
	StorePerParquetMax float64 `json:"jetstream_bytes_per_parquet_byte_max"`
	PeakRSSMax         int64   `json:"worker_peak_rss_bytes_max"`
}

// The goals of issue 24, printed beside the figures.
const (
	RatioTarget        = 10
	StorePerParquetMax = 1.5
	PeakRSSMax         = 1 << 30
)

// Check returns an error when a round's reports differed.
func (r Result) Check() error {
	for _, rd := range r.Rounds {
		if !rd.ReportsEqual {
			return fmt.Errorf("bench worker: round %d: the worker's report differs from cost-per-correct's", rd.Round)
		}
	}
	return nil
}

// Run generates (or reuses) the directory and runs the rounds.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.Rows == 0 {
		opts.Rows = 10_000_000
	}
	if opts.Rounds == 0 {
		opts.Rounds = 1
	}
	if opts.Rows < 0 || opts.Rounds < 0 || opts.Exe == "" {
		return Result{}, errors.New("bench worker: rows and rounds must be positive, and the binary known")
	}
	dir := opts.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "verdryx-bench-worker-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("bench worker: %w", err)
	}
	res := Result{Dir: dir, RatioTarget: RatioTarget, StorePerParquetMax: StorePerParquetMax, PeakRSSMax: PeakRSSMax}
	segs, _, err := segment.List(dir)
	if err != nil {
		return Result{}, err
	}
	if len(segs) == 0 {
		gen := tracegen.DefaultFleetOptions()
		gen.Rows, gen.AllInFlight, gen.Concurrent = opts.Rows, true, 0
		gen.SegmentRows, gen.RowGroupRows = 1_000_000, 200_000
		gen.OnSegment = opts.OnGenerate
		if _, err := tracegen.GenerateFleet(dir, gen); err != nil {
			return Result{}, fmt.Errorf("bench worker: generate: %w", err)
		}
		res.Generated = true
		if segs, _, err = segment.List(dir); err != nil {
			return Result{}, err
		}
	}
	res.Segments = len(segs)
	for _, s := range segs {
		fi, err := os.Stat(s.Path)
		if err != nil {
			return Result{}, err
		}
		res.ParquetBytes += fi.Size()
		rows, err := segment.RowGroups(s.Path)
		if err != nil {
			return Result{}, err
		}
		for _, n := range rows {
			res.Rows += n
		}
	}
	for k := 1; k <= opts.Rounds; k++ {
		rd, err := round(ctx, opts.Exe, dir, k)
		if err != nil {
			return Result{}, fmt.Errorf("bench worker: round %d: %w", k, err)
		}
		if opts.OnRound != nil {
			opts.OnRound(rd)
		}
		res.Rounds = append(res.Rounds, rd)
	}
	best := func(f func(Round) float64) float64 {
		v := f(res.Rounds[0])
		for _, rd := range res.Rounds[1:] {
			v = min(v, f(rd))
		}
		return v
	}
	worst := func(f func(Round) int64) int64 {
		v := f(res.Rounds[0])
		for _, rd := range res.Rounds[1:] {
			v = max(v, f(rd))
		}
		return v
	}
	res.DirectSeconds = best(func(r Round) float64 { return r.DirectSeconds })
	res.WorkerSeconds = best(func(r Round) float64 { return r.WorkerSeconds })
	res.Ratio = res.WorkerSeconds / res.DirectSeconds
	res.WorkerPeakRSS = worst(func(r Round) int64 { return r.WorkerPeakRSS })
	res.WorkerCPUPerMRows = best(func(r Round) float64 { return r.WorkerCPU }) / (float64(res.Rows) / 1e6)
	store := float64(worst(func(r Round) int64 { return r.StoreBytes }))
	res.StorePerParquet = store / float64(res.ParquetBytes)
	res.StoreBytesPerRow = store / float64(res.Rows)
	res.Cores = runtime.NumCPU()
	res.FloorSeconds = best(func(r Round) float64 { return r.FloorSeconds })
	res.FloorRatio = res.FloorSeconds / res.DirectSeconds
	res.FloorCPUBound = best(func(r Round) float64 { return r.FloorCPU }) / float64(res.Cores) / res.DirectSeconds
	res.WorkerCPUBound = best(func(r Round) float64 { return r.WorkerCPU }) / float64(res.Cores) / res.DirectSeconds
	return res, nil
}

// round runs the direct and the worker pass once.
func round(ctx context.Context, exe, dir string, k int) (Round, error) {
	rd := Round{Round: k}
	direct, err := runChild(ctx, exe, "cost-per-correct", "--traces", dir)
	if err != nil {
		return rd, err
	}
	rd.DirectSeconds = direct.wall.Seconds()
	data, err := os.MkdirTemp("", "verdryx-bench-worker-data-")
	if err != nil {
		return rd, err
	}
	defer os.RemoveAll(data)
	w, err := runChild(ctx, exe, "--data", data, "serve", "--once", "--replay", dir,
		"--nats-listen", "127.0.0.1:0", "--http", "", "--log-level", "warn")
	if err != nil {
		return rd, err
	}
	rd.WorkerSeconds = w.wall.Seconds()
	rd.Ratio = rd.WorkerSeconds / rd.DirectSeconds
	rd.WorkerCPU, rd.WorkerPeakRSS = w.cpu.Seconds(), w.peakRSS
	rd.WorkerSysCPU, rd.WorkerFaults = w.sys.Seconds(), w.faults
	rd.StoreBytes = proc.DirBytes(filepath.Join(data, "nats"))
	rd.SQLiteBytes = proc.DirBytes(filepath.Join(data, "verdryx.db")) + proc.DirBytes(filepath.Join(data, "verdryx.db-wal"))
	rd.ReportsEqual = sameReport(direct.stdout, w.stdout)
	if err := floor(ctx, exe, dir, &rd); err != nil {
		return rd, err
	}
	return rd, nil
}

// floor runs the publishing floor: `replay DIR` into an embedded server
// started in this process on a fresh store, with no consumer. The
// server's CPU is this process's over the child's run (the bench itself
// only waits meanwhile).
func floor(ctx context.Context, exe, dir string, rd *Round) error {
	store, err := os.MkdirTemp("", "verdryx-bench-worker-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(store)
	ns, err := embedded.Start(store, "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	before := proc.SelfCPU()
	c, err := runChild(ctx, exe, "replay", dir, "--nats", ns.ClientURL(), "--json", "--log-level", "warn")
	server := proc.SelfCPU() - before
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	var out struct {
		New int64 `json:"new"`
	}
	if err := json.Unmarshal(c.stdout, &out); err != nil {
		return fmt.Errorf("floor: replay --json printed %q: %w", c.stdout, err)
	}
	rd.FloorSeconds = c.wall.Seconds()
	rd.FloorRatio = rd.FloorSeconds / rd.DirectSeconds
	rd.FloorServerCPU = server.Seconds()
	rd.FloorCPU = c.cpu.Seconds() + rd.FloorServerCPU
	rd.FloorRowsNew = out.New
	return nil
}

// sameReport reports whether the worker's printed report (the lines after
// its "cost per outcome of the traces consumed:" line) is the direct one's,
// both up to and including their "calls read: N" line.
func sameReport(direct, worker []byte) bool {
	_, wt, ok := bytes.Cut(worker, []byte("cost per outcome of the traces consumed:\n"))
	if !ok {
		return false
	}
	dl, wl := upToCallsRead(direct), upToCallsRead(wt)
	return dl != nil && slices.Equal(dl, wl)
}

// upToCallsRead returns the lines of b up to its "calls read:" line, or
// nil without one.
func upToCallsRead(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		out = append(out, l)
		if strings.HasPrefix(l, "calls read:") {
			return out
		}
	}
	return nil
}

// child is what a finished child process measured.
type child struct {
	wall    time.Duration
	cpu     time.Duration // user and system
	sys     time.Duration // system
	peakRSS int64
	faults  int64 // minor page faults (first touches of memory)
	stdout  []byte
}

// runChild runs exe with args to its end: a non-zero exit is an error
// carrying the end of its stderr.
func runChild(ctx context.Context, exe string, args ...string) (child, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = proc.ChildEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		tail := errb.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return child{}, fmt.Errorf("%s %s: %w: %s", filepath.Base(exe), strings.Join(args, " "), err, tail)
	}
	c := child{wall: wall, stdout: out.Bytes()}
	if ps := cmd.ProcessState; ps != nil {
		c.cpu, c.sys = ps.UserTime()+ps.SystemTime(), ps.SystemTime()
		c.peakRSS, c.faults = peakRSS(ps), minorFaults(ps)
	}
	return c, nil
}
