package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/redact"
)

// TestServeRefusesAnExposedUnauthenticatedListen: a non-loopback NATS or
// HTTP listen address without auth (or an explicit opt-out) never starts.
func TestServeRefusesAnExposedUnauthenticatedListen(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--nats-listen", "0.0.0.0:0", "--http", ""},
		{"--nats-listen", ":0", "--http", ""},
		{"--nats-listen", "127.0.0.1:0", "--http", "0.0.0.0:0"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"serve", "--data", dir, "--rag-corpus", "", "--once"}, args...), &stdout, &stderr)
		require.Error(t, err, "%v", args)
		require.Contains(t, err.Error(), "is not a loopback address", "%v", args)
		_, statErr := os.Stat(filepath.Join(dir, "nats"))
		require.True(t, os.IsNotExist(statErr), "%v: the embedded server must not have started", args)
	}
	// With a token it starts (and --once drains and exits).
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := run(ctx, []string{"serve", "--data", dir, "--rag-corpus", "", "--once", "--nats-listen", "0.0.0.0:0", "--http", "",
		"--nats-token", "tok-MARKER-SERVE"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	require.NotContains(t, stdout.String()+stderr.String(), "tok-MARKER-SERVE")
	// --nats-insecure starts open, with a warning.
	stdout.Reset()
	stderr.Reset()
	err = run(ctx, []string{"serve", "--data", dir, "--rag-corpus", "", "--once", "--nats-listen", "0.0.0.0:0", "--http", "", "--nats-insecure"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	require.Contains(t, stderr.String(), "INSECURE")
}

// TestSecretMarkersNeverLeak sets marker secrets, points every provider and
// NATS at servers that echo them, runs every command path through run and
// greps all output, logs, the store file and the events file: zero hits.
func TestSecretMarkersNeverLeak(t *testing.T) {
	const (
		openaiKey    = "sk-OPENAI-MARKER-0001"
		anthropicKey = "sk-ant-ANTHROPIC-MARKER-0002"
		natsPW       = "NATS-PW-MARKER-0003"
		urlPW        = "URL-PW-MARKER-0004"
	)
	markers := []string{openaiKey, anthropicKey, natsPW, urlPW}
	t.Setenv("OPENAI_API_KEY", openaiKey)
	t.Setenv("ANTHROPIC_API_KEY", anthropicKey)
	t.Setenv("VERDRYX_NATS_PASSWORD", natsPW)
	// Every provider answers 401 and echoes the credentials it got.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"type":"authentication_error","message":"bad key: Authorization: `+
			r.Header.Get("Authorization")+` x-api-key: `+r.Header.Get("X-Api-Key")+` key=`+openaiKey+` `+anthropicKey+`"}}`)
	}))
	defer echo.Close()
	withUser := strings.Replace(echo.URL, "http://", "http://user:"+urlPW+"@", 1)

	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	events := filepath.Join(dir, "events.ndjson")
	set := filepath.Join(dir, "set.json")
	require.NoError(t, os.WriteFile(set, []byte(`{"id":"s","cases":[{"id":"c","prompt":"hi","expected":"x"}]}`), 0o600))
	records := filepath.Join(dir, "r.ndjson")
	require.NoError(t, os.WriteFile(records, []byte(`{"run_id":"r","decision":"allow","cost_microusd":5,"outcome":"case_resolved"}`+"\n"), 0o600))
	corpus := filepath.Join("..", "..", "testdata", "grimoire", "corpus.json")
	natsURL := "nats://admin:" + natsPW + "@127.0.0.1:1"

	var all bytes.Buffer
	for _, args := range [][]string{
		{"eval", set, "--db", db, "--events", events, "--agent-id", "agent://acme.example/bot", "--model", "openai:gpt-x", "--openai-base-url", withUser, "--json"},
		{"eval", set, "--db", db, "--events", events, "--agent-id", "agent://acme.example/bot", "--model", "claude-x", "--anthropic-base-url", echo.URL},
		{"eval", set, "--db", db, "--model", "stub", "--judge", "openai:gpt-x", "--openai-base-url", withUser},
		{"ask", "--corpus", corpus, "--memory", "--generator", "openai", "--openai-base-url", withUser, "what is the dose?"},
		{"ask", "--corpus", corpus, "--memory", "--embedder", "openai", "--openai-base-url", withUser, "what is the dose?"},
		{"serve", "--data", filepath.Join(dir, "serve"), "--nats", natsURL, "--http", "", "--rag-corpus", ""},
		{"replay", "--nats", natsURL, dir},
		{"drift", "--db", db, "--baseline", "nope"},
		{"slo", "--traces", filepath.Join("..", "..", "testdata", "traces", "basic")},
		{"cost-per-correct", "--input", records},
	} {
		var stdout, stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := run(ctx, args, &stdout, &stderr)
		cancel()
		code := report(err, &stderr)
		t.Logf("%s: exit %d", args[0], code)
		all.Write(stdout.Bytes())
		all.Write(stderr.Bytes())
	}
	require.Contains(t, all.String(), redact.Mark, "the echoing servers were reached and their answers redacted")
	// The log handler wrapper, on its own.
	var logs bytes.Buffer
	logger := slog.New(redact.FromEnv(nil).Handler(slog.NewTextHandler(&logs, nil)))
	logger.Warn("provider said "+openaiKey, "url", withUser, "err", io.ErrUnexpectedEOF, "body", "x-api-key: "+anthropicKey)
	all.Write(logs.Bytes())
	for _, p := range []string{db, db + "-wal", events} {
		if b, err := os.ReadFile(p); err == nil {
			all.Write(b)
		}
	}
	for _, m := range markers {
		require.NotContains(t, all.String(), m)
	}
	b, err := os.ReadFile(db)
	require.NoError(t, err)
	require.Contains(t, string(b)+readOr(db+"-wal"), "model_error", "the runs were stored, their cases unmeasured")
}

func readOr(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
