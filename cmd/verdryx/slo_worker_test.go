package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/streams"
)

// TestServeSLOBurn: a worker whose fleet's traces burn an SLO appends one
// slo_burn event per alerting indicator to its chain and to its --events
// file (as many as `verdryx slo --events` writes for the same traces), not
// one per evaluation, and /metrics has the cost per outcome, the SLO gauges
// and the duration of the eval request it graded.
func TestServeSLOBurn(t *testing.T) {
	dir := t.TempDir()
	evFile := filepath.Join(dir, "direct.ndjson")
	out := mustRun(t, "slo", "--traces", tracesFixture("slo"), "--events", evFile, "--json")
	var direct struct {
		EventsWritten int `json:"events_written"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &direct))
	require.Positive(t, direct.EventsWritten)

	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()
	addr := freeAddr(t)
	root := t.TempDir()
	numberedSet(t, root, "set.json", 3, nil)
	req := writeRequest(t, root, "req.json", `{"request_id":"r-slo","eval_set_path":"set.json"}`)
	workerEvents := filepath.Join(dir, "worker.ndjson")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, logs syncBuf
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data", filepath.Join(dir, "data"), "--nats", url, "--http", addr, "--rag-corpus", "",
			"--replay", tracesFixture("slo"), "--slo-every", "200ms", "--slo-window", "87600h", "--log-level", "warn",
			"--events", workerEvents, "--root", root, "--eval-request", req}, &stdout, &logs)
	}()
	t.Cleanup(func() { cancel(); <-done })

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	burns := func() int {
		st, err := js.Stream(context.Background(), streams.DefaultSubjects().EventsStream)
		if err != nil {
			return -1
		}
		info, err := st.Info(context.Background())
		if err != nil || info.State.Msgs == 0 {
			return 0
		}
		n := 0
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			if m, err := st.GetMsg(context.Background(), seq); err == nil && strings.Contains(string(m.Data), `"type":"slo_burn"`) {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return burns() >= direct.EventsWritten }, 60*time.Second, 100*time.Millisecond, "serve log:\n%s", logs.String())
	// Later evaluations (every 200 ms) append nothing more.
	require.Never(t, func() bool { return burns() > direct.EventsWritten }, 2*time.Second, 100*time.Millisecond)

	fileBurns := func() int {
		b, _ := os.ReadFile(workerEvents)
		return strings.Count(string(b), `"type":"slo_burn"`)
	}
	require.Eventually(t, func() bool { return fileBurns() == direct.EventsWritten }, 30*time.Second, 100*time.Millisecond,
		"the --events file has the slo_burn events the chain has")

	metrics := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	require.Eventually(t, func() bool { return strings.Contains(metrics(), "verdryx_eval_duration_seconds_count 1\n") }, 30*time.Second, 100*time.Millisecond,
		"the eval request's duration is observed")
	body := metrics()
	for _, want := range []string{"verdryx_cost_runs{outcome=", "verdryx_cost_usd{outcome=", "verdryx_slo_budget_remaining{", "verdryx_slo_burn_rate{"} {
		require.Contains(t, body, want)
	}
	_ = os.Remove(evFile)
}
