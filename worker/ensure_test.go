package worker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/streams"
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

// TestEnsureOnlyReadsWhatAlreadyMatches: a second start-up over streams,
// buckets and consumers that have the wanted configuration changes
// nothing (a change needs every replica: a restart with a node down would
// wait for it), while a bucket made by an earlier build with other
// settings is updated.
func TestEnsureOnlyReadsWhatAlreadyMatches(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 20*time.Second)
	js := &countingJS{JetStream: e.JS}
	ensureAll := func() {
		_, _, err := streams.EnsureStreams(ctx, js, e.Subjects, 0)
		require.NoError(t, err)
		_, err = evalreq.NewClaims(ctx, js, "inst", 0, nil)
		require.NoError(t, err)
		_, err = fleet.EnsureBucket(ctx, js, 0)
		require.NoError(t, err)
	}
	ensureAll()
	js.updates = 0
	ensureAll()
	require.Zero(t, js.updates, "nothing to change on a second start")

	// A claims bucket left with other settings is brought in line.
	_, err := e.JS.UpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: evalreq.ClaimBucket, History: 3})
	require.NoError(t, err)
	ensureAll()
	require.Equal(t, 1, js.updates)
	kv, err := e.JS.KeyValue(ctx, evalreq.ClaimBucket)
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.History())
}
