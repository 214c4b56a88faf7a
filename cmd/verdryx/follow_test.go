package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/segment"
)

// syncBuf is a writer safe for a command running on another goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeFollow: serve --replay DIR --follow counts the segment already
// in DIR, then one the gateway writes into DIR in place in two pieces (the
// second once the worker has reported the first half as incomplete past
// --settle), without a restart; the fleet's report over --nats is then the
// report of --traces DIR.
func TestServeFollow(t *testing.T) {
	src, _, err := segment.List(tracesFixture("split"))
	require.NoError(t, err)
	require.Len(t, src, 2)
	dir := t.TempDir()
	traces := filepath.Join(dir, "traces")
	require.NoError(t, os.Mkdir(traces, 0o755))
	first, second := mustRead(t, src[0].Path), mustRead(t, src[1].Path)
	require.NoError(t, os.WriteFile(filepath.Join(traces, "calls-00000000.parquet"), first, 0o644))
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()

	ctx, cancel := context.WithCancel(context.Background())
	var out, logs syncBuf
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data", filepath.Join(dir, "data"), "--nats", url, "--http", "", "--rag-corpus", "",
			"--replay", traces, "--follow", "--settle", "1s", "--log-level", "info"}, &out, &logs)
	}()
	t.Cleanup(func() { cancel(); <-done })

	// sameReport waits until the fleet's report is the directory's.
	sameReport := func() {
		t.Helper()
		want := tablesOf(t, mustRun(t, "cost-per-correct", "--traces", traces))
		deadline := time.Now().Add(90 * time.Second)
		for {
			got, _, code := tracesRun(t, "cost-per-correct", "--nats", url)
			if code == 0 && tablesOf(t, got) == want {
				return
			}
			require.True(t, time.Now().Before(deadline), "fleet report %q, want %q; serve log:\n%s", got, want, logs.String())
			select {
			case err := <-done:
				t.Fatalf("serve ended: %v\n%s", err, logs.String())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	sameReport()

	name := filepath.Join(traces, "calls-00000001.parquet")
	w, err := os.Create(name)
	require.NoError(t, err)
	_, err = w.Write(second[:len(second)/2])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return bytes.Contains([]byte(logs.String()), []byte("calls-00000001.parquet")) },
		60*time.Second, 50*time.Millisecond, "the incomplete segment is reported past --settle")
	_, err = w.Write(second[len(second)/2:])
	require.NoError(t, err)
	require.NoError(t, w.Close())
	sameReport()
	require.Contains(t, mustRun(t, "cost-per-correct", "--traces", traces), "segments: 2 read")
}
