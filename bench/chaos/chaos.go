// Package chaos is the fault benchmark of `verdryx bench chaos`: it runs
// `verdryx serve` as a child process on its own data directory, replays a
// generated trace directory into it, kills it with SIGKILL at seeded random
// moments (each restart also restarts the embedded NATS server), restarts
// it once gracefully, submits eval requests throughout, waits for the
// inputs to drain, and then checks exactly-once: every call of the
// directory stored once, every eval request run once, every event chain
// (the events file and each NATS events subject) verifying.
//
// The harness reports what it finds; it never retries a check until it
// passes. Everything runs on loopback, under one temporary directory that
// is removed unless Options.Keep, and every child is killed before Run
// returns, on error and on panic too.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/bench/proc"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/internal/natscluster"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
)

// MinRecords is the smallest trace directory Run accepts.
const MinRecords = 100

// Options configure one chaos run.
type Options struct {
	// Bin is the verdryx executable run as the children (serve, replay,
	// cost-per-correct). Required.
	Bin string
	// Kills is the number of SIGKILLs of the serve child (>= 0).
	Kills int
	// Records is the number of trace rows generated (>= MinRecords).
	Records int
	// Seed drives the trace content, the kill moments and the request ids.
	Seed uint64
	// EvalRequests is the number of eval requests submitted during the run.
	EvalRequests int
	// EvalSet is the eval-set file the requests name. Its directory is
	// passed to serve as --root and the request names the file relative to
	// it.
	EvalSet string
	// DrainTimeout bounds the final wait for every consumer to have nothing
	// pending or unacknowledged (0 means 90 s). A request in flight at a
	// kill is redelivered after the eval consumer's AckWait (30 s); a run
	// that does not drain in time is reported, not hidden.
	DrainTimeout time.Duration
	// Cluster, when >= 3, runs the serve children against an in-process
	// JetStream cluster of that many nodes (streams and buckets with 3
	// replicas) instead of their embedded server, and stops and restarts a
	// node at every phase: one is down across each worker stop and the
	// next worker's start. 0 means the embedded server.
	Cluster int
	// Keep leaves the work directory (traces, data, child logs) in place.
	Keep bool
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Chain is the verification of one event chain.
type Chain struct {
	Kind         string `json:"kind"` // "file" or "subject"
	Name         string `json:"name"`
	Events       int    `json:"events"`
	Chained      int    `json:"chained"`
	Heads        int    `json:"heads"`
	Unverifiable int    `json:"unverifiable"`
	Breaks       int    `json:"breaks"`
	Malformed    int    `json:"malformed"`
	Invalid      int    `json:"invalid"`
	// DuplicateEvents counts events whose content appeared earlier in the
	// same chain (emitted twice); a chain with any does not count as
	// verified.
	DuplicateEvents int    `json:"duplicate_events"`
	OK              bool   `json:"ok"`
	Error           string `json:"error,omitempty"`
}

// Result is what a run found. Problems lists every finding in words; OK is
// false when a call was lost or duplicated, the store's report differs from
// cost-per-correct's, an eval request did not run exactly once or a chain
// did not verify.
type Result struct {
	Seed             uint64 `json:"seed"`
	Kills            int    `json:"kills"`
	GracefulRestarts int    `json:"graceful_restarts"`
	ServeStarts      int    `json:"serve_starts"`
	Records          int64  `json:"records"`
	// ClusterNodes is the size of the cluster the workers ran against (0:
	// the embedded server); NodeStops counts the node stops.
	ClusterNodes int `json:"cluster_nodes"`
	NodeStops    int `json:"node_stops"`
	// UnplannedExits counts serve children that exited without being
	// stopped: a worker that does not stay up.
	UnplannedExits  int  `json:"unplanned_exits"`
	Segments        int  `json:"segments"`
	EqualStepRows   int  `json:"equal_step_rows"`
	ReplayAttempts  int  `json:"replay_attempts"`
	ReplayCompleted bool `json:"replay_completed"`
	Drained         bool `json:"drained"`

	// DirectCalls and DirectRuns come from the directory itself
	// (cost-per-correct); StoreCalls and StoreRuns from the worker's store.
	DirectCalls int64 `json:"direct_calls"`
	DirectRuns  int64 `json:"direct_runs"`
	StoreCalls  int64 `json:"store_calls"`
	StoreRuns   int64 `json:"store_runs"`
	// Lost counts calls of the directory missing from the store, Duplicated
	// calls the store holds more often than the directory, run by run (the
	// store keeps each run's reduction state, not its calls: a loss and a
	// duplicate within one run show in ReportDiffs instead).
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	// ReportDiffs lists each field of the per-outcome report that differs
	// between cost-per-correct on the directory and the store.
	ReportDiffs []string `json:"report_diffs"`
	DeadLetters uint64   `json:"dead_letters"`

	EvalRequests int `json:"eval_requests"`
	// EvalRuns is the number of stored eval runs carrying one of the
	// submitted request ids; EvalRunsByRequest has each id's count.
	EvalRuns          int            `json:"eval_runs"`
	EvalRunsByRequest map[string]int `json:"eval_runs_by_request"`
	// EvalNotRecorded lists request ids with a stored run but no recorded
	// result: a redelivery would run them again.
	EvalNotRecorded []string `json:"eval_not_recorded"`

	ChainsVerified int     `json:"chains_verified"`
	Chains         []Chain `json:"chains"`

	ElapsedS float64  `json:"elapsed_s"`
	Dir      string   `json:"dir,omitempty"`
	Problems []string `json:"problems"`
	OK       bool     `json:"ok"`
}

func (r *Result) problemf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Run performs one chaos run. An error means the harness itself could not
// run (bad options, a child that never came up, an unreadable store);
// every finding about verdryx is in the Result.
func Run(ctx context.Context, opts Options) (res *Result, err error) {
	if opts.Bin == "" {
		return nil, errors.New("chaos: no verdryx binary")
	}
	if opts.Kills < 0 || opts.EvalRequests < 0 {
		return nil, errors.New("chaos: kills and eval requests must not be negative")
	}
	if opts.Records < MinRecords {
		return nil, fmt.Errorf("chaos: at least %d records", MinRecords)
	}
	if opts.Cluster != 0 && opts.Cluster < 3 {
		return nil, errors.New("chaos: a cluster has at least 3 nodes")
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 90 * time.Second
	}
	evalSet, err := filepath.Abs(opts.EvalSet)
	if err != nil {
		return nil, fmt.Errorf("chaos: eval set: %w", err)
	}
	if _, err := os.Stat(evalSet); err != nil {
		return nil, fmt.Errorf("chaos: eval set: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	work, err := os.MkdirTemp("", "verdryx-chaos-")
	if err != nil {
		return nil, fmt.Errorf("chaos: work directory: %w", err)
	}
	r := &runner{
		opts: opts, log: log, evalSet: evalSet,
		rng:    rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)),
		work:   work,
		traces: filepath.Join(work, "traces"),
		data:   filepath.Join(work, "data"),
		logs:   filepath.Join(work, "logs"),
		res:    &Result{Seed: opts.Seed, EvalRunsByRequest: map[string]int{}, ReportDiffs: []string{}, Problems: []string{}, Chains: []Chain{}, EvalNotRecorded: []string{}},
	}
	defer func() {
		r.cleanup()
		if res != nil {
			res.ElapsedS = time.Since(start).Seconds()
		}
		if opts.Keep {
			if res != nil {
				res.Dir = work
			}
		} else if rerr := os.RemoveAll(work); rerr != nil {
			log.Warn("remove work directory", "dir", work, "err", rerr)
		}
	}()
	for _, d := range []string{r.traces, r.data, r.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
	}
	if err := r.run(ctx); err != nil {
		return r.res, err
	}
	return r.res, nil
}

// runner holds one run's state. Only Run's goroutine touches it.
type runner struct {
	opts    Options
	log     *slog.Logger
	evalSet string
	rng     *rand.Rand

	work, traces, data, logs string
	port                     int
	url                      string

	nc *nats.Conn
	js jetstream.JetStream
	// agg is the fleet's trace aggregate once drained (aggErr: why not).
	agg    *fleet.Aggregate
	aggErr error

	cluster *natscluster.Cluster // with Options.Cluster
	down    int                  // the node stopped, -1 when none

	serve      *proc.Child
	replay     *proc.Child
	replayDone bool
	children   []*proc.Child
	requestIDs []string
	published  int

	res *Result
}

// cleanup kills every child still running and closes the connection.
func (r *runner) cleanup() {
	for _, c := range r.children {
		if !c.Exited() && !c.Kill() {
			r.log.Warn("child did not exit after SIGKILL", "child", c.Name)
		}
	}
	if r.nc != nil {
		r.nc.Close()
	}
	if r.cluster != nil {
		r.cluster.Shutdown()
	}
}

func (r *runner) spawn(name string, args ...string) (*proc.Child, error) {
	c, err := proc.Spawn(r.opts.Bin, r.logs, name, args...)
	if err != nil {
		return nil, err
	}
	r.children = append(r.children, c)
	return c, nil
}

// stop ends a serve child: a SIGKILL, or a graceful SIGTERM. A final stop
// is not a restart and is not counted.
type stop struct{ graceful, final bool }

func (r *runner) run(ctx context.Context) error {
	ts, err := generateTraces(r.traces, r.opts.Records, r.opts.Seed)
	if err != nil {
		return err
	}
	r.res.Records, r.res.Segments, r.res.EqualStepRows = ts.rows, ts.segments, ts.equalStepRows
	r.log.Info("traces generated", "rows", ts.rows, "segments", ts.segments, "equal_step_rows", ts.equalStepRows)

	r.down = -1
	if r.opts.Cluster > 0 {
		if r.cluster, err = natscluster.Start(filepath.Join(r.work, "cluster"), r.opts.Cluster, 60*time.Second); err != nil {
			return fmt.Errorf("chaos: cluster: %w", err)
		}
		r.url = r.cluster.URLs()
		r.res.ClusterNodes = r.opts.Cluster
	} else {
		if r.port, err = freePort(); err != nil {
			return err
		}
		r.url = "nats://127.0.0.1:" + strconv.Itoa(r.port)
	}
	r.nc, err = nats.Connect(r.url, nats.Name("verdryx-bench-chaos"), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ReconnectJitter(0, 0))
	if err != nil {
		return fmt.Errorf("chaos: connect %s: %w", r.url, err)
	}
	if r.js, err = jetstream.New(r.nc); err != nil {
		return fmt.Errorf("chaos: jetstream: %w", err)
	}
	for i := range r.opts.EvalRequests {
		r.requestIDs = append(r.requestIDs, fmt.Sprintf("chaos-%d-%03d", r.opts.Seed, i))
	}
	r.res.EvalRequests = len(r.requestIDs)

	// The stops: every SIGKILL and one graceful restart, at a seeded place.
	stops := make([]stop, r.opts.Kills)
	graceAt := r.rng.IntN(r.opts.Kills + 1)
	stops = append(stops[:graceAt], append([]stop{{graceful: true}}, stops[graceAt:]...)...)
	phases := len(stops) + 1
	span := 1500*time.Millisecond + time.Duration(r.opts.Records)*time.Second/40000

	for i, s := range stops {
		if err := r.startServe(ctx); err != nil {
			return err
		}
		if err := r.ensureReplay(); err != nil {
			return err
		}
		// The phase's eval requests go out at a random moment and the stop
		// follows within 400 ms, so some stops land while a request runs.
		before := 300*time.Millisecond + time.Duration(r.rng.Int64N(int64(span)))
		after := time.Duration(r.rng.Int64N(int64(400 * time.Millisecond)))
		if err := r.pause(ctx, before); err != nil {
			return err
		}
		r.restartNode()
		r.publishEvals(ctx, (i+1)*len(r.requestIDs)/phases)
		r.stopNode()
		if err := r.pause(ctx, after); err != nil {
			return err
		}
		r.stopServe(s, before+after)
	}

	// The final start: finish the replay, the requests, and drain.
	if err := r.startServe(ctx); err != nil {
		return err
	}
	r.restartNode()
	r.publishEvals(ctx, len(r.requestIDs))
	r.finishReplay(ctx)
	r.res.Drained = r.drain(ctx)
	// Every record acked is in its partition's snapshot in the bucket:
	// read while the server is up (checkTraces compares it).
	r.agg, r.aggErr = fleet.ReadAggregate(ctx, r.js, streams.DefaultSubjects())
	r.stopServe(stop{graceful: true, final: true}, 0)
	r.nc.Close()

	if err := r.measure(ctx); err != nil {
		return err
	}
	r.verdict()
	return nil
}

// stopNode stops a random node of the cluster (none without one): it stays
// down across the worker's stop and the next worker's start.
func (r *runner) stopNode() {
	if r.cluster == nil || r.down >= 0 {
		return
	}
	r.down = r.rng.IntN(r.cluster.Size())
	r.cluster.StopNode(r.down)
	r.res.NodeStops++
	r.log.Info("cluster node stopped", "node", r.down)
}

// restartNode restarts the node stopNode stopped and waits for the
// cluster to have a meta leader again.
func (r *runner) restartNode() {
	if r.cluster == nil || r.down < 0 {
		return
	}
	if err := r.cluster.RestartNode(r.down); err != nil {
		r.res.problemf("cluster node %d did not restart: %v", r.down, err)
		return
	}
	if err := r.cluster.WaitReady(60 * time.Second); err != nil {
		r.res.problemf("cluster after restarting node %d: %v", r.down, err)
	}
	r.log.Info("cluster node restarted", "node", r.down)
	r.down = -1
}

// freePort returns a loopback TCP port that was free a moment ago; serve's
// embedded NATS server listens on it at every start.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("chaos: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServe starts `verdryx serve` on the data directory and waits until
// its streams and consumers answer (at most 60 s).
func (r *runner) startServe(ctx context.Context) error {
	r.res.ServeStarts++
	n := r.res.ServeStarts
	nats := []string{"--nats-listen", "127.0.0.1:" + strconv.Itoa(r.port)}
	if r.cluster != nil {
		nats = []string{"--nats", r.url, "--replicas", "3"}
	}
	c, err := r.spawn(fmt.Sprintf("serve-%02d", n), append(append([]string{"serve",
		"--data", r.data}, nats...),
		"--http=",
		"--events", filepath.Join(r.data, "events.ndjson"),
		"--root", filepath.Dir(r.evalSet),
		"--rag-corpus=",
		// The traces are up to four days old: kept by the hour (as a
		// live fleet's calls are) while the workers are killed.
		"--hours-kept", "7d",
		"--instance", "chaos")...)
	if err != nil {
		return err
	}
	r.serve = c
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c.Exited() {
			r.res.UnplannedExits++
			return fmt.Errorf("chaos: serve start %d exited before it was ready (%s): %q", n, c.Describe(), c.LastLine())
		}
		if r.ready(ctx) {
			r.log.Info("serve ready", "start", n)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: serve start %d not ready after 60s; log %s", n, c.Log)
		}
		if err := r.pause(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// ready reports whether both durable consumers answer an info request.
func (r *runner) ready(ctx context.Context) bool {
	s := streams.DefaultSubjects()
	for _, sc := range [][2]string{{s.TracesStream, streams.TracesConsumer}, {s.EvalStream, streams.EvalConsumer}} {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := r.js.Consumer(cctx, sc[0], sc[1])
		cancel()
		if err != nil {
			return false
		}
	}
	return true
}

// pause waits d, or until ctx is done.
func (r *runner) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stopServe kills (or gracefully stops) the serve child, and a replay child
// still running with it (it is run again after the restart).
func (r *runner) stopServe(s stop, after time.Duration) {
	c := r.serve
	if c.Exited() {
		r.res.UnplannedExits++
		r.res.problemf("%s exited by itself before its stop (%s): %q", c.Name, c.Describe(), c.LastLine())
	} else if s.graceful {
		if !s.final {
			r.res.GracefulRestarts++
		}
		c.Signal(syscall.SIGTERM)
		if !c.Wait(60 * time.Second) {
			r.res.problemf("%s did not exit within 60s of SIGTERM: killed", c.Name)
			c.Kill()
		} else if c.ExitCode() != 0 {
			r.res.problemf("%s exited with %s after SIGTERM: %q", c.Name, c.Describe(), c.LastLine())
		}
		r.log.Info("serve stopped gracefully", "child", c.Name, "after", after.Round(time.Millisecond))
	} else {
		r.res.Kills++
		c.Kill()
		r.log.Info("serve killed", "child", c.Name, "after", after.Round(time.Millisecond))
	}
	if r.replay != nil && !r.replay.Exited() {
		r.replay.Kill()
		r.log.Info("replay interrupted by the stop", "child", r.replay.Name)
	}
	r.noteReplay()
}

// noteReplay records the outcome of a replay child that has exited.
func (r *runner) noteReplay() {
	if r.replay == nil || !r.replay.Exited() || r.replayDone {
		return
	}
	if r.replay.ExitCode() == 0 {
		r.replayDone = true
		r.res.ReplayCompleted = true
		r.log.Info("replay completed", "child", r.replay.Name)
	}
}

// ensureReplay starts a replay child unless one is running or one has
// completed. Replay is idempotent (message ids per segment row), so an
// interrupted replay is simply run again.
func (r *runner) ensureReplay() error {
	r.noteReplay()
	if r.replayDone || (r.replay != nil && !r.replay.Exited()) {
		return nil
	}
	if r.replay != nil && r.replay.ExitCode() > 0 {
		r.res.problemf("note: %s failed (%s) with serve up: %q; rerunning", r.replay.Name, r.replay.Describe(), r.replay.LastLine())
	}
	r.res.ReplayAttempts++
	c, err := r.spawn(fmt.Sprintf("replay-%02d", r.res.ReplayAttempts), "replay", "--nats", r.url, r.traces)
	if err != nil {
		return err
	}
	r.replay = c
	return nil
}

// finishReplay runs replay children until one completes, at most 5 more
// attempts within the drain timeout.
func (r *runner) finishReplay(ctx context.Context) {
	deadline := time.Now().Add(r.opts.DrainTimeout)
	for range 6 {
		if err := r.ensureReplay(); err != nil {
			r.res.problemf("replay: %v", err)
			return
		}
		if r.replayDone {
			return
		}
		for !r.replay.Exited() && time.Now().Before(deadline) && ctx.Err() == nil {
			r.replay.Wait(200 * time.Millisecond)
		}
		if !r.replay.Exited() {
			r.replay.Kill()
			r.res.problemf("%s did not finish within the drain timeout: killed; log %s", r.replay.Name, r.replay.Log)
			return
		}
		r.noteReplay()
	}
	if !r.replayDone {
		r.res.problemf("replay never completed after %d attempts; last log %s", r.res.ReplayAttempts, r.replay.Log)
	}
}

// evalRequest is the JSON of one submitted request.
type evalRequest struct {
	RequestID   string `json:"request_id"`
	EvalSetPath string `json:"eval_set_path"`
	Model       string `json:"model"`
	AgentID     string `json:"agent_id"`
}

// publishEvals publishes the requests up to index upto, each with message
// id eval:<request_id> (as serve --eval-request does), retrying a publish
// for at most 30 s.
func (r *runner) publishEvals(ctx context.Context, upto int) {
	subject := streams.DefaultSubjects().EvalRequests
	for ; r.published < upto; r.published++ {
		id := r.requestIDs[r.published]
		b, _ := json.Marshal(evalRequest{RequestID: id, EvalSetPath: filepath.Base(r.evalSet), Model: "stub",
			AgentID: "agent://chaos.example/bench/eval-bot"})
		deadline := time.Now().Add(30 * time.Second)
		for {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := r.js.Publish(pctx, subject, b, jetstream.WithMsgID("eval:"+id))
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.res.problemf("eval request %s could not be published: %v", id, err)
				break
			}
			_ = r.pause(ctx, 200*time.Millisecond)
		}
	}
}

// drain waits until the replay is done and both consumers have nothing
// pending or unacknowledged, twice in a row, within the drain timeout.
func (r *runner) drain(ctx context.Context) bool {
	s := streams.DefaultSubjects()
	deadline := time.Now().Add(r.opts.DrainTimeout)
	idle := 0
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if r.serve.Exited() {
			r.res.UnplannedExits++
			r.res.problemf("%s exited while draining (%s): %q", r.serve.Name, r.serve.Describe(), r.serve.LastLine())
			return false
		}
		busy := !r.replayDone
		last = ""
		// The router of the bare subject, the eval consumer and every
		// partition consumer (replay publishes to the partitions); a
		// partition is done when its ack floor reached its subject's
		// newest record.
		type cons struct{ stream, name, subject string }
		all := []cons{{s.TracesStream, streams.TracesConsumer, ""}, {s.EvalStream, streams.EvalConsumer, ""}}
		for p := range tracemsg.DefaultPartitions {
			all = append(all, cons{s.TracesStream, fleet.PartitionConsumer(p), streams.TraceSubject(s.Traces, p)})
		}
		for _, sc := range all {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			info, newest, err := func() (*jetstream.ConsumerInfo, uint64, error) {
				c, err := r.js.Consumer(cctx, sc.stream, sc.name)
				if err != nil {
					return nil, 0, err
				}
				info, err := c.Info(cctx)
				if err != nil || sc.subject == "" {
					return info, 0, err
				}
				str, err := r.js.Stream(cctx, sc.stream)
				if err != nil {
					return nil, 0, err
				}
				m, err := str.GetLastMsgForSubject(cctx, sc.subject)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					return info, 0, nil
				}
				if err != nil {
					return nil, 0, err
				}
				return info, m.Sequence, nil
			}()
			cancel()
			if err != nil {
				busy = true
				last += fmt.Sprintf(" %s: %v;", sc.name, err)
				continue
			}
			last += fmt.Sprintf(" %s: %d pending, %d unacked, acked through %d of %d;", sc.name, info.NumPending, info.NumAckPending, info.AckFloor.Stream, newest)
			if info.NumPending > 0 || info.NumAckPending > 0 || info.AckFloor.Stream < newest {
				// An eval request in flight at a kill is redelivered after
				// the eval consumer's AckWait (30 s), a dead worker's
				// partition moves after its pinned TTL: wait for them.
				busy = true
			}
		}
		if !busy {
			if idle++; idle >= 2 {
				return true
			}
		} else {
			idle = 0
		}
		_ = r.pause(ctx, 250*time.Millisecond)
	}
	r.res.problemf("not drained within %s (an eval request in flight at a kill waits for the eval consumer's AckWait); at the deadline:%s",
		r.opts.DrainTimeout, last)
	return false
}
