package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/internal/natscluster"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// leaderRig stops and restarts the nodes leading streams and buckets of an
// in-process three-node cluster.
type leaderRig struct {
	t   *testing.T
	c   *natscluster.Cluster
	adm jetstream.JetStream
	ctx context.Context
}

// leader is the index of the node leading stream name.
func (g leaderRig) leader(name string) int {
	var i int
	jstest.CheckFor(g.t, 60*time.Second, 50*time.Millisecond, func() error {
		sctx, cancel := context.WithTimeout(g.ctx, 2*time.Second)
		defer cancel()
		str, err := g.adm.Stream(sctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		ci := str.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return fmt.Errorf("stream %s has no leader", name)
		}
		_, err = fmt.Sscanf(ci.Leader, "node-%d", &i)
		return err
	})
	return i
}

func (g leaderRig) revive(n int) {
	require.NoError(g.t, g.c.RestartNode(n))
	require.NoError(g.t, g.c.WaitReady(60*time.Second))
}

// clusterWorker is a worker run on the cluster, with its /readyz watched
// every 10 ms.
type clusterWorker struct {
	addr    string
	exited  atomic.Bool
	stop    func() error
	saw503  atomic.Bool // /readyz answered 503 since the last reset
	ready   atomic.Bool // the last /readyz answer was 200
	outputs func() []Output
	db      string // the worker's store
}

func startClusterWorker(t *testing.T, c *natscluster.Cluster, s streams.Subjects, mutate func(*Options)) *clusterWorker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	wk := &clusterWorker{addr: ln.Addr().String()}
	require.NoError(t, ln.Close())
	o := Options{DataDir: t.TempDir(), NATSURL: c.URLs(), Subjects: s, StartTimeout: 3 * time.Minute, HTTPAddr: wk.addr,
		NATSOptions: []nats.Option{nats.ReconnectWait(50 * time.Millisecond)}, Logger: jstest.Logger(t)}
	mutate(&o)
	w, err := New(o)
	require.NoError(t, err)
	wk.db = w.Options().DBPath
	var mu sync.Mutex
	var outs []Output
	ch := w.Outputs()
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for out := range ch {
			mu.Lock()
			outs = append(outs, out)
			mu.Unlock()
		}
	}()
	wk.outputs = func() []Output {
		mu.Lock()
		defer mu.Unlock()
		return append([]Output(nil), outs...)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := w.Run(wctx)
		wk.exited.Store(true)
		done <- err
	}()
	pctx, stopPoll := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		client := &http.Client{Timeout: time.Second}
		for pctx.Err() == nil {
			if resp, err := client.Get("http://" + wk.addr + "/readyz"); err == nil {
				resp.Body.Close()
				wk.ready.Store(resp.StatusCode == http.StatusOK)
				if resp.StatusCode == http.StatusServiceUnavailable {
					wk.saw503.Store(true)
				}
			}
			select {
			case <-pctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	var runErr error
	wk.stop = func() error {
		once.Do(func() {
			stopPoll()
			<-polled
			cancel()
			runErr = <-done
			<-collected
		})
		return runErr
	}
	t.Cleanup(func() { _ = wk.stop() })
	return wk
}

// waitReady waits until the worker's /readyz says 200, failing the test
// if it exits.
func (wk *clusterWorker) waitReady(t *testing.T) {
	t.Helper()
	jstest.CheckFor(t, 120*time.Second, 20*time.Millisecond, func() error {
		if wk.exited.Load() {
			t.Fatal("the worker exited")
		}
		if !wk.ready.Load() {
			return errors.New("/readyz not 200")
		}
		return nil
	})
}

// TestEvalRidesOutLeaderLoss: on a three-node cluster, a worker answering
// a stream of eval requests (inline exact cases, the stub model, each
// emitting an event per case) loses the node leading the eval requests
// stream with a second node (no quorum for 4 s), then the node leading
// the claims bucket alone. The worker never exits, /readyz says 503 while
// its writes fail and 200 once they flow, every request is graded once
// (one stored run, one result) and answered, each by the attempt under
// way: no delivery failed and went back to the stream. A reply lost in
// transit (core NATS) is asked for again, as a client would, and comes
// from the store.
func TestEvalRidesOutLeaderLoss(t *testing.T) {
	c, nc, adm, s := startCluster(t, "admin")
	ctx := jstest.Ctx(t, 5*time.Minute)
	g := leaderRig{t: t, c: c, adm: adm, ctx: ctx}

	// Replies: every answer per request id, and the fresh ones (not
	// answered again from the store).
	inbox := nats.NewInbox()
	var mu sync.Mutex
	answers, fresh := map[string]int{}, map[string]int{}
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		var rep evalreq.Reply
		if json.Unmarshal(m.Data, &rep) != nil || !rep.OK {
			t.Errorf("reply %s", m.Data)
			return
		}
		mu.Lock()
		answers[rep.RequestID]++
		if !rep.Replayed {
			fresh[rep.RequestID]++
		}
		mu.Unlock()
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()

	var cases []string
	for i := range 40 {
		cases = append(cases, fmt.Sprintf(`{"id":"c%d","prompt":"say %d","expected":"%d"}`, i, i, i))
	}
	set := `{"id":"leader-loss","cases":[` + strings.Join(cases, ",") + `]}`
	// publish sends n requests named prefix-i, each until JetStream stores
	// it (a request id is its message id: stored once).
	send := func(id, msgID string) {
		b := fmt.Sprintf(`{"request_id":%q,"eval_set":%s,"model":"stub","agent_id":"agent://acme.example/leader-bot","reply_to":%q}`, id, set, inbox+"."+id)
		jstest.PublishStored(t, ctx, adm, s.EvalRequests, []byte(b), msgID)
	}
	publish := func(prefix string, n int) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			ids = append(ids, id)
			send(id, "eval:"+id)
		}
		return ids
	}
	answered := func(ids []string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, id := range ids {
			if answers[id] > 0 {
				n++
			}
		}
		return n
	}
	wk := startClusterWorker(t, c, s, func(*Options) {})
	wk.waitReady(t)
	// A client that misses its reply asks again: replies are core NATS,
	// at most once (one published as a server comes back can be dropped
	// before the test's interest reaches that server), and the worker
	// answers a request it graded again from its store. askAgain sends a
	// request again, under a new message id, once the worker has graded
	// it and its reply has not come for 5 s.
	unanswered := map[string]time.Time{}
	asked := 0
	askAgain := func(ids []string) {
		graded := map[string]bool{}
		for _, out := range wk.outputs() {
			if out.Eval != nil {
				graded[out.Eval.Request.RequestID] = true
			}
		}
		for _, id := range ids {
			mu.Lock()
			got := answers[id] > 0
			mu.Unlock()
			since, seen := unanswered[id]
			switch {
			case got || !graded[id]:
			case !seen:
				unanswered[id] = time.Now()
			case time.Since(since) > 5*time.Second:
				asked++
				send(id, fmt.Sprintf("eval:%s:again-%d", id, asked))
				t.Logf("request %s graded, its reply not come: asked again", id)
				unanswered[id] = time.Now()
			}
		}
	}
	allAnswered := func(ids []string) {
		jstest.CheckFor(t, 180*time.Second, 50*time.Millisecond, func() error {
			if wk.exited.Load() {
				t.Fatal("the worker exited")
			}
			if n := answered(ids); n < len(ids) {
				askAgain(ids)
				return fmt.Errorf("%d of %d requests answered", n, len(ids))
			}
			return nil
		})
	}

	// The eval requests stream's leader, with a second node: no quorum
	// for anything for 4 s, while requests are being answered.
	first := publish("a", 20)
	jstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if answered(first) == 0 {
			return errors.New("no request answered yet")
		}
		return nil
	})
	n := g.leader(s.EvalStream)
	m := (n + 1) % 3
	t0 := time.Now()
	wk.saw503.Store(false)
	c.StopNode(n)
	c.StopNode(m)
	t.Logf("stream %s: leader node-%d and node-%d stopped with %d of %d requests answered", s.EvalStream, n, m, answered(first), len(first))
	jstest.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		if wk.exited.Load() {
			t.Fatal("the worker exited")
		}
		if !wk.saw503.Load() {
			return errors.New("/readyz not 503 while writes fail")
		}
		return nil
	})
	t.Logf("/readyz 503 after %s", time.Since(t0).Round(time.Millisecond))
	for hold := time.Now(); time.Since(hold) < 4*time.Second; {
		require.False(t, wk.exited.Load(), "the worker exited")
		require.False(t, wk.ready.Load(), "/readyz 200 while writes fail")
		time.Sleep(50 * time.Millisecond) // holding the outage, not waiting for a condition
	}
	g.revive(m)
	allAnswered(first)
	wk.waitReady(t)
	t.Logf("all answered and ready %s after the stop", time.Since(t0).Round(time.Millisecond))
	g.revive(n)

	// The claims bucket's leader alone: an election while requests flow.
	second := publish("b", 20)
	jstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if answered(second) == 0 {
			return errors.New("no request answered yet")
		}
		return nil
	})
	bucket := "KV_" + evalreq.ClaimBucket
	n = g.leader(bucket)
	t0 = time.Now()
	wk.saw503.Store(false)
	c.StopNode(n)
	t.Logf("bucket %s: leader node-%d stopped with %d of %d requests answered", bucket, n, answered(second), len(second))
	jstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if l := g.leader(bucket); l == n {
			return fmt.Errorf("still led by node-%d", n)
		}
		return nil
	})
	t.Logf("bucket %s: another leader after %s", bucket, time.Since(t0).Round(time.Millisecond))
	allAnswered(second)
	wk.waitReady(t)
	t.Logf("all answered and ready %s after the stop; /readyz said 503 meanwhile: %v", time.Since(t0).Round(time.Millisecond), wk.saw503.Load())
	g.revive(n)

	// Each request was graded by the attempt under way when the leader
	// was lost: its writes waited for the election instead of failing the
	// attempt, which would go back to the stream and start again.
	resp, err := http.Get("http://" + wk.addr + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, line := range strings.Split(string(metrics), "\n") {
		require.False(t, strings.HasPrefix(line, `verdryx_messages_naked_total{consumer="eval"}`) && !strings.HasSuffix(line, " 0"),
			"an eval attempt failed and was redelivered: %s", line)
	}
	require.NoError(t, wk.stop(), "a cancelled run is a clean stop")
	st, err := store.Open(ctx, wk.db, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.RunsByRequest(ctx)
	require.NoError(t, err)
	results := map[string]int{}
	for _, out := range wk.outputs() {
		if out.Eval != nil {
			results[out.Eval.Request.RequestID]++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for _, id := range append(first, second...) {
		require.Equal(t, 1, results[id], "request %s graded once", id)
		require.LessOrEqual(t, fresh[id], 1, "request %s answered fresh at most once", id)
		require.GreaterOrEqual(t, answers[id], 1, "request %s answered", id)
		require.Equal(t, 1, runs[id], "request %s has one stored run", id)
		if fresh[id] == 0 {
			lost++
		}
	}
	t.Logf("%d fresh replies lost and answered again from the store (asked %d times again)", lost, asked)
	require.Len(t, runs, len(first)+len(second))
}

// TestTailRidesOutLeaderLoss: on a three-node cluster, a worker tailing a
// file of call records loses the node leading the traces stream with a
// second node (no quorum for 4 s) while lines are appended, then the
// leader alone as more are. The worker never exits, /readyz says 503
// while the publishes fail and 200 once they flow, and every line is
// stored once and counted once by the fleet.
func TestTailRidesOutLeaderLoss(t *testing.T) {
	c, _, adm, s := startCluster(t, "admin")
	ctx := jstest.Ctx(t, 5*time.Minute)
	g := leaderRig{t: t, c: c, adm: adm, ctx: ctx}

	path := filepath.Join(t.TempDir(), "calls.ndjson")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	lines := 0
	// appendLines appends n call records, each of a run of its own.
	appendLines := func(n int) {
		var b strings.Builder
		for range n {
			lines++
			fmt.Fprintf(&b, `{"ts_millis":%d,"run_id":"tail-run-%d","call_id":"call-%d","model":"gpt-4o-mini","decision":"allow","input_tokens":10,"output_tokens":2,"cost_microusd":3,"step":0,"agent_id":"agent://acme.example/tail-bot"}`+"\n",
				time.Now().UnixMilli(), lines, lines)
		}
		_, err := f.WriteString(b.String())
		require.NoError(t, err)
	}
	// stored is how many messages the traces stream holds on its
	// partition subjects (the tail's only subjects there).
	stored := func() (int, error) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		str, err := adm.Stream(sctx, s.TracesStream)
		if err != nil {
			return 0, err
		}
		info, err := str.Info(sctx, jetstream.WithSubjectFilter(s.Traces+".*"))
		if err != nil {
			return 0, err
		}
		n := 0
		for _, c := range info.State.Subjects {
			n += int(c)
		}
		return n, nil
	}
	appendLines(50)
	wk := startClusterWorker(t, c, s, func(o *Options) { o.TailPath = path })
	wk.waitReady(t)
	all := func() {
		jstest.CheckFor(t, 180*time.Second, 50*time.Millisecond, func() error {
			if wk.exited.Load() {
				t.Fatal("the worker exited")
			}
			n, err := stored()
			if err != nil {
				return err
			}
			if n != lines {
				return fmt.Errorf("%d of %d lines stored", n, lines)
			}
			return nil
		})
		wk.waitReady(t)
	}
	all()

	// The traces stream's leader with a second node, lines appended.
	n := g.leader(s.TracesStream)
	m := (n + 1) % 3
	t0 := time.Now()
	wk.saw503.Store(false)
	c.StopNode(n)
	c.StopNode(m)
	appendLines(100)
	jstest.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		if wk.exited.Load() {
			t.Fatal("the worker exited")
		}
		if !wk.saw503.Load() {
			return errors.New("/readyz not 503 while publishes fail")
		}
		return nil
	})
	t.Logf("stream %s: node-%d and node-%d stopped; /readyz 503 after %s", s.TracesStream, n, m, time.Since(t0).Round(time.Millisecond))
	for hold := time.Now(); time.Since(hold) < 4*time.Second; {
		require.False(t, wk.exited.Load(), "the worker exited")
		require.False(t, wk.ready.Load(), "/readyz 200 while publishes fail")
		time.Sleep(50 * time.Millisecond) // holding the outage, not waiting for a condition
	}
	g.revive(m)
	all()
	t.Logf("every line stored and ready %s after the stop", time.Since(t0).Round(time.Millisecond))
	g.revive(n)

	// The leader alone, lines appended during the election.
	n = g.leader(s.TracesStream)
	t0 = time.Now()
	c.StopNode(n)
	appendLines(100)
	all()
	t.Logf("stream %s: node-%d stopped; every line stored and ready after %s", s.TracesStream, n, time.Since(t0).Round(time.Millisecond))
	g.revive(n)

	// The fleet counted each line once.
	jstest.CheckFor(t, 120*time.Second, 100*time.Millisecond, func() error {
		// Each read has a deadline of its own: a request the cluster drops
		// during an election is never answered.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		agg, err := fleet.ReadAggregate(rctx, adm, s)
		if err != nil {
			return err
		}
		if got := agg.Calls(); got != int64(lines) {
			return fmt.Errorf("fleet counted %d calls, want %d", got, lines)
		}
		return nil
	})
	require.NoError(t, wk.stop(), "a cancelled run is a clean stop")
}
