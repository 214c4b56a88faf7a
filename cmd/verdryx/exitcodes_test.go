package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
)

// closedURL returns an http:// URL nothing listens on.
func closedURL(t *testing.T, scheme string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return scheme + "://" + addr
}

// runJetStream starts an in-process NATS server with JetStream.
func runJetStream(t *testing.T) string {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	s := natsserver.RunServer(&opts)
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

// TestExitCodes is the README's exit-code table, command by command:
// 0 ok; 1 the check failed; 2 usage or input error (missing, empty or
// malformed input); 3 an outside service failed.
func TestExitCodes(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv("NATS_URL", "")
	t.Setenv("VERDRYX_NATS_URL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	db := filepath.Join(dir, "v.db")
	testdata := filepath.Join("..", "..", "testdata")
	corpus := filepath.Join(testdata, "grimoire", "corpus.json")
	evalset := filepath.Join(testdata, "grimoire", "evalset.json")
	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	emptyDir := filepath.Join(dir, "emptydir")
	require.NoError(t, os.Mkdir(emptyDir, 0o755))
	busyLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busyLn.Close()
	busy := busyLn.Addr().String()
	absent := filepath.Join(dir, "absent")
	chain := filepath.Join(dir, "chain.ndjson")
	writeTestChain(t, chain, 3)
	raw, err := os.ReadFile(chain)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(raw), "\n")
	tampered := filepath.Join(dir, "tampered.ndjson")
	require.NoError(t, os.WriteFile(tampered, []byte(lines[0]+lines[2]), 0o644))
	malformed := filepath.Join(dir, "malformed.ndjson")
	require.NoError(t, os.WriteFile(malformed, []byte(lines[0]+"{not json\n"), 0o644))
	// v1 passes with the echoing stub; v2 has the same cases failing.
	v1 := numberedSet(t, dir, "v1.json", 4, func(i int) string { return fmt.Sprintf("q-%d", i) })
	v2 := numberedSet(t, dir, "v2.json", 4, nil)
	deadNATS := closedURL(t, "nats")
	negative := filepath.Join(dir, "negative.ndjson")
	require.NoError(t, os.WriteFile(negative, []byte(`{"run_id":"r","call_id":"c1","step":0,"decision":"allow","cost_microusd":5}`+"\n"+
		`{"run_id":"r","step":1,"decision":"allow","cost_microusd":-100}`+"\n"), 0o644))
	outside := filepath.Join(dir, "outside.json")
	require.NoError(t, os.WriteFile(outside, []byte(`{"request_id":"o-1","eval_set_path":"../../../etc/passwd"}`), 0o644))
	noJS := func() string {
		opts := natsserver.DefaultTestOptions
		opts.Port = -1
		s := natsserver.RunServer(&opts)
		t.Cleanup(s.Shutdown)
		return s.ClientURL()
	}()
	deadHTTP := closedURL(t, "http")
	nats := runJetStream(t)

	type step struct {
		name string
		args []string
		code int
		// stderr, when set, is a substring of what is printed there.
		stderr string
	}
	steps := []step{
		{"verdryx with no command", nil, exitUsage, ""},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", []string{"runs", "--frob"}, exitUsage, "unknown flag: --frob"},
		{"help", []string{"help", "eval"}, exitOK, ""},
		{"version", []string{"version"}, exitOK, ""},
		{"version with an argument", []string{"version", "x"}, exitUsage, ""},
		{"completion", []string{"completion", "zsh"}, exitOK, ""},
		{"completion of an unknown shell", []string{"completion", "nosh"}, exitUsage, ""},

		{"verify ok", []string{"verify", chain}, exitOK, ""},
		{"verify break", []string{"verify", tampered}, exitFailure, ""},
		{"verify without files", []string{"verify"}, exitUsage, ""},
		{"verify missing file", []string{"verify", absent}, exitUsage, "cannot verify"},
		{"verify empty file", []string{"verify", empty}, exitUsage, "empty"},
		{"help on an unknown topic", []string{"help", "nosuch"}, exitUsage, "unknown help topic"},

		{"tail ok", []string{"tail", "--once", "--from-start", chain}, exitOK, ""},
		{"tail break", []string{"tail", "--once", "--from-start", tampered}, exitFailure, ""},
		{"tail malformed line", []string{"tail", "--once", "--from-start", malformed}, exitFailure, ""},
		{"tail without a file", []string{"tail"}, exitUsage, ""},
		{"tail bad log level", []string{"tail", "--log-level", "loud", chain}, exitUsage, "--log-level"},

		{"cost-per-correct ok", []string{"cost-per-correct", "--traces", filepath.Join(testdata, "traces", "basic")}, exitOK, ""},
		{"cost-per-correct grouped over nats", []string{"cost-per-correct", "--nats", deadNATS, "--by", "model"}, exitUsage, "--by model with --nats"},
		{"cost-per-correct empty dir", []string{"cost-per-correct", "--traces", emptyDir}, exitUsage, "no TokenFuse segments"},
		{"cost-per-correct last", []string{"cost-per-correct", "--traces", filepath.Join(testdata, "traces", "basic"), "--last", "100000w"}, exitOK, ""},
		{"cost-per-correct bad last", []string{"cost-per-correct", "--traces", filepath.Join(testdata, "traces", "basic"), "--last", "0d"}, exitUsage, "--last"},
		{"cost-per-correct last unit", []string{"cost-per-correct", "--traces", filepath.Join(testdata, "traces", "basic"), "--last", "3y"}, exitUsage, "--last"},
		{"cost-per-correct last and from", []string{"cost-per-correct", "--traces", filepath.Join(testdata, "traces", "basic"), "--last", "7d", "--from", "2026-01-01"}, exitUsage, "--last"},
		{"cost-per-correct empty file", []string{"cost-per-correct", "--input", empty}, exitUsage, "holds no records"},
		{"cost-per-correct sample records", []string{"cost-per-correct", "--input", filepath.Join(testdata, "records", "calls.ndjson")}, exitOK, ""},
		{"cost-per-correct negative cost", []string{"cost-per-correct", "--input", negative}, exitUsage, "negative.ndjson:2: field cost_microusd: -100 is negative"},
		{"cost-per-correct empty allowed", []string{"cost-per-correct", "--input", empty, "--allow-empty"}, exitOK, ""},
		{"slo ok", []string{"slo", "--traces", filepath.Join(testdata, "traces", "slo")}, exitOK, ""},
		{"slo empty dir", []string{"slo", "--traces", emptyDir}, exitUsage, "no TokenFuse segments"},

		{"index build", []string{"index", "build", "--data", data, "--corpus", corpus}, exitOK, ""},
		{"index build empty corpus", []string{"index", "build", "--data", data, "--corpus", empty}, exitUsage, "is empty"},
		{"index build provider down", []string{"index", "build", "--data", data, "--corpus", corpus, "--embedder", "openai", "--openai-base-url", deadHTTP}, exitService, ""},
		{"index build bad base url", []string{"index", "build", "--data", data, "--corpus", corpus, "--openai-base-url", "notaurl"}, exitUsage, "--openai-base-url"},
		{"index build docs and corpus", []string{"index", "build", "--data", data, "--corpus", corpus, "--docs", emptyDir}, exitUsage, "not both"},
		{"index build docs without text", []string{"index", "build", "--data", data, "--docs", emptyDir}, exitUsage, "no text found"},
		{"index ls", []string{"index", "ls", "--data", data}, exitOK, ""},
		{"index gc", []string{"index", "gc", "--data", data}, exitOK, ""},
		{"index verify", []string{"index", "verify", "--data", data}, exitOK, ""},
		{"index verify nothing built", []string{"index", "verify", "--data", emptyDir}, exitUsage, "no active generation"},
		{"index gc negative keep", []string{"index", "gc", "--data", data, "--keep", "-1"}, exitUsage, ""},
		{"index without a subcommand", []string{"index"}, exitUsage, ""},
		{"index unknown subcommand", []string{"index", "nope"}, exitUsage, `unknown command "nope"`},

		{"ask", []string{"ask", "--data", data, "what is the dose?"}, exitOK, ""},
		{"ask empty corpus", []string{"ask", "--memory", "--corpus", empty, "q?"}, exitUsage, "is empty"},
		{"ask absent corpus", []string{"ask", "--memory", "--corpus", absent, "q?"}, exitUsage, ""},
		{"ask provider down", []string{"ask", "--memory", "--corpus", corpus, "--generator", "openai", "--openai-base-url", deadHTTP, "q?"}, exitService, ""},

		{"mutate", []string{"mutate", evalset}, exitOK, ""},
		{"mutate empty set", []string{"mutate", empty}, exitUsage, "eval set " + empty + " is empty"},
		{"golden draft", []string{"golden", "draft", "--corpus", corpus, "--chunk", "verdigris-dose-amber"}, exitOK, ""},
		{"golden draft empty corpus", []string{"golden", "draft", "--corpus", empty, "--all"}, exitUsage, "corpus " + empty + " is empty"},
		{"golden draft unknown chunk", []string{"golden", "draft", "--corpus", corpus, "--chunk", "nope"}, exitUsage, `--chunk "nope"`},
		{"golden without a subcommand", []string{"golden"}, exitUsage, ""},

		{"eval ok", []string{"eval", "--db", db, v1}, exitOK, ""},
		{"eval fail-under", []string{"eval", "--db", db, "--fail-under", "0.5", v2}, exitFailure, ""},
		{"eval empty set", []string{"eval", "--db", db, empty}, exitUsage, "is empty"},
		{"compare one model", []string{"compare", "--db", db, "--model", "stub", v1}, exitUsage, "at least two --model"},
		{"compare empty set", []string{"compare", "--db", db, "--model", "stub", "--model", "openai:x", empty}, exitUsage, "is empty"},
		{"eval db in a missing directory", []string{"eval", "--db", filepath.Join(absent, "v.db"), v1}, exitUsage, "does not exist"},
		{"eval bad otlp url", []string{"eval", "--db", db, "--otlp", "notaurl", v1}, exitUsage, "--otlp"},
		{"eval otlp collector down", []string{"eval", "--db", filepath.Join(dir, "otlp.db"), "--otlp", deadHTTP, v1}, exitService, "export spans"},
		{"runs", []string{"runs", "--db", db}, exitOK, ""},
		{"runs without a store", []string{"runs", "--db", filepath.Join(dir, "none.db")}, exitUsage, "no store at"},
		{"baseline of an unknown run", []string{"baseline", "--db", db, "run-nope"}, exitUsage, ""},
		{"baselines", []string{"baselines", "--db", db, "--json"}, exitOK, ""},
		{"baselines without a store", []string{"baselines", "--db", filepath.Join(dir, "none.db")}, exitUsage, "no store at"},
		{"drift by an unknown label", []string{"drift", "--db", db, "--baseline", "nope"}, exitUsage, ""},
		{"drift without --baseline", []string{"drift", "--db", db}, exitUsage, "--baseline is required"},
		{"report", []string{"report", "--db", db, "--out", filepath.Join(dir, "r.html")}, exitOK, ""},
		{"report without a store", []string{"report", "--db", filepath.Join(dir, "none.db")}, exitUsage, "no store at"},
		{"store check", []string{"store", "check", "--db", db}, exitOK, ""},
		{"store check without a store", []string{"store", "check", "--db", filepath.Join(dir, "none.db")}, exitUsage, "no such file"},
		{"store check of an empty file", []string{"store", "check", "--db", empty}, exitOK, ""},
		{"store migrate of a current store", []string{"store", "migrate", "--db", db}, exitOK, ""},
		{"store sync without nats", []string{"store", "sync", "--db", filepath.Join(dir, "sync.db")}, exitUsage, "--nats is required"},
		{"store sync nats down", []string{"store", "sync", "--nats", deadNATS, "--db", filepath.Join(dir, "sync.db")}, exitService, ""},
		{"store migrate without a store", []string{"store", "migrate", "--db", filepath.Join(dir, "none.db")}, exitUsage, "no store at"},
		{"store without a subcommand", []string{"store"}, exitUsage, ""},

		{"serve missing replay dir", []string{"serve", "--data", data, "--once", "--replay", absent}, exitUsage, "--replay"},
		{"serve missing eval request", []string{"serve", "--data", data, "--once", "--eval-request", absent}, exitUsage, "--eval-request"},
		{"serve bad nats url", []string{"serve", "--data", data, "--once", "--nats", "http://x:1"}, exitUsage, "--nats"},
		{"serve follow without a replay", []string{"serve", "--data", data, "--follow"}, exitUsage, "--follow needs --replay"},
		{"serve follow with once", []string{"serve", "--data", data, "--once", "--follow", "--replay", tracesFixture("basic")}, exitUsage, "--follow needs --replay, and not --once"},
		{"serve retention under the duplicate window", []string{"serve", "--data", data, "--once", "--retention", "1m"}, exitUsage, "--retention"},
		{"serve negative retention bytes", []string{"serve", "--data", data, "--once", "--retention-bytes", "-1"}, exitUsage, "--retention-bytes"},
		{"serve unknown huge-pages setting", []string{"serve", "--data", data, "--once", "--huge-pages", "maybe"}, exitUsage, "--huge-pages"},
		{"serve bad hours-kept", []string{"serve", "--data", data, "--once", "--hours-kept", "always"}, exitUsage, "--hours-kept"},
		{"serve eval request outside --root", []string{"serve", "--data", data, "--once", "--http=", "--eval-request", outside}, exitUsage, "--root"},
		{"serve nats without jetstream", []string{"serve", "--data", data, "--once", "--http=", "--nats", noJS, "--start-timeout", "2s"}, exitService, "streams"},
		{"serve nats down", []string{"serve", "--data", data, "--once", "--http=", "--nats", deadNATS}, exitService, ""},
		{"replay", []string{"replay", "--nats", nats, filepath.Join(testdata, "traces", "basic")}, exitOK, ""},
		{"replay missing dir", []string{"replay", "--nats", nats, absent}, exitUsage, ""},
		{"replay empty dir", []string{"replay", "--nats", nats, emptyDir}, exitUsage, "no TokenFuse segments"},
		{"replay empty dir allowed", []string{"replay", "--nats", nats, "--allow-empty", emptyDir}, exitOK, ""},
		{"replay missing creds", []string{"replay", "--nats", nats, "--nats-creds", absent, filepath.Join(testdata, "traces", "basic")}, exitUsage, "--nats-creds"},
		{"serve empty replay dir", []string{"serve", "--data", data, "--once", "--replay", emptyDir}, exitUsage, "no TokenFuse segments"},
		{"serve empty eval request", []string{"serve", "--data", data, "--once", "--eval-request", empty}, exitUsage, "is empty"},
		{"serve busy http port", []string{"serve", "--data", data, "--once", "--http", busy}, exitUsage, "--http"},
		{"report empty traces dir", []string{"report", "--db", db, "--traces", emptyDir, "--out", filepath.Join(dir, "r2.html")}, exitUsage, "no TokenFuse segments"},
		{"replay no server", []string{"replay", "--nats", deadNATS, filepath.Join(testdata, "traces", "basic")}, exitService, "verdryx serve"},
		{"dlq ls", []string{"dlq", "ls", "--nats", nats}, exitOK, ""},
		{"dlq no server", []string{"dlq", "ls", "--nats", deadNATS}, exitService, ""},
		{"dlq redrive nothing to redrive", []string{"dlq", "redrive", "--nats", nats}, exitOK, ""},
		{"dlq redrive no server", []string{"dlq", "redrive", "--nats", deadNATS}, exitService, ""},
		{"dlq without a subcommand", []string{"dlq"}, exitUsage, ""},

		{"bench chain", []string{"bench", "chain", "--time", "10ms", "--json"}, exitOK, ""},
		{"bench index bad sizes", []string{"bench", "index", "--n", "x"}, exitUsage, ""},
		{"bench traces bad rows", []string{"bench", "traces", "--rows", "0"}, exitUsage, ""},
		{"bench worker bad rows", []string{"bench", "worker", "--rows", "0"}, exitUsage, "--rows"},
		{"bench worker bad rounds", []string{"bench", "worker", "--rounds", "0"}, exitUsage, "--rounds"},
		{"bench chaos bad records", []string{"bench", "chaos", "--records", "1"}, exitUsage, ""},
		{"bench ingest bad records", []string{"bench", "ingest", "--records", "0"}, exitUsage, ""},
		{"bench cluster bad workers", []string{"bench", "cluster", "--workers", "0"}, exitUsage, ""},
		{"bench ingest-docs bad file size", []string{"bench", "ingest-docs", "--file-kb", "0"}, exitUsage, "--file-kb"},
		{"bench soak bad days", []string{"bench", "soak", "--days", "0"}, exitUsage, "--days"},
		{"bench soak bad day seconds", []string{"bench", "soak", "--day-seconds", "0.5"}, exitUsage, "--day-seconds"},
		{"bench unknown", []string{"bench", "nope"}, exitUsage, ""},
	}
	// Every runnable command of the tree has at least one row here (or in
	// the drift subtest below), so a new command cannot skip the table.
	covered := map[string]bool{"drift": true}
	for _, s := range steps {
		for i := len(s.args); i > 0; i-- {
			covered[strings.Join(s.args[:i], " ")] = true
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if path := strings.Join(strings.Fields(c.CommandPath())[1:], " "); c.Runnable() && path != "" && c.Name() != "help" &&
			!strings.HasPrefix(path, "completion ") && !covered[path] {
			t.Errorf("command %q has no row in the exit-code table", path)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			// Each case ends on its own; one that would run on (a serve
			// whose refusal regressed) is stopped and fails on its code.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out, errOut bytes.Buffer
			code := report(run(ctx, s.args, &out, &errOut), &errOut)
			stdout, stderr := out.String(), errOut.String()
			assert.Equal(t, s.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stderr, s.stderr)
		})
	}

	// drift: 0 on track, 1 regressed (the same cases, failing).
	t.Run("drift", func(t *testing.T) {
		ddb := filepath.Join(dir, "drift.db")
		out, stderr, code := runCLI(t, "eval", "--db", ddb, "--json", v1)
		require.Equal(t, exitOK, code, stderr)
		var first evalrun.Result
		require.NoError(t, json.Unmarshal([]byte(out), &first))
		_, _, code = runCLI(t, "eval", "--db", ddb, v1)
		require.Equal(t, exitOK, code)
		out, stderr, code = runCLI(t, "baseline", "--db", ddb, "--json", first.Run.ID)
		require.Equal(t, exitOK, code, stderr)
		var bl drift.Baseline
		require.NoError(t, json.Unmarshal([]byte(out), &bl))
		_, stderr, code = runCLI(t, "drift", "--db", ddb, "--baseline", bl.ID)
		assert.Equal(t, exitOK, code, stderr)
		_, _, code = runCLI(t, "eval", "--db", ddb, v2)
		require.Equal(t, exitOK, code)
		out, stderr, code = runCLI(t, "drift", "--db", ddb, "--baseline", bl.ID, "--window", "1", "--allow-changed-set", "--json")
		assert.Equal(t, exitFailure, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		assert.Contains(t, out, "<=", "JSON is not HTML-escaped")
	})
}

// TestEveryHelpOnStdout asks every command in the tree for --help: exit
// 0, the usage on stdout, nothing on stderr.
func TestEveryHelpOnStdout(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"verdryx"}, path...), " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, append(path, "--help")...)
			assert.Equal(t, exitOK, code)
			assert.Empty(t, stderr)
			assert.Contains(t, stdout, "Usage:")
			assert.NotContains(t, stdout, " -data", "double-dash flags only")
		})
		n++
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	assert.Greater(t, n, 20)
}
