package segpub

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// lockedBuf is a log sink safe for the follower's goroutine.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFollowPublishesSegmentsAsTheyComplete: a follower publishes the
// segment present at its start, then one the gateway writes in place in
// two pieces (the first half, then, once the follower has seen it pending
// past the settle time and reported it once, the rest), each once; a
// restarted follower stores nothing new (the batches' ids are the
// segments' digests).
func TestFollowPublishesSegmentsAsTheyComplete(t *testing.T) {
	e := newEnv(t)
	src, _, err := segment.List("../testdata/traces/split")
	require.NoError(t, err)
	require.Len(t, src, 2)
	first, err := os.ReadFile(src[0].Path)
	require.NoError(t, err)
	second, err := os.ReadFile(src[1].Path)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calls-00000000.parquet"), first, 0o644))

	var logs lockedBuf
	opts := FollowOptions{Settle: 300 * time.Millisecond, Poll: 50 * time.Millisecond,
		Options: Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	ctx, cancel := context.WithCancel(jstest.Ctx(t, 60*time.Second))
	f := NewFollower(e.JS, e.Subjects.Traces, dir, opts)
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	require.Eventually(t, func() bool { return f.totals().Segments == 1 }, 20*time.Second, 10*time.Millisecond)

	// The gateway creates the next segment under its final name and
	// writes it in place.
	name := filepath.Join(dir, "calls-00000001.parquet")
	w, err := os.Create(name)
	require.NoError(t, err)
	_, err = w.Write(second[:len(second)/2])
	require.NoError(t, err)
	require.Eventually(t, func() bool { n, _ := f.Pending(); return n == 1 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "calls-00000001.parquet") }, 20*time.Second, 10*time.Millisecond,
		"an incomplete segment past the settle time is reported, with its name")
	n, oldest := f.Pending()
	require.Equal(t, 1, n)
	require.GreaterOrEqual(t, oldest, opts.Settle)
	require.Equal(t, 1, f.totals().Segments, "an incomplete segment is waited for, not published or failed")
	require.Empty(t, f.totals().Failed)
	require.Equal(t, 1, strings.Count(logs.String(), "calls-00000001.parquet"), "reported once")
	_, err = w.Write(second[len(second)/2:])
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Eventually(t, func() bool { return f.totals().Segments == 2 }, 20*time.Second, 10*time.Millisecond)
	n, oldest = f.Pending()
	require.Equal(t, 0, n)
	require.Zero(t, oldest)
	st := f.totals()
	require.Equal(t, st.Rows, st.New, "each row stored once")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	stream, err := e.JS.Stream(context.Background(), e.Subjects.TracesStream)
	require.NoError(t, err)
	before, err := stream.Info(context.Background())
	require.NoError(t, err)

	// A restart publishes the same batches again: nothing new is stored.
	ctx2, cancel2 := context.WithCancel(jstest.Ctx(t, 60*time.Second))
	g := NewFollower(e.JS, e.Subjects.Traces, dir, opts)
	go func() { done <- g.Run(ctx2) }()
	require.Eventually(t, func() bool { return g.totals().Segments == 2 }, 20*time.Second, 10*time.Millisecond)
	cancel2()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Zero(t, g.totals().New)
	after, err := stream.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, before.State.Msgs, after.State.Msgs)
}
