package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/internal/natscluster"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/qualitylog"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// qualitySet is the inline eval set of the quality-log tests: the stub
// model answers some of its cases right, so a run has a mean.
const qualitySet = `{"id":"qset","cases":[{"id":"a","prompt":"q-a","expected":"a"},{"id":"b","prompt":"say b","expected":"b"},{"id":"c","prompt":"q-c","expected":"zzz"}]}`

// startQualityWorker runs a worker on dir against url; stop cancels it
// and returns Run's error.
func startQualityWorker(t *testing.T, url, dir, instance string, s streams.Subjects, after func(string, string)) (stop func() error) {
	t.Helper()
	w, err := New(Options{DataDir: dir, NATSURL: url, Instance: instance, Subjects: s, StartTimeout: 2 * time.Minute,
		CatchUpWait: 20 * time.Second, Logger: jstest.Logger(t),
		NATSOptions: []nats.Option{nats.ReconnectWait(50 * time.Millisecond)}})
	require.NoError(t, err)
	w.evalAfterCommit = after
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() error { cancel(); return <-done }
}

// publishEval publishes an eval request.
func publishEval(t *testing.T, js jetstream.JetStream, s streams.Subjects, id, baseline, replyTo string) {
	t.Helper()
	req := map[string]any{"request_id": id, "eval_set": json.RawMessage(qualitySet)}
	if baseline != "" {
		req["baseline_id"], req["window"], req["seed"] = baseline, 3, 7
	}
	if replyTo != "" {
		req["reply_to"] = replyTo
	}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	_, err = producer.Store(context.Background(), js, &nats.Msg{Subject: s.EvalRequests, Data: b}, "eval:"+id)
	require.NoError(t, err)
}

// storeRuns reads the runs of the store file at path (read-only, beside
// the worker writing it): each run id with its request id.
func storeRuns(path string) (map[string]int, []string, error) {
	st, err := store.Open(context.Background(), path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	byReq, err := st.RunsByRequest(context.Background())
	if err != nil {
		return nil, nil, err
	}
	runs, err := st.Runs(context.Background())
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return byReq, ids, nil
}

// waitAllRuns waits until every store at paths holds exactly the runs of
// requests, once each, and the same run ids; it returns them.
func waitAllRuns(t *testing.T, paths []string, requests []string) []string {
	t.Helper()
	var ids []string
	jstest.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
		ids = nil
		for _, p := range paths {
			byReq, got, err := storeRuns(p)
			if err != nil {
				return err
			}
			if len(got) != len(requests) {
				return fmt.Errorf("%s: %d runs, want %d", p, len(got), len(requests))
			}
			for _, r := range requests {
				if byReq[r] != 1 {
					return fmt.Errorf("%s: request %s has %d runs", p, r, byReq[r])
				}
			}
			if ids != nil && !slices.Equal(ids, got) {
				return fmt.Errorf("%s holds runs %v, another store %v", p, got, ids)
			}
			ids = got
		}
		return nil
	})
	return ids
}

// TestFleetSharesOneQualityHistory: three workers on separate stores on
// a three-node cluster. Requests spread over them, yet every store ends
// with every run once, row for row; a baseline made on one worker's store
// reaches every store and a drift check answered by any worker uses it,
// after catching up; every store gives the same drift verdict; a worker
// started later on an empty store, and a standalone store synced from
// the log, catch up to all of it.
func TestFleetSharesOneQualityHistory(t *testing.T) {
	c, nc, js, s := startCluster(t, "test")
	var dirs, paths []string
	for i := range 3 {
		dirs = append(dirs, t.TempDir())
		paths = append(paths, filepath.Join(dirs[i], "verdryx.db"))
		stop := startQualityWorker(t, c.URLs(), dirs[i], fmt.Sprintf("q%d", i), s, nil)
		defer func() { require.NoError(t, stop()) }()
	}
	var reqs []string
	for i := range 8 {
		reqs = append(reqs, fmt.Sprintf("req-%d", i))
		publishEval(t, js, s, reqs[i], "", "")
	}
	ids := waitAllRuns(t, paths, reqs)
	ctx := jstest.Ctx(t, 5*time.Minute)
	for _, p := range paths {
		st, err := store.Open(ctx, p, store.Options{ReadOnly: true})
		require.NoError(t, err)
		graded := 0
		for _, r := range reqs {
			if _, ok, err := st.RequestResult(ctx, r); err == nil && ok {
				graded++
			}
		}
		st.Close()
		t.Logf("%s graded %d of the %d requests", p, graded, len(reqs))
	}

	// Who graded what: the first record of each run names it; every store
	// holds the same rows of every run.
	for _, id := range ids {
		var first []byte
		for _, p := range paths {
			st, err := store.Open(ctx, p, store.Options{ReadOnly: true})
			require.NoError(t, err)
			run, err := st.Run(ctx, id)
			require.NoError(t, err)
			st.Close()
			b, err := json.Marshal(run)
			require.NoError(t, err)
			if first == nil {
				first = b
			}
			assert.JSONEq(t, string(first), string(b), "run %s in %s", id, p)
		}
	}
	str, err := js.Stream(ctx, s.QualityStream)
	require.NoError(t, err)
	assert.Equal(t, 3, str.CachedInfo().Config.Replicas)

	// A baseline made on worker 0's store file reaches every store.
	st0, err := store.Open(ctx, paths[0], store.Options{})
	require.NoError(t, err)
	bl, err := st0.CreateBaseline(ctx, ids[0], "prod", time.Now())
	require.NoError(t, err)
	require.NoError(t, st0.Close())
	jstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		for _, p := range paths {
			st, err := store.Open(ctx, p, store.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			got, err := st.Baseline(ctx, "prod")
			st.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if got.ID != bl.ID {
				return fmt.Errorf("%s: prod is %s, want %s", p, got.ID, bl.ID)
			}
		}
		return nil
	})

	// Drift checks through the fleet: each answered by whichever worker,
	// caught up, against the baseline.
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	for i := range 3 {
		id := fmt.Sprintf("drift-%d", i)
		reqs = append(reqs, id)
		publishEval(t, js, s, id, "prod", inbox)
		m, err := sub.NextMsg(90 * time.Second)
		require.NoError(t, err)
		var rep evalreq.Reply
		require.NoError(t, json.Unmarshal(m.Data, &rep))
		require.True(t, rep.OK, rep.Error)
		require.NotNil(t, rep.History)
		assert.True(t, rep.History.CaughtUp, "%+v", rep.History)
		var res evalrun.Result
		require.NoError(t, json.Unmarshal(rep.Result, &res))
		require.NotNil(t, res.Drift)
		assert.Equal(t, bl.ID, res.Drift.BaselineID)
	}
	ids = waitAllRuns(t, paths, reqs)

	// A worker started later, on an empty store, catches up; so does a
	// standalone store synced from the log.
	late := t.TempDir()
	stopLate := startQualityWorker(t, c.URLs(), late, "q-late", s, nil)
	defer func() { require.NoError(t, stopLate()) }()
	synced := filepath.Join(t.TempDir(), "console.db")
	sst, err := store.Open(ctx, synced, store.Options{})
	require.NoError(t, err)
	lg, err := qualitylog.Open(ctx, js, s, sst, qualitylog.Options{})
	require.NoError(t, err)
	stats, err := lg.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, len(ids), stats.Applied[store.AppliedNew]-1, "every run and the baseline: %+v", stats)
	require.NoError(t, sst.Close())
	paths = append(paths, filepath.Join(late, "verdryx.db"), synced)
	assert.Equal(t, ids, waitAllRuns(t, paths, reqs))

	// The same verdict from every store.
	var verdicts []string
	for _, p := range paths {
		st, err := store.Open(ctx, p, store.Options{ReadOnly: true})
		require.NoError(t, err)
		seed := uint64(11)
		rep, err := evalrun.CheckDrift(ctx, st, evalrun.DriftRequest{BaselineID: "prod", Window: 5, Seed: &seed})
		st.Close()
		require.NoError(t, err)
		b, err := json.Marshal(rep)
		require.NoError(t, err)
		verdicts = append(verdicts, string(b))
	}
	for _, v := range verdicts[1:] {
		assert.JSONEq(t, verdicts[0], v)
	}
}

// TestQualityKillHelper is the worker TestRunKilledBeforeItsLogRecord
// kills: it runs when VERDRYX_QKILL_URL is set, prints COMMITTED once a
// run is committed and blocks there, before the run's log record.
func TestQualityKillHelper(t *testing.T) {
	url := os.Getenv("VERDRYX_QKILL_URL")
	if url == "" {
		t.Skip("helper process of TestRunKilledBeforeItsLogRecord")
	}
	s := streams.DefaultSubjects()
	block := make(chan struct{})
	stop := startQualityWorker(t, url, os.Getenv("VERDRYX_QKILL_DIR"), "qk", s, func(_, runID string) {
		fmt.Printf("COMMITTED %s\n", runID)
		<-block
	})
	defer stop()
	<-block
}

// TestRunKilledBeforeItsLogRecord: a worker killed (SIGKILL) after
// committing a run and before recording it on the log leaves the run in
// its store alone; restarted, it records it, and every store, including
// one of a worker that never saw the request, holds it once.
func TestRunKilledBeforeItsLogRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c, err := natscluster.Start(t.TempDir(), 1, 60*time.Second)
	require.NoError(t, err)
	defer c.Shutdown()
	_, js := clusterConn(t, c, "test")
	s := streams.DefaultSubjects()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQualityKillHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "VERDRYX_QKILL_URL="+c.URLs(), "VERDRYX_QKILL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	publishEval(t, js, s, "req-killed", "", "")
	committed := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if run, ok := strings.CutPrefix(sc.Text(), "COMMITTED "); ok {
				committed <- run
			}
		}
	}()
	var runID string
	select {
	case runID = <-committed:
	case <-time.After(120 * time.Second):
		t.Fatal("the helper committed no run")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	ctx := jstest.Ctx(t, 3*time.Minute)
	str, err := streams.EnsureQuality(ctx, js, s)
	require.NoError(t, err)
	info, err := str.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.State.Msgs, "killed before the log record")

	// Another worker, then the killed one restarted on its store.
	other := t.TempDir()
	stopOther := startQualityWorker(t, c.URLs(), other, "q-other", s, nil)
	defer func() { require.NoError(t, stopOther()) }()
	stop := startQualityWorker(t, c.URLs(), dir, "qk", s, nil)
	defer func() { require.NoError(t, stop()) }()
	ids := waitAllRuns(t, []string{filepath.Join(dir, "verdryx.db"), filepath.Join(other, "verdryx.db")}, []string{"req-killed"})
	assert.Equal(t, []string{runID}, ids)
}
