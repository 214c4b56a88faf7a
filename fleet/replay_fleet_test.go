package fleet

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracegen"
)

func TestReplayAppliesBackpressureAndCountsDuplicates(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	opts := tracegen.DefaultFleetOptions()
	opts.Rows, opts.SegmentRows, opts.RowGroupRows, opts.Concurrent, opts.MeanCallsPerRun = 4000, 1500, 500, 50, 10
	_, err := tracegen.GenerateFleet(dir, opts)
	require.NoError(t, err)

	// A client whose own async window is tiny and that reports a stall now
	// and then, as PublishAsync does when acks lag under CPU contention.
	inner, err := jetstream.New(e.NC, jetstream.WithPublishAsyncMaxPending(8))
	require.NoError(t, err)
	js := &stallingJS{JetStream: inner}
	ctx := jstest.Ctx(t, 60*time.Second)
	st, err := segpub.Publish(ctx, js, e.Subjects.Traces, dir, segpub.Options{MaxInFlight: 64})
	require.NoError(t, err)
	require.Equal(t, 4000, st.Rows)
	require.Equal(t, 4000, st.New)
	require.Zero(t, st.Duplicates)

	st, err = segpub.Publish(ctx, js, e.Subjects.Traces, dir, segpub.Options{})
	require.NoError(t, err)
	require.Equal(t, 4000, st.Rows)
	require.Zero(t, st.New, "a second replay stores nothing")
	require.Equal(t, 4000, st.Duplicates)

	// And what was stored reduces exactly as the directory does.
	startFleet(t, e.JS, e.Subjects, "replay", Options{})
	waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	_, err = segfold.ReduceDir(ctx, dir, r, segfold.DirOptions{})
	require.NoError(t, err)
	require.JSONEq(t, string(calltest.ReportJSON(t, r)), string(mergedJSON(t, e.JS, e.Subjects)))
}

// stallingJS refuses every fifth asynchronous publish as stalled.
type stallingJS struct {
	jetstream.JetStream
	n int
}

func (s *stallingJS) PublishAsync(subject string, data []byte, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	s.n++
	if s.n%5 == 0 {
		return nil, jetstream.ErrTooManyStalledMsgs
	}
	return s.JetStream.PublishAsync(subject, data, opts...)
}
