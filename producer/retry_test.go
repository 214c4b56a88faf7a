package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("publish to x: %w", jetstream.ErrNoStreamResponse), true},
		{nats.ErrNoResponders, true},
		{fmt.Errorf("kv: %w", nats.ErrTimeout), true},
		{context.DeadlineExceeded, true},
		{&jetstream.APIError{ErrorCode: 10008, Code: 503}, true},
		{&jetstream.APIError{ErrorCode: 10118, Code: 500}, true},
		{fmt.Errorf("publish: %w", &jetstream.APIError{ErrorCode: 10158, Code: 409}), true},
		{fmt.Errorf("read spend ledger: %w", errors.New("nats: JetStream system temporarily unavailable")), true},
		{context.Canceled, false},
		{jetstream.ErrKeyExists, false},
		{&jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Code: 400}, false},
		{jetstream.ErrStreamNotFound, false},
		{errors.New("bad input"), false},
	} {
		require.Equal(t, c.want, Retryable(c.err), "%v", c.err)
	}
}

// TestRetrierRetriesAnElection: a write failing with no responders is
// tried again until it succeeds, and Healthy is false only meanwhile; a
// refusal is returned at once; past the bound the last error is returned.
func TestRetrierRetriesAnElection(t *testing.T) {
	ctx := context.Background()
	r := NewRetrier(time.Minute, nil)
	tries := 0
	var healthyDuring []bool
	err := r.Do(ctx, "w", func(context.Context) error {
		tries++
		healthyDuring = append(healthyDuring, r.Healthy())
		if tries < 3 {
			return jetstream.ErrNoStreamResponse
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, tries)
	require.Equal(t, []bool{true, false, false}, healthyDuring, "unhealthy from the first failure until the write succeeds")
	require.True(t, r.Healthy())

	tries = 0
	err = r.Do(ctx, "w", func(context.Context) error { tries++; return jetstream.ErrKeyExists })
	require.ErrorIs(t, err, jetstream.ErrKeyExists)
	require.Equal(t, 1, tries, "a refusal is not retried")

	short := NewRetrier(250*time.Millisecond, nil)
	tries = 0
	err = short.Do(ctx, "w", func(context.Context) error { tries++; return nats.ErrNoResponders })
	require.ErrorIs(t, err, nats.ErrNoResponders)
	require.ErrorContains(t, err, "the retry bound")
	require.Greater(t, tries, 1)
	require.False(t, short.Healthy(), "a write that gave up leaves it unhealthy until a write goes through")
	require.NoError(t, short.Do(ctx, "w", func(context.Context) error { return nil }))
	require.True(t, short.Healthy(), "a write that went through")

	// A try left unanswered past SlowWrite counts as failing until it ends.
	release := make(chan struct{})
	sawUnhealthy := make(chan bool, 1)
	go func() {
		defer close(release)
		deadline := time.Now().Add(SlowWrite + 10*time.Second)
		for time.Now().Before(deadline) {
			if !r.Healthy() {
				sawUnhealthy <- true
				return
			}
			time.Sleep(10 * time.Millisecond) // polling a flag, bounded by the deadline
		}
		sawUnhealthy <- false
	}()
	require.NoError(t, r.Do(ctx, "w", func(context.Context) error { <-release; return nil }))
	require.True(t, <-sawUnhealthy, "a write hanging past SlowWrite is reported")
	require.True(t, r.Healthy())

	var none *Retrier
	tries = 0
	require.ErrorIs(t, none.Do(ctx, "w", func(context.Context) error { tries++; return nats.ErrNoResponders }), nats.ErrNoResponders)
	require.Equal(t, 1, tries, "a nil Retrier tries once")
}

// TestRetrierReadDoesNotRecover: a read answered after failures (a leader
// without a quorum may still answer reads) leaves the Retrier unhealthy;
// a write that goes through, or quietRecovery without a failure, makes it
// healthy again.
func TestRetrierReadDoesNotRecover(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	r := NewRetrier(time.Minute, nil)
	r.now = func() time.Time { return now }
	tries := 0
	require.NoError(t, r.Read(ctx, "r", func(context.Context) error {
		if tries++; tries < 2 {
			return jetstream.ErrNoStreamResponse
		}
		return nil
	}))
	require.False(t, r.Healthy(), "a read through after a failure")
	require.NoError(t, r.Read(ctx, "r", func(context.Context) error { return nil }))
	require.False(t, r.Healthy(), "another read through")
	now = now.Add(quietRecovery - time.Second)
	require.False(t, r.Healthy())
	now = now.Add(time.Second)
	require.True(t, r.Healthy(), "quietRecovery without a failure")

	tries = 0
	require.NoError(t, r.Read(ctx, "r", func(context.Context) error {
		if tries++; tries < 2 {
			return nats.ErrNoResponders
		}
		return nil
	}))
	require.False(t, r.Healthy())
	require.NoError(t, r.Do(ctx, "w", func(context.Context) error { return nil }))
	require.True(t, r.Healthy(), "a write through")

	// A write retried after a lost acknowledgement is refused (the key
	// its first try created exists): the server answered, so it went
	// through.
	tries = 0
	err := r.Do(ctx, "w", func(context.Context) error {
		if tries++; tries < 2 {
			return nats.ErrTimeout
		}
		return jetstream.ErrKeyExists
	})
	require.ErrorIs(t, err, jetstream.ErrKeyExists)
	require.True(t, r.Healthy(), "a refusal is an answer")
}
