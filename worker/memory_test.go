package worker

import (
	"context"
	"testing"
	"time"
)

// TestMemoryIsReleasedWhenFreedAtMostAShareOfTheTime: a freed signal
// releases memory; after a release of 100 ms the releaser waits
// releaseShare times that (5 s) before it takes the next signal, which
// the partitions' senders coalesce meanwhile (the channel's one slot stays
// full); it stops with its context.
func TestMemoryIsReleasedWhenFreedAtMostAShareOfTheTime(t *testing.T) {
	freed := make(chan struct{}, 1)
	entered, returned := make(chan struct{}, 8), make(chan struct{}, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseMemory(ctx, freed, func() {
			entered <- struct{}{}
			time.Sleep(100 * time.Millisecond)
			returned <- struct{}{}
		})
	}()
	select {
	case <-entered:
		t.Fatal("released before any signal")
	default:
	}
	freed <- struct{}{}
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("no release after a signal")
	}
	<-entered
	// The releaser now waits at least 5 s: the next signal stays in the
	// slot, and one more finds it full.
	freed <- struct{}{}
	select {
	case freed <- struct{}{}:
		t.Fatal("the releaser took a signal while it waited")
	default:
	}
	select {
	case <-entered:
		t.Fatal("released again without waiting releaseShare times the last release")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the releaser did not stop with its context")
	}
}
