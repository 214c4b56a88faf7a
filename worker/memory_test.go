package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMemoryIsReleasedAfterAFoldAtMostAShareOfTheTime: a fold signal
// releases memory; signals sent while the releaser waits (releaseShare
// times as long as the release took) are not drained (the channel's one
// slot stays full, so the partitions' senders coalesce), and the releaser
// stops with its context.
func TestMemoryIsReleasedAfterAFoldAtMostAShareOfTheTime(t *testing.T) {
	folded := make(chan struct{}, 1)
	released := make(chan struct{}, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A release of 200 ms: the next waits 10 s.
		releaseMemory(ctx, folded, func() { released <- struct{}{}; time.Sleep(200 * time.Millisecond) })
	}()
	select {
	case <-released:
		t.Fatal("released before any fold")
	default:
	}
	folded <- struct{}{}
	select {
	case <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("no release after a fold")
	}
	// The releaser waits releaseShare times the release: one more signal
	// fills the slot and the next finds it full.
	folded <- struct{}{}
	select {
	case folded <- struct{}{}:
		t.Fatal("the releaser drained a fold signal while it waited")
	default:
	}
	require.Empty(t, released, "one release per interval")
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the releaser did not stop with its context")
	}
}
