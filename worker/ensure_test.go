package worker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
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
	ctx := testCtx(t, 20*time.Second)
	js := &countingJS{JetStream: e.js}
	ensureAll := func() {
		_, _, err := EnsureStreams(ctx, js, e.subjects, 0)
		require.NoError(t, err)
		_, err = NewRequestClaims(ctx, js, "inst", 0)
		require.NoError(t, err)
		_, err = EnsurePartitionBuckets(ctx, js, 0)
		require.NoError(t, err)
	}
	ensureAll()
	js.updates = 0
	ensureAll()
	require.Zero(t, js.updates, "nothing to change on a second start")

	// A claims bucket left with other settings is brought in line.
	_, err := e.js.UpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ClaimBucket, History: 3})
	require.NoError(t, err)
	ensureAll()
	require.Equal(t, 1, js.updates)
	kv, err := e.js.KeyValue(ctx, ClaimBucket)
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.History())
}
