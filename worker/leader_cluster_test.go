package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// TestPublishingRidesOutLeaderLoss: on a three-node cluster, a worker
// following a directory loses the node leading the traces stream just as
// a segment arrives, then (that node back) the node leading the fleet's
// KV bucket as another arrives; a second worker replays a directory
// while the traces stream's leader is lost again. No worker exits, the
// fleet's merged report equals the direct reduction of every segment,
// /readyz is 200 at the end, and the events files verify. The election
// times are logged (docs/benchmarks.md).
func TestPublishingRidesOutLeaderLoss(t *testing.T) {
	c, _, adm, s := startCluster(t, "admin")
	ctx := jstest.Ctx(t, 5*time.Minute)

	type worker struct {
		addr, events string
		exited       atomic.Bool
		stop         func() error
	}
	start := func(mutate func(*Options)) *worker {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		wk := &worker{addr: ln.Addr().String(), events: filepath.Join(t.TempDir(), "events.ndjson")}
		require.NoError(t, ln.Close())
		o := Options{DataDir: t.TempDir(), NATSURL: c.URLs(), Subjects: s, StartTimeout: 3 * time.Minute, HTTPAddr: wk.addr, Logger: jstest.Logger(t),
			EventsPath: wk.events, NATSOptions: []nats.Option{nats.ReconnectWait(50 * time.Millisecond)}}
		mutate(&o)
		w, err := New(o)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			err := w.Run(wctx)
			wk.exited.Store(true)
			done <- err
		}()
		wk.stop = func() error { cancel(); return <-done }
		return wk
	}
	readyz := func(wk *worker) error {
		if wk.exited.Load() {
			return errors.New("the worker exited")
		}
		resp, err := http.Get("http://" + wk.addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d", resp.StatusCode)
		}
		return nil
	}
	// leader is the index of the node leading stream name.
	leader := func(name string) int {
		var i int
		jstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			str, err := adm.Stream(sctx, name)
			if err != nil {
				return fmt.Errorf("stream %s: %w", name, err)
			}
			ci := str.CachedInfo().Cluster
			if ci == nil || ci.Leader == "" {
				return fmt.Errorf("stream %s has no leader", name)
			}
			if _, err = fmt.Sscanf(ci.Leader, "node-%d", &i); err != nil {
				return fmt.Errorf("leader %q: %w", ci.Leader, err)
			}
			return err
		})
		return i
	}
	// kill stops the node leading stream name and returns it, logging how
	// long the stream took to name another leader.
	kill := func(name string) int {
		n := leader(name)
		t0 := time.Now()
		c.StopNode(n)
		jstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			if l := leader(name); l == n {
				return fmt.Errorf("stream %s still names node-%d", name, n)
			}
			return nil
		})
		t.Logf("stream %s: node-%d stopped, another leader after %s", name, n, time.Since(t0).Round(time.Millisecond))
		return n
	}
	revive := func(n int) {
		require.NoError(t, c.RestartNode(n))
		require.NoError(t, c.WaitReady(60*time.Second))
	}
	// add copies the segment file into dir whole (the follower waits for a
	// segment being written anyway).
	add := func(dir, src string) {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		tmp := filepath.Join(dir, ".tmp")
		require.NoError(t, os.WriteFile(tmp, b, 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, filepath.Base(src))))
	}
	// reportOf is the report table of a direct reduction of dirs.
	reportOf := func(dirs ...string) string {
		r, err := outcome.NewReducer(outcome.Options{})
		require.NoError(t, err)
		for _, d := range dirs {
			_, err := segfold.ReduceDir(ctx, d, r, segfold.DirOptions{Strict: true})
			require.NoError(t, err)
		}
		var buf bytes.Buffer
		require.NoError(t, r.Report().WriteTable(&buf))
		return buf.String()
	}
	merged := func() (string, error) {
		// A request the cluster loses between leaders is not answered:
		// each read gets its own deadline.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		agg, err := fleet.ReadAggregate(rctx, adm, s)
		if err != nil {
			return "", err
		}
		r, err := agg.Reducer(outcome.Options{})
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = r.Report().WriteTable(&buf)
		return buf.String(), err
	}
	reports := func(want string, workers ...*worker) {
		jstest.CheckFor(t, 120*time.Second, 100*time.Millisecond, func() error {
			for _, wk := range workers {
				if wk.exited.Load() {
					t.Fatal("a worker exited")
				}
			}
			have, err := merged()
			if err != nil {
				return err
			}
			if have != want {
				return fmt.Errorf("merged report\n%s\nwant\n%s", have, want)
			}
			return nil
		})
	}

	split, err := filepath.Abs(filepath.Join("..", "testdata", "traces", "split"))
	require.NoError(t, err)
	segs, err := filepath.Glob(filepath.Join(split, "*.parquet"))
	require.NoError(t, err)
	require.Len(t, segs, 2)
	follow := t.TempDir()
	a := start(func(o *Options) { o.ReplayDir, o.Follow = follow, true })
	jstest.CheckFor(t, 120*time.Second, 50*time.Millisecond, func() error { return readyz(a) })
	t.Log("follower ready")

	// The traces stream's leader lost as a segment arrives, and with
	// another node the quorum, for 4 s: an election that long (under
	// load) outlasted the 5 tries publishing once made (about 2.5 s).
	n := kill(s.TracesStream)
	m := (n + 1) % 3
	c.StopNode(m)
	add(follow, segs[0])
	jstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if err := readyz(a); err == nil || a.exited.Load() {
			return fmt.Errorf("/readyz %v while publishes fail", err)
		}
		return nil
	})
	for hold := time.Now(); time.Since(hold) < 4*time.Second; {
		require.Error(t, readyz(a), "not ready while publishes fail")
		require.False(t, a.exited.Load(), "the worker exited")
		time.Sleep(100 * time.Millisecond) // holding the outage, not waiting for a condition
	}
	revive(m)
	one := t.TempDir()
	add(one, segs[0])
	reports(reportOf(one), a)
	jstest.CheckFor(t, 120*time.Second, 50*time.Millisecond, func() error { return readyz(a) })
	t.Log("first segment reported")
	revive(n)

	// The fleet bucket's leader lost as the other arrives.
	n = kill("KV_" + fleet.Bucket)
	add(follow, segs[1])
	reports(reportOf(split), a)
	revive(n)

	// A replay while the traces stream's leader is lost.
	basic, err := filepath.Abs(filepath.Join("..", "testdata", "traces", "basic"))
	require.NoError(t, err)
	n = kill(s.TracesStream)
	b := start(func(o *Options) { o.ReplayDir = basic })
	reports(reportOf(split, basic), a, b)
	revive(n)

	for _, wk := range []*worker{a, b} {
		jstest.CheckFor(t, 120*time.Second, 50*time.Millisecond, func() error { return readyz(wk) })
		require.NoError(t, wk.stop(), "a cancelled run is a clean stop")
		if _, err := os.Stat(wk.events); err == nil {
			_, err := envelope.VerifyFile(wk.events)
			require.NoError(t, err, "the events file verifies")
		}
	}
}
