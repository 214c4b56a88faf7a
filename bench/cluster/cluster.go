// Package cluster is the harness of `verdryx bench cluster`: a generated
// trace directory replayed into an in-process three-node JetStream cluster
// (R3 streams and bucket), consumed by 1..N `verdryx serve --nats` child
// processes sharing the partitions, timed from the workers' start until
// every partition is drained and published, and the merged report of the
// published aggregates compared with the direct reduction of the directory.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/internal/natscluster"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracegen"
	"github.com/verdryx/verdryx/tracemsg"
)

// Options configures Run.
type Options struct {
	// Bin is the verdryx executable run as the workers.
	Bin string
	// Workers is the largest worker count; rounds run 1..Workers. 0 means 3.
	Workers int
	// Records is the number of trace rows generated; 0 means 200,000.
	Records int
	// Nodes of the cluster; 0 means 3.
	Nodes int
	// Seed of the generated traces.
	Seed uint64
	// Timeout bounds each round's drain; 0 means 5 minutes.
	Timeout time.Duration
	// Keep keeps the work directory.
	Keep   bool
	Logger *slog.Logger
}

// Round is one worker count's figures.
type Round struct {
	Workers       int     `json:"workers"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// WorkerCPU is the CPU time (user and system) of the worker processes
	// together, from start to their clean stop after the drain; on a
	// machine with fewer cores than processes, CPU per record (not wall
	// throughput) is what shows that a worker added costs no more.
	WorkerCPU            float64 `json:"worker_cpu_seconds"`
	CPUPerMillionRecords float64 `json:"worker_cpu_seconds_per_million_records"`
	// Equal: the merged report of the published partition aggregates
	// equals cost-per-correct (and slo) on the directory, field for field.
	Equal bool   `json:"equal"`
	Diff  string `json:"diff,omitempty"`
}

// Result is the outcome of Run.
type Result struct {
	Records    int     `json:"records"`
	Nodes      int     `json:"nodes"`
	Partitions int     `json:"partitions"`
	Rounds     []Round `json:"rounds"`
	Equal      bool    `json:"equal"`
	Dir        string  `json:"dir,omitempty"`
}

// Run runs the rounds. It returns an error when the harness could not run;
// a report that differs is a Round with Equal false.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Workers <= 0 {
		opts.Workers = 3
	}
	if opts.Records <= 0 {
		opts.Records = 200_000
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Bin == "" {
		return nil, errors.New("bench cluster: no verdryx binary")
	}
	dir, err := os.MkdirTemp("", "verdryx-bench-cluster-")
	if err != nil {
		return nil, err
	}
	res := &Result{Records: opts.Records, Nodes: opts.Nodes, Partitions: tracemsg.DefaultPartitions, Equal: true}
	if opts.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	traces := filepath.Join(dir, "traces")
	if err := os.MkdirAll(traces, 0o755); err != nil {
		return nil, err
	}
	fo := tracegen.DefaultFleetOptions()
	fo.Rows, fo.Seed = int64(opts.Records), opts.Seed
	fo.MeanCallsPerRun, fo.Concurrent = 20, 200
	fo.SegmentRows, fo.RowGroupRows = max(fo.Rows/4, 1), max(fo.Rows/8, 1)
	if _, err := tracegen.GenerateFleet(traces, fo); err != nil {
		return nil, err
	}
	want, err := directReport(ctx, traces)
	if err != nil {
		return nil, err
	}
	for k := 1; k <= opts.Workers; k++ {
		rd, err := round(ctx, opts, filepath.Join(dir, "round-"+strconv.Itoa(k)), traces, k, want)
		if err != nil {
			return res, fmt.Errorf("bench cluster: %d worker(s): %w", k, err)
		}
		opts.Logger.Info("round", "workers", k, "records_per_sec", rd.RecordsPerSec, "equal", rd.Equal)
		res.Rounds = append(res.Rounds, rd)
		res.Equal = res.Equal && rd.Equal
	}
	return res, nil
}

// reportJSON is the comparison form of a reduction: cost per outcome and
// the SLO report.
func reportJSON(r *outcome.Reducer) ([]byte, error) {
	rep, err := r.CheckedReport()
	if err != nil {
		return nil, err
	}
	slo, err := r.SLO(outcome.DefaultSLOOptions(), func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(struct {
		Cost *outcome.Report    `json:"cost"`
		SLO  *outcome.SLOReport `json:"slo"`
	}{rep, slo}, "", " ")
}

func directReport(ctx context.Context, dir string) ([]byte, error) {
	r, err := outcome.NewReducer(outcome.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := segfold.ReduceDir(ctx, dir, r, segfold.DirOptions{Strict: true}); err != nil {
		return nil, err
	}
	return reportJSON(r)
}

// round runs k workers on a fresh cluster under dir.
func round(ctx context.Context, opts Options, dir, traces string, k int, want []byte) (Round, error) {
	rd := Round{Workers: k}
	c, err := natscluster.Start(filepath.Join(dir, "nats"), opts.Nodes, 60*time.Second)
	if err != nil {
		return rd, err
	}
	defer c.Shutdown()
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		return rd, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(20*time.Second))
	if err != nil {
		return rd, err
	}
	s := streams.DefaultSubjects()
	s.Replicas = min(opts.Nodes, 3)
	if _, _, err := streams.EnsureStreams(ctx, js, s, 0); err != nil {
		return rd, err
	}
	if _, err := fleet.EnsurePartitions(ctx, js, s, fleet.PartitionOptions{}); err != nil {
		return rd, err
	}
	if _, err := fleet.EnsureBucket(ctx, js, s.Replicas); err != nil {
		return rd, err
	}
	if _, err := segpub.Publish(ctx, js, s.Traces, traces, segpub.Options{Strict: true, Partitions: s.Partitions}); err != nil {
		return rd, err
	}
	start := time.Now()
	var kids []*exec.Cmd
	defer func() {
		for _, cmd := range kids {
			if cmd.ProcessState == nil {
				stop(cmd)
			}
		}
	}()
	for i := range k {
		data := filepath.Join(dir, "w"+strconv.Itoa(i))
		if err := os.MkdirAll(data, 0o755); err != nil {
			return rd, err
		}
		log, err := os.Create(filepath.Join(dir, "w"+strconv.Itoa(i)+".log"))
		if err != nil {
			return rd, err
		}
		defer log.Close()
		cmd := exec.Command(opts.Bin, "serve", "--nats", c.URLs(), "--data", data, "--http", "", "--instance", "w"+strconv.Itoa(i),
			"--replicas", strconv.Itoa(s.Replicas), "--partitions", strconv.Itoa(s.Partitions))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = childEnv()
		if err := cmd.Start(); err != nil {
			return rd, fmt.Errorf("start worker %d: %w", i, err)
		}
		kids = append(kids, cmd)
	}
	if err := waitDrained(ctx, js, s, opts.Timeout); err != nil {
		return rd, err
	}
	d := time.Since(start)
	rd.Seconds = d.Seconds()
	rd.RecordsPerSec = float64(opts.Records) / d.Seconds()
	agg, err := fleet.ReadAggregate(ctx, js, s)
	if err != nil {
		return rd, err
	}
	r, err := agg.Reducer(outcome.Options{})
	if err != nil {
		return rd, err
	}
	got, err := reportJSON(r)
	if err != nil {
		return rd, err
	}
	for _, cmd := range kids {
		stop(cmd)
		if ps := cmd.ProcessState; ps != nil {
			rd.WorkerCPU += (ps.UserTime() + ps.SystemTime()).Seconds()
		}
	}
	rd.CPUPerMillionRecords = rd.WorkerCPU / (float64(opts.Records) / 1e6)
	rd.Equal = bytes.Equal(got, want)
	if !rd.Equal {
		rd.Diff = fmt.Sprintf("merged report (%d calls) differs from the direct reduction", agg.Calls())
	}
	return rd, nil
}

// childEnv is the environment without VERDRYX_* variables.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) < 8 || kv[:8] != "VERDRYX_" {
			env = append(env, kv)
		}
	}
	return env
}

// stop interrupts a worker and waits up to 30 s, then kills it.
func stop(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitDrained polls until every partition consumer has nothing pending or
// unacked (acks follow the partition snapshots, so the aggregates are
// published) and every partition with records has a published aggregate.
func waitDrained(ctx context.Context, js jetstream.JetStream, s streams.Subjects, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		busy := ""
		for p := range s.Partitions {
			c, err := js.Consumer(ctx, s.TracesStream, fleet.PartitionConsumer(p))
			if err == nil {
				var info *jetstream.ConsumerInfo
				if info, err = c.Info(ctx); err == nil && (info.NumPending > 0 || info.NumAckPending > 0) {
					busy = fmt.Sprintf("partition %d: %d pending, %d unacked", p, info.NumPending, info.NumAckPending)
				}
			}
			if err != nil {
				busy = err.Error()
			}
			if busy != "" {
				break
			}
		}
		if busy == "" {
			if _, err := fleet.ReadAggregate(ctx, js, s); err != nil {
				busy = err.Error()
			}
		}
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained after %s: %s", timeout, busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
