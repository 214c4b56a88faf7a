// Package ingest holds the ingest harnesses. Run is `verdryx bench worker`:
// trace records published to their partitions and processed end to end by
// the worker's partitioned trace consumers (a pinned pull per partition,
// one SQLite transaction per batch, acks after the store commit and the
// partition snapshot) beside the raw JetStream consume-with-ack rate of the
// same messages, on the same embedded server and stream, in one run.
// RunNDJSON is `verdryx bench ingest`: a generated per-call NDJSON file read
// by encoding/json, by the record decoder and by the whole cost-per-correct
// --input reduction, in one run.
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
)

// Options configures Run. Zero Records, Batch and Rounds take 1,000,000,
// 512 and 3.
type Options struct {
	Records int // per-call records to publish
	Batch   int // worker batch size (messages per transaction)
	// Rounds is the number of measured rounds, each on a fresh server:
	// publish, raw consume, worker consume.
	Rounds int
	// OnPublished, when set, is called once the records of a round are
	// published, with the round (from 1) and the time publishing took.
	OnPublished func(round, records int, d time.Duration)
	// OnRound, when set, is called with the figures of each round.
	OnRound func(Round)
}

// Round holds the figures of one round. Durations are in nanoseconds.
type Round struct {
	Round        int           `json:"round"`
	Publish      time.Duration `json:"publish_ns"`
	Raw          time.Duration `json:"raw_ns"`
	Worker       time.Duration `json:"worker_ns"`
	RawPerSec    float64       `json:"raw_msgs_per_sec"`
	WorkerPerSec float64       `json:"worker_records_per_sec"`
	Ratio        float64       `json:"worker_to_raw_ratio"`
	Stored       int64         `json:"stored"`
	NotAcked     int64         `json:"not_acked"`
}

// Result holds the figures of a run: the best raw and the best worker
// round (the machine's other load only ever slows a pass down, so the best
// of each is the least disturbed reading), their ratio, the median of the
// rounds' own ratios, and every round.
type Result struct {
	Records      int     `json:"records"`
	RawPerSec    float64 `json:"raw_msgs_per_sec"`
	WorkerPerSec float64 `json:"worker_records_per_sec"`
	// Ratio is the best worker rate over the best raw rate.
	Ratio float64 `json:"worker_to_raw_ratio"`
	// MedianRatio is the median of the rounds' worker/raw ratios.
	MedianRatio float64 `json:"median_round_ratio"`
	Rounds      []Round `json:"rounds"`
}

// Check returns an error when the worker did not store every record in
// some round.
func (r Result) Check() error {
	for _, rd := range r.Rounds {
		if rd.Stored != int64(r.Records) {
			return fmt.Errorf("bench worker: round %d: stored %d calls, want %d", rd.Round, rd.Stored, r.Records)
		}
	}
	return nil
}

// ackCounter counts acked messages for the worker benchmark.
type ackCounter struct{ acked, other atomic.Int64 }

func (a *ackCounter) Received(string, int)       {}
func (a *ackCounter) Acked(_ string, n int)      { a.acked.Add(int64(n)) }
func (a *ackCounter) Naked(_ string, n int)      { a.other.Add(int64(n)) }
func (a *ackCounter) Terminated(_ string, n int) { a.other.Add(int64(n)) }
func (a *ackCounter) DeadLettered(string, int)   {}

// Run runs opts.Rounds rounds, each publishing opts.Records records to an
// embedded server in a fresh temporary directory, then timing a raw
// consume-with-ack of them and the worker's trace consumers storing them
// into a fresh store. Raw and worker passes alternate, so both meet the
// same machine.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.Records == 0 {
		opts.Records = 1_000_000
	}
	if opts.Batch == 0 {
		opts.Batch = 512
	}
	if opts.Rounds == 0 {
		opts.Rounds = 3
	}
	if opts.Records < 0 || opts.Batch < 0 || opts.Rounds < 0 {
		return Result{}, errors.New("bench worker: records, batch and rounds must be positive")
	}
	var rounds []Round
	for k := 1; k <= opts.Rounds; k++ {
		rd, err := runRound(ctx, opts, k)
		if err != nil {
			return Result{}, fmt.Errorf("bench worker: round %d: %w", k, err)
		}
		if opts.OnRound != nil {
			opts.OnRound(rd)
		}
		rounds = append(rounds, rd)
	}
	return summarize(opts.Records, rounds), nil
}

// summarize returns the Result of rounds (at least one).
func summarize(records int, rounds []Round) Result {
	res := Result{Records: records, Rounds: rounds}
	var ratios []float64
	for _, rd := range rounds {
		res.RawPerSec = max(res.RawPerSec, rd.RawPerSec)
		res.WorkerPerSec = max(res.WorkerPerSec, rd.WorkerPerSec)
		ratios = append(ratios, rd.Ratio)
	}
	res.Ratio = res.WorkerPerSec / res.RawPerSec
	slices.Sort(ratios)
	if n := len(ratios); n%2 == 1 {
		res.MedianRatio = ratios[n/2]
	} else {
		res.MedianRatio = (ratios[n/2-1] + ratios[n/2]) / 2
	}
	return res
}

// runRound is one round of Run on its own server and store.
func runRound(ctx context.Context, opts Options, round int) (Round, error) {
	dir, err := os.MkdirTemp("", "verdryx-bench-worker-")
	if err != nil {
		return Round{}, err
	}
	defer os.RemoveAll(dir)
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	if err != nil {
		return Round{}, err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return Round{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		return Round{}, err
	}
	subjects := streams.DefaultSubjects()
	if _, _, err := streams.EnsureStreams(ctx, js, subjects, 0); err != nil {
		return Round{}, err
	}
	rd := Round{Round: round}
	start := time.Now()
	if err := publishRecords(js, subjects, opts.Records); err != nil {
		return Round{}, err
	}
	rd.Publish = time.Since(start)
	if opts.OnPublished != nil {
		opts.OnPublished(round, opts.Records, rd.Publish)
	}
	if rd.Raw, err = rawConsume(ctx, js, subjects.TracesStream, opts.Records); err != nil {
		return Round{}, err
	}
	rd.Worker, rd.Stored, rd.NotAcked, err = workerConsume(ctx, js, subjects, filepath.Join(dir, "bench.db"), opts.Records, opts.Batch)
	if err != nil {
		return Round{}, err
	}
	rd.RawPerSec = float64(opts.Records) / rd.Raw.Seconds()
	rd.WorkerPerSec = float64(opts.Records) / rd.Worker.Seconds()
	rd.Ratio = rd.WorkerPerSec / rd.RawPerSec
	return rd, nil
}

// publishRecords publishes n generated per-call records to their
// partition subjects.
func publishRecords(js jetstream.JetStream, s streams.Subjects, n int) error {
	for i := 0; i < n; i++ {
		run, step := fmt.Sprintf("run-%d", i/10), uint32(i%10)
		c := calls.Call{TSMillis: int64(1_700_000_000_000 + i), RunID: run, HasRunID: true, Model: "gpt-4o-mini", Decision: "allow",
			InputTokens: 900, OutputTokens: 150, CostMicroUSD: int64(100 + i%37), Step: step, HasStep: true,
			AgentID: fmt.Sprintf("agent://acme.example/bot-%d", i%7)}
		if step == 9 {
			c.Outcome = []string{"case_resolved", "escalated", "abandoned"}[i%3]
		}
		b, _ := json.Marshal(tracemsg.RecordOf(c))
		if _, err := js.PublishAsync(streams.TraceSubject(s.Traces, tracemsg.PartitionOf(run, s.Partitions)), b); err != nil {
			return err
		}
	}
	<-js.PublishAsyncComplete()
	return nil
}

// rawConsume times consuming and acking n messages of stream with a
// plain consumer.
func rawConsume(ctx context.Context, js jetstream.JetStream, stream string, n int) (time.Duration, error) {
	raw, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "bench-raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 20000})
	if err != nil {
		return 0, err
	}
	var got atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	cc, err := raw.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if got.Add(1) == int64(n) {
			close(done)
		}
	}, jetstream.PullMaxMessages(1024))
	if err != nil {
		return 0, err
	}
	<-done
	d := time.Since(start)
	cc.Stop()
	return d, nil
}

// workerConsume times the worker's partitioned trace consumers storing n
// records into a fresh store at dbPath; it returns the calls stored and the
// messages settled other than by an ack.
func workerConsume(ctx context.Context, js jetstream.JetStream, subjects streams.Subjects, dbPath string, n, batch int) (d time.Duration, stored, notAcked int64, err error) {
	traces, _, err := streams.EnsureStreams(ctx, js, subjects, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	counter := &ackCounter{}
	f, err := fleet.New(ctx, js, traces, fleet.Options{Subjects: subjects, Instance: "bench", Batch: batch, Counters: counter})
	if err != nil {
		return 0, 0, 0, err
	}
	pctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- f.Run(pctx) }()
	for counter.acked.Load()+counter.other.Load() < int64(n) {
		select {
		case err := <-errc:
			cancel()
			return 0, 0, 0, fmt.Errorf("worker stopped early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	d = time.Since(start)
	cancel()
	if err := <-errc; err != nil {
		return 0, 0, 0, err
	}
	agg, err := fleet.ReadAggregate(ctx, js, subjects)
	if err != nil {
		return 0, 0, 0, err
	}
	return d, agg.Calls(), counter.other.Load(), nil
}
