package pull_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/testkit/jstest/jsenv"
)

// TestRunStopsWithinFinishWithin: a message whose handler waits for its
// context (a write retrying against a lost cluster) does not hold Run's
// stop beyond FinishWithin: the handler's context is cancelled then, and
// Run returns.
func TestRunStopsWithinFinishWithin(t *testing.T) {
	e := jsenv.New(t)
	ctx := jstest.Ctx(t, time.Minute)
	_, err := e.JS.Publish(ctx, e.Subjects.EvalRequests, []byte(`{}`))
	require.NoError(t, err)
	entered, cancelled := make(chan struct{}), make(chan error, 1)
	h := handlerFunc(func(hctx context.Context, msgs []pull.Msg) []error {
		close(entered)
		<-hctx.Done()
		cancelled <- hctx.Err()
		return []error{pull.Transient("wait", hctx.Err())}
	})
	p, err := pull.New(e.Eval, h, pull.Options{Name: "eval", Batch: 1, FinishWithin: 200 * time.Millisecond, Logger: jstest.Logger(t)})
	require.NoError(t, err)
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the message was never handled")
	}
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Run did not return after FinishWithin")
	}
	require.True(t, errors.Is(<-cancelled, context.Canceled), "the handler's context was cancelled")
}

type handlerFunc func(ctx context.Context, msgs []pull.Msg) []error

func (f handlerFunc) HandleBatch(ctx context.Context, msgs []pull.Msg) []error { return f(ctx, msgs) }
