package worker

import (
	"context"
	"time"
)

// releaseShare bounds the time spent releasing memory: after a release
// that took d, releaseMemory waits at least releaseShare x d before the
// next, so releases take at most 1/releaseShare of the wall time of one
// core however often days fold (late calls can refold a day at every
// snapshot). A release is a full collection plus returning the free
// pages: about 20 ms at a 70 MiB live heap, so at most one every second.
const releaseShare = 50

// releaseMemory calls release (debug.FreeOSMemory: a collection, then the
// heap's free pages back to the system) each time freed receives, and
// then waits releaseShare times as long as the release took, until ctx is
// done. It blocks. Signals sent while it waits are coalesced by the
// sender (freed holds one).
//
// Why: a partition holds its open days' runs in memory and folds a day
// out once it is past, and a burst (a replay, a backlog after an outage)
// decodes and applies batches as fast as they come (fleet.Options.Freed
// reports both). The Go runtime keeps the pages that garbage held, and
// sizes its heap goal, by the highest heap it has seen lately, so a
// worker's resident set crept up with its age (181 MiB a day after a
// restart, 230 MiB ten days later, with the same live heap of 60-80 MiB,
// in verdryx bench soak before this release). Returning the pages then makes the
// resident set follow the state the worker holds now, not the worst
// moment of its history.
func releaseMemory(ctx context.Context, freed <-chan struct{}, release func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-freed:
		}
		t0 := time.Now()
		release()
		select {
		case <-ctx.Done():
			return
		case <-time.After(releaseShare * time.Since(t0)):
		}
	}
}
