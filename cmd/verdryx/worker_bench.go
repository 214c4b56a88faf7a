package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/worker"
)

// ackCounter counts acked messages for the worker benchmark.
type ackCounter struct{ acked, other atomic.Int64 }

func (a *ackCounter) Received(string, int)       {}
func (a *ackCounter) Acked(_ string, n int)      { a.acked.Add(int64(n)) }
func (a *ackCounter) Naked(_ string, n int)      { a.other.Add(int64(n)) }
func (a *ackCounter) Terminated(_ string, n int) { a.other.Add(int64(n)) }
func (a *ackCounter) DeadLettered(string, int)   {}

// benchWorker measures trace records processed end to end by the worker's
// trace consumer (batched fetch, one SQLite transaction per batch, acks
// after commit) beside the raw JetStream consume-with-ack rate, on the same
// embedded server and stream, in one run.
func benchWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench worker", "", "Benchmark the worker's trace ingestion against raw JetStream consume-with-ack.", stderr)
	records := fs.Int("records", 1_000_000, "per-call records to publish")
	batch := fs.Int("batch", 512, "worker batch size (messages per transaction)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *records <= 0 {
		return usageErrorf("bench worker: --records must be positive")
	}
	dir, err := os.MkdirTemp("", "verdryx-bench-worker-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ns, err := worker.StartEmbedded(filepath.Join(dir, "nats"), "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		return err
	}
	subjects := worker.DefaultSubjects()
	if _, _, err := worker.EnsureStreams(ctx, js, subjects, 0); err != nil {
		return err
	}

	// Publish the records.
	start := time.Now()
	if err := publishBenchRecords(js, subjects.Traces, *records); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "published %d records in %s\n", *records, time.Since(start).Round(time.Millisecond))

	// Raw consume-with-ack on a plain consumer of the same stream.
	rawDur, err := benchRawConsume(ctx, js, subjects.TracesStream, *records)
	if err != nil {
		return err
	}

	// The worker's trace consumer into a fresh store.
	workerDur, n, notAcked, err := benchWorkerConsume(ctx, js, subjects, filepath.Join(dir, "bench.db"), *records, *batch)
	if err != nil {
		return err
	}
	rawRate := float64(*records) / rawDur.Seconds()
	workerRate := float64(*records) / workerDur.Seconds()
	fmt.Fprintf(stdout, "raw JetStream consume+ack:      %10.0f msgs/s (%s)\n", rawRate, rawDur.Round(time.Millisecond))
	fmt.Fprintf(stdout, "worker (store commit, then ack): %10.0f records/s (%s, %d stored, %d not acked)\n", workerRate, workerDur.Round(time.Millisecond), n, notAcked)
	fmt.Fprintf(stdout, "worker / raw: %.2f (target >= 0.50)\n", workerRate/rawRate)
	if n != int64(*records) {
		return fmt.Errorf("bench worker: stored %d calls, want %d", n, *records)
	}
	return nil
}

// publishBenchRecords publishes n generated per-call records to subject.
func publishBenchRecords(js jetstream.JetStream, subject string, n int) error {
	for i := 0; i < n; i++ {
		run, step := fmt.Sprintf("run-%d", i/10), uint32(i%10)
		c := calls.Call{TSMillis: int64(1_700_000_000_000 + i), RunID: run, HasRunID: true, Model: "gpt-4o-mini", Decision: "allow",
			InputTokens: 900, OutputTokens: 150, CostMicroUSD: int64(100 + i%37), Step: step, HasStep: true,
			AgentID: fmt.Sprintf("agent://acme.example/bot-%d", i%7)}
		if step == 9 {
			c.Outcome = []string{"case_resolved", "escalated", "abandoned"}[i%3]
		}
		b, _ := json.Marshal(worker.RecordOf(c))
		if _, err := js.PublishAsync(subject, b); err != nil {
			return err
		}
	}
	<-js.PublishAsyncComplete()
	return nil
}

// benchRawConsume times consuming and acking n messages of stream with a
// plain consumer.
func benchRawConsume(ctx context.Context, js jetstream.JetStream, stream string, n int) (time.Duration, error) {
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

// benchWorkerConsume times the worker's trace consumer storing n records
// into a fresh store at dbPath; it returns the calls stored and the
// messages settled other than by an ack.
func benchWorkerConsume(ctx context.Context, js jetstream.JetStream, subjects worker.Subjects, dbPath string, n, batch int) (d time.Duration, stored, notAcked int64, err error) {
	st, err := store.Open(ctx, dbPath, store.Options{})
	if err != nil {
		return 0, 0, 0, err
	}
	defer st.Close()
	traces, _, err := worker.EnsureStreams(ctx, js, subjects, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	counter := &ackCounter{}
	p, err := pull.New(traces, worker.NewTraceHandler(st, worker.TraceOptions{}), pull.Options{Name: "traces", Batch: batch, Counters: counter})
	if err != nil {
		return 0, 0, 0, err
	}
	pctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- p.Run(pctx) }()
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
	<-errc
	stored, err = st.CallCount(ctx)
	return d, stored, counter.other.Load(), err
}
