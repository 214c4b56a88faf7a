package fleet

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/internal/natscluster"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// clusterConn connects to every node of c, reconnecting forever.
func clusterConn(t *testing.T, c *natscluster.Cluster, name string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(c.URLs(), nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(10*time.Second))
	require.NoError(t, err)
	return nc, js
}

// fleetProgress is, for the test's log, how many calls the published
// aggregates hold, as each worker's connection reads them; -1 while a
// partition with records has no aggregate yet (mid-stream, before its
// first owner's first snapshot), which is no failure.
func fleetProgress(t *testing.T, ws []*fleetWorker) int64 {
	var n int64
	for _, w := range ws {
		agg, err := ReadAggregate(context.Background(), w.f.js, w.f.opts.Subjects)
		if err != nil {
			t.Logf("progress: %v", err)
			return -1
		}
		n += agg.Calls()
	}
	return n
}

// TestClusterFleetMatchesDirectReduction: on a three-node JetStream cluster
// (R3 streams and bucket), three workers share eight partitions while a
// directory is replayed; mid-stream one worker stops cleanly (its
// partitions are unpinned and taken over from its snapshots), another dies
// without a word (its connection drops before it can flush or ack: its
// partitions move after the PinnedTTL and held records are redelivered),
// and a cluster node is shut down and restarted. The merged report of the
// published aggregates equals the direct reduction of the directory, field
// for field: nothing lost, nothing doubled; and so do reports of windows
// that start and end inside the day (the workers' clock keeps the calls
// by the hour).
func TestClusterFleetMatchesDirectReduction(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	if raceEnabled {
		t.Skip("cluster test: too slow under the race detector on a small machine (see race_on_test.go)")
	}
	start := time.Now()
	c, err := natscluster.Start(t.TempDir(), 3, 60*time.Second)
	require.NoError(t, err)
	defer c.Shutdown()
	const rows = 24000
	dir, want := fleetDir(t, rows, 7)
	s := streams.DefaultSubjects()
	s.Replicas = 3
	_, adm := clusterConn(t, c, "admin")
	ctx := jstest.Ctx(t, 240*time.Second)
	_, _, err = streams.EnsureStreams(ctx, adm, s, 0)
	require.NoError(t, err)

	var ws []*fleetWorker
	var conns []*nats.Conn
	for i := range 3 {
		nc, js := clusterConn(t, c, fmt.Sprintf("w%d", i))
		conns = append(conns, nc)
		ws = append(ws, startFleet(t, js, s, fmt.Sprintf("w%d", i), Options{PinnedTTL: 2 * time.Second, AckWait: 4 * time.Second, Batch: 256,
			Now: func() time.Time { return fleetDirStart().Add(36 * time.Hour) }}))
	}
	_, pub := clusterConn(t, c, "replay")
	replayed := make(chan error, 1)
	var published atomic.Int64
	go func() {
		_, err := segpub.Publish(ctx, pub, s.Traces, dir, segpub.Options{MaxInFlight: 256, AckTimeout: 5 * time.Second, Progress: func(n int) { published.Store(int64(n)) }})
		replayed <- err
	}()
	// progress waits until the replay has published atLeast rows: the
	// faults land mid-stream.
	progress := func(atLeast int64) {
		jstest.CheckFor(t, 60*time.Second, 5*time.Millisecond, func() error {
			if n := published.Load(); n < atLeast {
				return fmt.Errorf("%d rows published, waiting for %d", n, atLeast)
			}
			return nil
		})
	}
	// progressOrWait is progress for at most d (publishing may pause
	// while the cluster elects new leaders).
	progressOrWait := func(atLeast int64, d time.Duration) {
		deadline := time.Now().Add(d)
		for published.Load() < atLeast && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	progress(rows / 6)
	ws[0].stop(t) // clean stop: flush, ack, unpin
	t.Logf("worker 0 stopped at %d calls applied (%s)", fleetProgress(t, ws), time.Since(start))
	progress(rows / 3)
	conns[1].Close() // worker 1 dies: nothing flushed, acked or unpinned
	ws[1].stop(t)
	t.Logf("worker 1 died at %d calls applied (%s)", fleetProgress(t, ws), time.Since(start))
	progress(rows / 2)
	c.StopNode(2)
	t.Logf("node 2 down at %d rows published, %d calls applied (%s)", published.Load(), fleetProgress(t, ws), time.Since(start))
	progressOrWait(rows*2/3, 5*time.Second)
	require.NoError(t, c.RestartNode(2))
	require.NoError(t, c.WaitReady(60*time.Second))
	t.Logf("node 2 back at %d rows published, %d calls applied (%s)", published.Load(), fleetProgress(t, ws), time.Since(start))
	require.NoError(t, <-replayed)
	waitFleetDrained(t, adm, s, 180*time.Second)
	t.Logf("drained (%s)", time.Since(start))

	got := mergedJSON(t, adm, s)
	require.JSONEq(t, string(want), string(got))
	agg, err := ReadAggregate(ctx, adm, s)
	require.NoError(t, err)
	require.EqualValues(t, rows, agg.Calls(), "every call once")
	for _, opts := range []outcome.Options{
		{From: fleetDirStart().Add(5 * time.Hour), To: fleetDirStart().Add(17 * time.Hour)},
		{From: fleetDirStart().Add(13 * time.Hour)},
		{To: fleetDirStart().Add(9 * time.Hour)},
	} {
		agg, err := ReadAggregateFor(ctx, adm, s, opts)
		require.NoError(t, err)
		r, err := agg.Reducer(opts)
		require.NoError(t, err)
		direct, err := outcome.NewReducer(opts)
		require.NoError(t, err)
		_, err = segfold.ReduceDir(ctx, dir, direct, segfold.DirOptions{})
		require.NoError(t, err)
		require.JSONEq(t, string(calltest.ReportJSON(t, direct)), string(calltest.ReportJSON(t, r)), "window %v-%v", opts.From, opts.To)
	}
}
