package segpub

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/testkit/jstest"
)

// TestReplayOnceThenFollow: Replay publishes a directory once with its
// counts (a second replay stores nothing new); with Follow it publishes
// each segment through OnPublished and a cancelled ctx ends it cleanly;
// streams it cannot ensure fail it with ErrStreams before anything is
// published.
func TestReplayOnceThenFollow(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 60*time.Second)
	const dir = "../testdata/traces/split"
	opts := ReplayOptions{Subjects: e.Subjects}
	st, err := Replay(ctx, e.JS, dir, opts)
	require.NoError(t, err)
	require.Equal(t, 2, st.Segments)
	require.Positive(t, st.Rows)
	require.Equal(t, st.Rows, st.New)
	again, err := Replay(ctx, e.JS, dir, opts)
	require.NoError(t, err)
	require.Equal(t, st.Rows, again.Duplicates, "a replayed directory stores nothing new")

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var published atomic.Int32
	opts.Follow, opts.Poll = true, 50*time.Millisecond
	opts.OnPublished = func(string, Stats) {
		if published.Add(1) == 2 {
			cancel()
		}
	}
	_, err = Replay(fctx, e.JS, dir, opts)
	require.NoError(t, err, "a follow ended by its ctx is a clean end")
	require.EqualValues(t, 2, published.Load())

	bad := e.Subjects
	bad.Replicas = 5 // one server cannot hold five replicas
	_, err = Replay(ctx, e.JS, dir, ReplayOptions{Subjects: bad})
	require.True(t, errors.Is(err, ErrStreams), "%v", err)
}
