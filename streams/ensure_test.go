package streams

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// countingJS counts the cluster-wide changes a start-up asks for.
type countingJS struct {
	jetstream.JetStream
	updates int
}

func (c *countingJS) UpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	c.updates++
	return c.JetStream.UpdateStream(ctx, cfg)
}

func (c *countingJS) UpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	c.updates++
	return c.JetStream.UpdateKeyValue(ctx, cfg)
}

func (c *countingJS) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c.updates++
	return c.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
}

// TestRetentionAppliedToStreamsMadeByAnOlderVersion: streams created
// without limits (as an older build made them) get the configured
// retention at the next worker start; a client that sets none (a replay,
// dlq) leaves it as it is; an operator's new value replaces it.
func TestRetentionAppliedToStreamsMadeByAnOlderVersion(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 20*time.Second)
	s := e.subjects
	_, _, err := EnsureStreams(ctx, e.js, s, 0)
	require.NoError(t, err)
	limits := func() map[string][2]int64 {
		out := map[string][2]int64{}
		for _, name := range []string{s.TracesStream, s.EvalStream, s.EventsStream, s.DeadLetterStream} {
			st, err := e.js.Stream(ctx, name)
			require.NoError(t, err)
			c := st.CachedInfo().Config
			out[name] = [2]int64{int64(c.MaxAge), c.MaxBytes}
		}
		return out
	}
	for name, l := range limits() {
		require.Equal(t, [2]int64{0, -1}, l, "%s made without limits", name)
	}

	worker := s
	worker.Retention, worker.RetentionBytes = 2*time.Hour, 1<<30
	_, _, err = EnsureStreams(ctx, e.js, worker, 0)
	require.NoError(t, err)
	want := map[string][2]int64{
		s.TracesStream:     {int64(2 * time.Hour), 1 << 30},
		s.EvalStream:       {int64(2 * time.Hour), 1 << 30},
		s.EventsStream:     {int64(8 * time.Hour), 1 << 30},
		s.DeadLetterStream: {int64(8 * time.Hour), 1 << 30},
	}
	require.Equal(t, want, limits())

	js := &countingJS{JetStream: e.js}
	_, _, err = EnsureStreams(ctx, js, s, 0) // a replay client: no retention of its own
	require.NoError(t, err)
	require.Equal(t, want, limits())
	require.Zero(t, js.updates, "a client without retention changes nothing")

	worker.Retention = time.Hour
	_, _, err = EnsureStreams(ctx, e.js, worker, 0)
	require.NoError(t, err)
	require.Equal(t, int64(time.Hour), limits()[s.TracesStream][0])

	worker.Retention = time.Minute
	_, _, err = EnsureStreams(ctx, e.js, worker, 0)
	require.ErrorContains(t, err, "duplicate window")

	// A worker with a shorter duplicate window may keep a shorter
	// retention; a client that sets neither keeps both.
	worker.DuplicateWindow = 30 * time.Second
	_, _, err = EnsureStreams(ctx, e.js, worker, 0)
	require.NoError(t, err)
	dups := func() time.Duration {
		st, err := e.js.Stream(ctx, s.TracesStream)
		require.NoError(t, err)
		return st.CachedInfo().Config.Duplicates
	}
	require.Equal(t, 30*time.Second, dups())
	js.updates = 0
	_, _, err = EnsureStreams(ctx, js, s, 0)
	require.NoError(t, err)
	require.Zero(t, js.updates, "a client without a window of its own changes nothing")
	require.Equal(t, 30*time.Second, dups())
	require.Equal(t, int64(time.Minute), limits()[s.TracesStream][0])
}
