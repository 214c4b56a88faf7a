package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// envLeaderHelper carries the serve arguments (JSON) of a worker process
// of TestRealClusterEvalLeaderKill.
const envLeaderHelper = "VERDRYX_LEADER_KILL_HELPER"

// TestLeaderKillHelper is a worker process of
// TestRealClusterEvalLeaderKill: serve until stopped; any return is an
// exit the test looks for.
func TestLeaderKillHelper(t *testing.T) {
	raw := os.Getenv(envLeaderHelper)
	if raw == "" {
		t.Skip("helper process of TestRealClusterEvalLeaderKill")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), args, os.Stdout, os.Stderr)
	t.Fatalf("serve exited: %v", err)
}

// freePort is a loopback port free at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a child process and its exit.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, done: make(chan struct{})}
	require.NoError(t, cmd.Start())
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	return p
}

func (p *proc) hasExited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 sends SIGKILL and waits for the process to end.
func (p *proc) kill9(t *testing.T) {
	require.NoError(t, p.cmd.Process.Kill())
	<-p.done
}

// TestRealClusterEvalLeaderKill is issue 56's "with real nats-server
// processes": a three-node cluster of nats-server processes (the version
// in go.mod, built from the module cache), two `verdryx serve` processes
// sharing the eval consumer (--replicas 3), a stream of eval requests
// (inline exact cases, the stub model) and kill -9 of the node leading
// the eval requests stream, then, that node restarted, of the node leading
// the claims bucket. No worker process exits, both say /readyz 200 at the
// end, every request is answered and graded once across the two (one
// fresh reply, one stored run). Election times are logged.
func TestRealClusterEvalLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of nats-server processes")
	}
	cleanEvalEnv(t)
	dir := t.TempDir()
	ctx := jstest.Ctx(t, 4*time.Minute)
	began := time.Now()
	step := func(what string) { t.Logf("%s: %s", time.Since(began).Round(time.Millisecond), what) }
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build nats-server")
	}
	server := filepath.Join(dir, "nats-server")
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", server, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Skipf("cannot build nats-server from the module cache (go build github.com/nats-io/nats-server/v2): %v\n%s", err, out)
	}
	step("nats-server built")

	const nodes = 3
	var client, route [nodes]int
	var routes []string
	for i := range nodes {
		client[i], route[i] = freePort(t), freePort(t)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", route[i]))
	}
	servers := make([]*proc, nodes)
	var serverLogs syncBuf
	startNode := func(i int) {
		cmd := exec.Command(server, "-n", fmt.Sprintf("node-%d", i), "-a", "127.0.0.1", "-p", fmt.Sprint(client[i]),
			"-js", "-sd", filepath.Join(dir, fmt.Sprintf("node-%d", i)),
			"--cluster_name", "verdryx", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", route[i]), "--routes", strings.Join(routes, ","))
		cmd.Stdout, cmd.Stderr = &serverLogs, &serverLogs
		servers[i] = startProc(t, cmd)
	}
	for i := range nodes {
		startNode(i)
	}
	var urls []string
	for i := range nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
	}
	url := strings.Join(urls, ",")
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	require.NoError(t, err)
	defer nc.Close()
	adm, err := jetstream.New(nc, jetstream.WithDefaultTimeout(5*time.Second))
	require.NoError(t, err)
	s := streams.DefaultSubjects()
	s.Replicas = 3
	// The streams exist before the workers start (each would create them
	// too), so that requests can be published at once.
	jstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		for i, p := range servers {
			if p.hasExited() {
				t.Fatalf("nats-server node-%d exited: %v\n%s", i, p.err, serverLogs.String())
			}
		}
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, _, err := streams.EnsureStreams(ectx, adm, s, 0)
		return err
	})

	step("streams created")
	// Two workers.
	type worker struct {
		p          *proc
		addr, data string
	}
	var logs syncBuf
	var workers []*worker
	for i := range 2 {
		wk := &worker{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), data: filepath.Join(dir, fmt.Sprintf("data-%d", i))}
		args, err := json.Marshal([]string{"serve", "--nats", url, "--data", wk.data, "--http", wk.addr, "--rag-corpus", "",
			"--replicas", "3", "--instance", fmt.Sprintf("w%d", i), "--log-level", "warn"})
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^TestLeaderKillHelper$")
		cmd.Env = append(os.Environ(), envLeaderHelper+"="+string(args))
		cmd.Stdout, cmd.Stderr = &logs, &logs
		wk.p = startProc(t, cmd)
		workers = append(workers, wk)
	}
	noExit := func() {
		for i, wk := range workers {
			if wk.p.hasExited() {
				t.Fatalf("worker %d exited: %v\n%s", i, wk.p.err, logs.String())
			}
		}
	}
	allReady := func() {
		jstest.CheckFor(t, 120*time.Second, 50*time.Millisecond, func() error {
			noExit()
			for i, wk := range workers {
				resp, err := http.Get("http://" + wk.addr + "/readyz")
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("worker %d /readyz %d", i, resp.StatusCode)
				}
			}
			return nil
		})
	}
	allReady()
	step("workers ready")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("workers' logs:\n%s", logs.String())
		}
	})

	var mu sync.Mutex
	answers, fresh := map[string]int{}, map[string]int{}
	sub, err := nc.Subscribe("verdryx.reply.leader.*", func(m *nats.Msg) {
		var rep evalreq.Reply
		if json.Unmarshal(m.Data, &rep) != nil || !rep.OK {
			t.Errorf("reply %s", m.Data)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		answers[rep.RequestID]++
		if !rep.Replayed {
			fresh[rep.RequestID]++
		}
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()
	var cases []string
	for i := range 40 {
		cases = append(cases, fmt.Sprintf(`{"id":"c%d","prompt":"say %d","expected":"%d"}`, i, i, i))
	}
	set := `{"id":"real-leader","cases":[` + strings.Join(cases, ",") + `]}`
	var ids []string
	send := func(id, msgID string) {
		b := fmt.Sprintf(`{"request_id":%q,"eval_set":%s,"model":"stub","agent_id":"agent://acme.example/real-leader","reply_to":"verdryx.reply.leader.%s"}`, id, set, id)
		jstest.PublishStored(t, ctx, adm, s.EvalRequests, []byte(b), msgID)
	}
	publish := func(prefix string, n int) []string {
		var batch []string
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			batch = append(batch, id)
			send(id, "eval:"+id)
		}
		ids = append(ids, batch...)
		return batch
	}
	answered := func(batch []string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, id := range batch {
			if answers[id] > 0 {
				n++
			}
		}
		return n
	}
	// A client that misses its reply asks again: replies are core NATS,
	// at most once, and a worker answers a request it graded from its
	// store. askAgain sends the unanswered requests of batch again, under
	// new message ids, when no answer has come for 15 s.
	asked, lastAnswered, lastProgress := 0, -1, time.Now()
	askAgain := func(batch []string) {
		a := answered(batch)
		if a != lastAnswered {
			lastAnswered, lastProgress = a, time.Now()
			return
		}
		if time.Since(lastProgress) < 15*time.Second {
			return
		}
		for _, id := range batch {
			mu.Lock()
			got := answers[id] > 0
			mu.Unlock()
			if !got {
				asked++
				send(id, fmt.Sprintf("eval:%s:again-%d", id, asked))
				t.Logf("request %s: no reply for 15 s, asked again", id)
			}
		}
		lastProgress = time.Now()
	}
	leader := func(name string) int {
		var i int
		jstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			str, err := adm.Stream(sctx, name)
			if err != nil {
				return err
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
	// killLeader kills -9 the node leading name once some of batch are
	// answered, and waits for another leader, every request of batch
	// answered and both workers ready.
	killLeader := func(name string, batch []string) int {
		jstest.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
			noExit()
			if answered(batch) == 0 {
				return fmt.Errorf("none of %d answered", len(batch))
			}
			return nil
		})
		n := leader(name)
		t0 := time.Now()
		servers[n].kill9(t)
		step(fmt.Sprintf("%s: leader node-%d killed with %d of %d requests answered", name, n, answered(batch), len(batch)))
		jstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			noExit()
			if l := leader(name); l == n {
				return fmt.Errorf("%s still names node-%d", name, n)
			}
			return nil
		})
		t.Logf("%s: another leader after %s", name, time.Since(t0).Round(time.Millisecond))
		jstest.CheckFor(t, 120*time.Second, 50*time.Millisecond, func() error {
			noExit()
			if a := answered(batch); a < len(batch) {
				askAgain(batch)
				return fmt.Errorf("%d of %d answered", a, len(batch))
			}
			return nil
		})
		allReady()
		t.Logf("%s: every request answered and both workers ready %s after the kill", name, time.Since(t0).Round(time.Millisecond))
		return n
	}

	n := killLeader(s.EvalStream, publish("a", 16))
	startNode(n)
	jstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		str, err := adm.Stream(ctx, "KV_"+evalreq.ClaimBucket)
		if err != nil {
			return err
		}
		if ci := str.CachedInfo().Cluster; ci == nil || len(ci.Replicas) != 2 || !ci.Replicas[0].Current || !ci.Replicas[1].Current {
			return fmt.Errorf("bucket replicas not current again: %+v", ci)
		}
		return nil
	})
	killLeader("KV_"+evalreq.ClaimBucket, publish("b", 16))

	// Every request graded once across both workers: stop them (SIGKILL:
	// the stores are committed per request) and count the stored runs.
	noExit()
	for _, wk := range workers {
		wk.p.kill9(t)
	}
	// A store holds its own runs and those it applied from the fleet's
	// quality log, so one run may be in both: count distinct run ids.
	runs := map[string]map[string]bool{}
	for _, wk := range workers {
		st, err := store.Open(ctx, filepath.Join(wk.data, "verdryx.db"), store.Options{})
		require.NoError(t, err)
		require.NoError(t, st.Close()) // migrated and closed: read it as the console does
		db, err := sql.Open("sqlite", "file:"+filepath.Join(wk.data, "verdryx.db")+"?mode=ro")
		require.NoError(t, err)
		rows, err := db.QueryContext(ctx, "SELECT request_id, id FROM eval_runs WHERE request_id != ''")
		require.NoError(t, err)
		for rows.Next() {
			var req, run string
			require.NoError(t, rows.Scan(&req, &run))
			if runs[req] == nil {
				runs[req] = map[string]bool{}
			}
			runs[req][run] = true
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		require.NoError(t, db.Close())
	}
	mu.Lock()
	defer mu.Unlock()
	// Replies are core NATS, at most once: a client whose server is the
	// one killed can miss one while it reconnects, and the request's
	// redelivery then answers from the store. So every request is
	// answered (fresh or replayed) and graded exactly once; how many
	// first answers arrived is logged.
	freshTotal := 0
	for _, id := range ids {
		require.GreaterOrEqual(t, answers[id], 1, "request %s answered", id)
		require.LessOrEqual(t, fresh[id], 1, "request %s answered fresh at most once", id)
		freshTotal += fresh[id]
		require.Len(t, runs[id], 1, "request %s graded once across the workers (distinct runs %v)", id, runs[id])
	}
	t.Logf("%d of %d requests answered by their first attempt; %d asked again", freshTotal, len(ids), asked)
}
