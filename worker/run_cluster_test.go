package worker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/internal/natscluster"
	"github.com/verdryx/verdryx/lease"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// TestWorkerStartsWithANodeDown: on a three-node cluster with one node
// down, a first worker (R3 streams and buckets to create) waits and
// retries, unready, until the node is back, then starts; every stream and
// bucket it made has three replicas. Restarted while another node is
// down, with everything already there, it starts. A cancelled run
// returns nil.
func TestWorkerStartsWithANodeDown(t *testing.T) {
	c, _, adm, s := startCluster(t, "admin")
	data := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	ready := func() (int, error) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	run := func() (stop func() error) {
		w, err := New(Options{DataDir: data, NATSURL: c.URLs(), Subjects: s, StartTimeout: 3 * time.Minute, HTTPAddr: addr,
			NATSOptions: []nats.Option{nats.ReconnectWait(50 * time.Millisecond)}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return func() error { cancel(); return <-done }
	}
	started := func() {
		jstest.CheckFor(t, 120*time.Second, 50*time.Millisecond, func() error {
			code, err := ready()
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("/readyz %d", code)
			}
			return err
		})
	}

	c.StopNode(2)
	stop := run()
	// Without the third node an R3 stream cannot be placed: the worker
	// waits, listening and unready.
	jstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		code, err := ready()
		if err == nil && code != http.StatusServiceUnavailable {
			err = fmt.Errorf("/readyz %d while waiting for the node", code)
		}
		return err
	})
	require.NoError(t, c.RestartNode(2))
	require.NoError(t, c.WaitReady(60*time.Second))
	started()
	// Every stream and bucket the worker made has three replicas (read
	// until the restarted node has caught up with the cluster's state),
	// and a client that ensures them without --replicas (a replay) does
	// not lower them.
	ctx := jstest.Ctx(t, 120*time.Second)
	jstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if _, _, err := streams.EnsureStreams(ctx, adm, streams.DefaultSubjects(), 0); err != nil {
			return err
		}
		_, err := evalreq.NewClaims(ctx, adm, "a-replay-client", 0, nil)
		return err
	})
	jstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		for _, b := range []string{lease.Bucket, evalreq.ClaimBucket, fleet.Bucket} {
			kv, err := adm.KeyValue(ctx, b)
			if err != nil {
				return fmt.Errorf("%s: %w", b, err)
			}
			st, err := kv.Status(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", b, err)
			}
			if n := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas; n != 3 {
				return fmt.Errorf("bucket %s has %d replicas", b, n)
			}
		}
		for _, name := range []string{s.TracesStream, s.EvalStream, s.EventsStream, s.DeadLetterStream} {
			str, err := adm.Stream(ctx, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if n := str.CachedInfo().Config.Replicas; n != 3 {
				return fmt.Errorf("stream %s has %d replicas", name, n)
			}
		}
		return nil
	})
	require.NoError(t, stop(), "a cancelled run is a clean stop")

	// A restart with another node down: everything exists with the
	// configuration wanted, so it starts.
	c.StopNode(0)
	stop = run()
	started()
	require.NoError(t, stop())
}

// startCluster starts a three-node in-process JetStream cluster for a
// cluster test (skipped with -short and under the race detector), shut
// down when the test ends, with a connection named name to it and the
// default subjects replicated on all three nodes.
func startCluster(t *testing.T, name string) (*natscluster.Cluster, *nats.Conn, jetstream.JetStream, streams.Subjects) {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster test")
	}
	if raceEnabled {
		t.Skip("cluster test: too slow under the race detector on a small machine (see race_on_test.go)")
	}
	c, err := natscluster.Start(t.TempDir(), 3, 60*time.Second)
	require.NoError(t, err)
	t.Cleanup(c.Shutdown)
	nc, js := clusterConn(t, c, name)
	s := streams.DefaultSubjects()
	s.Replicas = 3
	return c, nc, js, s
}

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
