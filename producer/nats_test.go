package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// runJetStream starts an in-process JetStream server with one stream over
// "t.>" and returns a connected client.
func runJetStream(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(func() {
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
	})
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	require.NoError(t, err)
	return nc, js
}

// stallingJS refuses every fifth asynchronous publish as stalled, as
// PublishAsync does when acks lag under CPU contention.
type stallingJS struct {
	jetstream.JetStream
	n int
}

func (s *stallingJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	s.n++
	if s.n%5 == 0 {
		return nil, jetstream.ErrTooManyStalledMsgs
	}
	return s.JetStream.PublishMsgAsync(m, opts...)
}

// Conn is nil so that the publisher keeps this wrapper rather than making
// a client of its own over the connection.
func (s *stallingJS) Conn() *nats.Conn { return nil }

func TestAsyncPublisherBackpressureAndDuplicates(t *testing.T) {
	_, inner := runJetStream(t)
	js := &stallingJS{JetStream: inner}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 3000
	publishAll := func() AsyncStats {
		var progress []int
		p := NewAsyncPublisher(js, AsyncOptions{MaxInFlight: 64, Progress: func(acked int) { progress = append(progress, acked) }})
		for i := range n {
			require.NoError(t, p.PublishRows(ctx, "t.rows", nil, fmt.Appendf(nil, "row %d", i), fmt.Sprintf("row-%d", i), 1))
			require.LessOrEqual(t, len(p.window), 64, "at most MaxInFlight unacknowledged")
		}
		require.NoError(t, p.Drain(ctx))
		require.Empty(t, p.window)
		require.Equal(t, []int{1024, 2048}, progress)
		return p.Stats()
	}
	require.Equal(t, AsyncStats{Published: n, New: n}, publishAll())
	require.Equal(t, AsyncStats{Published: n, Duplicates: n}, publishAll(), "a second run stores nothing")

	info, err := inner.Stream(ctx, "T")
	require.NoError(t, err)
	require.EqualValues(t, n, info.CachedInfo().State.Msgs)
	// Order is kept: the stream holds the rows as published.
	for _, seq := range []uint64{1, 1500, n} {
		m, err := info.GetMsg(ctx, seq)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("row %d", seq-1), string(m.Data))
	}
}

func TestDeadLetterHeadersAndIDs(t *testing.T) {
	_, js := runJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, "T")
	require.NoError(t, err)
	p := &DeadLetterPublisher{JS: js, Subject: "t.dead"}

	orig := nats.Header{}
	orig.Set(nats.MsgIdHdr, "orig-1")
	orig.Set("X-Other", "kept")
	fromStream := DeadLetter{Data: []byte("bad"), Header: orig, Subject: "t.in", Stream: "IN", Seq: 7, Reason: "malformed"}
	fromTail := DeadLetter{Data: []byte("line"), Subject: "tail", ID: "f1:120", Reason: "line 3: malformed JSON"}
	for _, tc := range []struct {
		name    string
		d       DeadLetter
		wantID  string
		headers map[string]string
	}{
		{"stream", fromStream, "dead-IN-7", map[string]string{HeaderDeadReason: "malformed", HeaderDeadSubject: "t.in",
			HeaderDeadSeq: "7", HeaderDeadMsgID: "orig-1", "X-Other": "kept"}},
		{"tail", fromTail, "dead-f1:120", map[string]string{HeaderDeadReason: "line 3: malformed JSON", HeaderDeadSubject: "tail",
			HeaderDeadSeq: "", HeaderDeadMsgID: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.wantID, tc.d.MsgID())
			require.NoError(t, p.Publish(ctx, tc.d))
			m, err := stream.GetLastMsgForSubject(ctx, "t.dead")
			require.NoError(t, err)
			require.Equal(t, tc.d.Data, m.Data)
			require.Equal(t, tc.wantID, m.Header.Get(nats.MsgIdHdr))
			for k, v := range tc.headers {
				require.Equal(t, v, m.Header.Get(k), k)
			}
			// Dead-lettering the same message again stores nothing new.
			before, err := js.Stream(ctx, "T")
			require.NoError(t, err)
			require.NoError(t, p.Publish(ctx, tc.d))
			after, err := js.Stream(ctx, "T")
			require.NoError(t, err)
			require.Equal(t, before.CachedInfo().State.Msgs, after.CachedInfo().State.Msgs)
		})
	}
	require.Equal(t, "orig-1", orig.Get(nats.MsgIdHdr), "the original's headers are not changed")
}

// inProcessJS answers the first `busy` async publishes of each message id
// with JetStream's "duplicate message id is in process" (10158), as a
// replicated stream does while an earlier copy is still being stored.
type inProcessJS struct {
	jetstream.JetStream
	busy  int
	tries map[string]int
}

type failedFuture struct {
	msg *nats.Msg
	err chan error
}

func (f failedFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f failedFuture) Err() <-chan error            { return f.err }
func (f failedFuture) Msg() *nats.Msg               { return f.msg }

func (j *inProcessJS) Conn() *nats.Conn { return nil }

func (j *inProcessJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	fut, err := j.JetStream.PublishMsgAsync(m, opts...)
	id := m.Header.Get(nats.MsgIdHdr)
	if j.tries[id]++; err != nil || j.tries[id] > j.busy {
		return fut, err
	}
	ch := make(chan error, 1)
	ch <- &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}
	return failedFuture{msg: m, err: ch}, nil
}

// TestAsyncPublisherWaitsOnAMessageIDInProcess: a message answered "in
// process" (six times here) is waited on, not failed; it is stored once.
func TestAsyncPublisherWaitsOnAMessageIDInProcess(t *testing.T) {
	_, inner := runJetStream(t)
	js := &inProcessJS{JetStream: inner, busy: 6, tries: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := NewAsyncPublisher(js, AsyncOptions{MaxInFlight: 4})
	require.NoError(t, p.PublishRows(ctx, "t.rows", nil, []byte("row"), "busy-0", 1))
	require.NoError(t, p.Drain(ctx))
	require.Equal(t, 7, js.tries["busy-0"], "six answers in process, then the ack")
	// The first copy was stored; the one acknowledged is its duplicate.
	require.Equal(t, AsyncStats{Published: 1, Duplicates: 1}, p.Stats())
	info, err := inner.Stream(ctx, "T")
	require.NoError(t, err)
	require.EqualValues(t, 1, info.CachedInfo().State.Msgs)
}

// TestAsyncPublisherRidesOutAStreamWithoutLeader: publishes to a subject
// no stream answers yet ("no response from stream", as while a stream
// elects a leader) are retried with backoff, not failed after a few
// tries; once the stream is there every message is stored once, in
// order, and Healthy heard false then true.
func TestAsyncPublisherRidesOutAStreamWithoutLeader(t *testing.T) {
	_, js := runJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var health []bool
	down := make(chan struct{})
	p := NewAsyncPublisher(js, AsyncOptions{MaxInFlight: 16, RetryFor: time.Minute, Healthy: func(ok bool) {
		health = append(health, ok)
		if !ok && len(health) == 1 {
			close(down)
		}
	}})
	const n = 40
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := p.PublishRows(ctx, "u.rows", nil, fmt.Appendf(nil, "row %d", i), fmt.Sprintf("id-%d", i), 1); err != nil {
				done <- err
				return
			}
		}
		done <- p.Drain(ctx)
	}()
	select {
	case <-down:
	case err := <-done:
		t.Fatalf("publishing ended before any failure: %v", err)
	case <-ctx.Done():
		t.Fatal("no failure reported")
	}
	// Failing for 4 s: past the 5 tries (about 2.5 s: the client itself
	// waits 2 x 250 ms on "no responders") the publisher once gave up after.
	start := time.Now()
	for time.Since(start) < 4*time.Second {
		select {
		case err := <-done:
			t.Fatalf("publishing ended while the stream was away: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "U", Subjects: []string{"u.>"}})
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Equal(t, []bool{false, true}, health)
	require.Equal(t, n, p.Stats().New+p.Stats().Duplicates)
	str, err := js.Stream(ctx, "U")
	require.NoError(t, err)
	info, err := str.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, info.State.Msgs, "each message stored once")
	for i := range n {
		m, err := str.GetMsg(ctx, uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("row %d", i), string(m.Data), "stored in order")
	}
}

// TestAsyncPublisherGivesUpAfterRetryFor: a stream that never answers is
// retried with backoff (a handful of tries) for RetryFor,
// then Drain returns the error naming the bound.
func TestAsyncPublisherGivesUpAfterRetryFor(t *testing.T) {
	_, js := runJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := NewAsyncPublisher(js, AsyncOptions{RetryFor: 3 * time.Second})
	start := time.Now()
	require.NoError(t, p.PublishRows(ctx, "u.rows", nil, []byte("row"), "id-0", 1))
	err := p.Drain(ctx)
	require.ErrorContains(t, err, "retry bound")
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse)
	require.GreaterOrEqual(t, time.Since(start), 3*time.Second, "retried for RetryFor")
	// Each failure takes the client about 0.5 s, then 100, 200, 400, 800
	// ms between tries: at most 6 tries in 3 s.
	require.LessOrEqual(t, p.window[0].tries, 6, "tries with backoff")
}
