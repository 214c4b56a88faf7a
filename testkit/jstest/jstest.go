// Package jstest holds the test helpers shared by the packages whose tests
// run against an embedded NATS server (fleet, evalreq, lease, ragask,
// segpub, streams, tailfwd, worker): deadlines, polling, stores,
// pullers, sample calls and their direct report. Tests only.
package jstest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/verdryx/verdryx/calls"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/store"
)

// Ctx returns a context that ends after d or when the test ends.
func Ctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// CheckFor polls f until it returns nil or the deadline passes.
func CheckFor(t *testing.T, total, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", total, err)
		}
		time.Sleep(every)
	}
}

// OpenStore opens the SQLite store at path, closed when the test ends.
func OpenStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// RunPuller runs a puller until the returned stop function is called.
func RunPuller(t *testing.T, cons jetstream.Consumer, h pull.BatchHandler, opts pull.Options) (stop func()) {
	t.Helper()
	p, err := pull.New(cons, h, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return stop
}

// SampleCalls builds calls with every reduction rule in play: runs split
// over many steps out of order, blocked and wardryx rows, untagged runs,
// runs whose last tag is not their last call, and records without a run.
func SampleCalls() []calls.Call {
	var cl []calls.Call
	for run := 0; run < 40; run++ {
		steps := []uint32{2, 0, 3, 1}
		for _, s := range steps {
			c := calls.Call{TSMillis: int64(1000*run + int(s)), RunID: fmt.Sprintf("run-%02d", run), HasRunID: true, HasStep: true,
				Step: s, Model: "m", Decision: "allow", CostMicroUSD: int64(100*run + int(s)), AgentID: "agent://acme.example/bot"}
			switch {
			case run%5 == 0 && s == 1:
				c.Decision = "budget_exceeded"
			case run%7 == 0 && s == 2:
				c.Decision = "wardryx_deny"
			}
			switch {
			case run%4 == 0:
				// untagged
			case s == 1:
				c.Outcome = "escalated"
			case s == 2 && run%3 != 0:
				c.Outcome = "case_resolved"
			}
			cl = append(cl, c)
		}
	}
	// Equal steps are legitimate: a blocked call and its allowed retry
	// share a step, and the retry (read later, written later) carries the
	// outcome.
	for run := 0; run < 3; run++ {
		id := fmt.Sprintf("retry-%d", run)
		ts := int64(100_000 + 10*run)
		cl = append(cl,
			calls.Call{TSMillis: ts, RunID: id, HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: 50, Model: "m"},
			calls.Call{TSMillis: ts + 1, RunID: id, HasRunID: true, Step: 2, HasStep: true, Decision: "budget_exceeded", CostMicroUSD: 999, Model: "m", Outcome: "abandoned"},
			calls.Call{TSMillis: ts + 2, RunID: id, HasRunID: true, Step: 2, HasStep: true, Decision: "allow", CostMicroUSD: 300, Model: "m", Outcome: "case_resolved"})
	}
	for i := 0; i < 5; i++ {
		cl = append(cl, calls.Call{Decision: "allow", Outcome: "abandoned", CostMicroUSD: 77, Model: "m"})
	}
	return cl
}

// ReportOf is the cost-per-correct table of reducing cl directly (what
// a fleet's merged aggregate must reproduce).
func ReportOf(t *testing.T, cl []calls.Call) string {
	t.Helper()
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	for _, c := range cl {
		r.Add(c)
	}
	var buf bytes.Buffer
	require.NoError(t, r.Report().WriteTable(&buf))
	return buf.String()
}

// WaitDrained waits until the consumer has nothing pending or unacked.
// Callers first wait for what they know must be stored (a nak'ed message
// waiting out its delay may count as neither), so this only rules out
// extra work still in flight.
func WaitDrained(t *testing.T, cons jetstream.Consumer) {
	t.Helper()
	CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		info, err := cons.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumPending+uint64(info.NumAckPending) > 0 {
			return fmt.Errorf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// Logger returns a debug logger writing to the test's log.
func Logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// VerifyMain runs the package's tests and then fails on goroutines they
// leaked (goleak), but for the process-wide helpers of the NATS server.
func VerifyMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"))
}

// PublishStored publishes data on subject under message id msgID, as a
// client does through a leader election: each try bounded to 5 s, tried
// again every 50 ms for up to a minute until JetStream stores it (the id
// makes a repeat a duplicate, stored once).
func PublishStored(t *testing.T, ctx context.Context, js jetstream.JetStream, subject string, data []byte, msgID string) {
	t.Helper()
	CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.Publish(pctx, subject, data, jetstream.WithMsgID(msgID))
		return err
	})
}
