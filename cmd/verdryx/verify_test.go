package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/envelope"
)

// runCLI runs the binary's run function and returns stdout, stderr and the
// process exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	code := report(err, &stderr)
	return stdout.String(), stderr.String(), code
}

func writeTestChain(t *testing.T, path string, n int) {
	t.Helper()
	w, err := envelope.OpenWriter(path, envelope.WriterOptions{})
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		_, err := w.Append(envelope.New(envelope.TypeQualityScore, "agent://acme.example/bot", "run-1",
			map[string]any{"case_id": fmt.Sprintf("c%d", i), "value": 1}, time.Unix(int64(i), 0)))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
}

func TestVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ndjson")
	writeTestChain(t, good, 5)

	out, _, code := runCLI(t, "verify", good)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "OK: 5 events, 4 chained, 1 heads, 0 unverifiable, 0 breaks")

	// One byte changed in line 3 is a break at line 4.
	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(raw), "\n")
	lines[2] = strings.Replace(lines[2], `"case_id":"c2"`, `"case_id":"c3"`, 1)
	bad := filepath.Join(dir, "bad.ndjson")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644))
	out, _, code = runCLI(t, "verify", good, bad)
	require.Equal(t, 1, code)
	require.Contains(t, out, "bad.ndjson: FAIL")
	require.Contains(t, out, "line 4: break: expected prev_hash sha256:")

	out, _, code = runCLI(t, "verify", "--json", bad)
	require.Equal(t, 1, code)
	require.Contains(t, out, `"breaks":[{"Line":4`)

	_, stderr, code := runCLI(t, "verify", filepath.Join(dir, "missing.ndjson"))
	require.Equal(t, 2, code, "an unreadable file is an input error")
	require.Contains(t, stderr, "missing.ndjson: cannot verify")

	empty := filepath.Join(dir, "empty.ndjson")
	require.NoError(t, os.WriteFile(empty, []byte("\n\n"), 0o644))
	_, stderr, code = runCLI(t, "verify", good, empty)
	require.Equal(t, 2, code, "an empty file is an input error")
	require.Contains(t, stderr, "empty.ndjson: empty")
	_, _, code = runCLI(t, "verify", "--allow-empty", good, empty)
	require.Equal(t, 0, code)

	_, _, code = runCLI(t, "verify")
	require.Equal(t, 2, code)
	_, _, code = runCLI(t, "verify", "--bogus", good)
	require.Equal(t, 2, code)
}

func TestTopLevel(t *testing.T) {
	out, _, code := runCLI(t, "version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "verdryx ")
	require.Contains(t, out, "go1.")
	out, _, code = runCLI(t, "--version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "verdryx ")
	// -v means --verbose (--log-level debug) wherever it exists, never
	// --version.
	_, stderr, code := runCLI(t, "-v")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "unknown shorthand flag: 'v'")
	out, _, code = runCLI(t, "eval", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "-v, --verbose")
	for _, c := range []string{"Exit 0:", "; 1:", "; 2:", "3:"} {
		require.Contains(t, out, c, "eval --help lists every exit code of the README's table")
	}
	_, stderr, code = runCLI(t, "no-such-command")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "no-such-command"`)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	require.Contains(t, stderr, "--help")
	_, _, code = runCLI(t)
	require.Equal(t, 2, code)
	out, _, code = runCLI(t, "--help")
	require.Equal(t, 0, code)
	for _, c := range newRoot(io.Discard, io.Discard).Commands() {
		require.Contains(t, out, c.Name())
	}
	out, _, code = runCLI(t, "verify", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "verdryx verify FILE...")
	out, _, code = runCLI(t, "help", "verify")
	require.Equal(t, 0, code)
	require.Contains(t, out, "verdryx verify FILE...")
	_, stderr, code = runCLI(t, "verify", "--bogus", "x")
	require.Equal(t, 2, code)
	require.Equal(t, "verdryx: unknown flag: --bogus (see 'verdryx verify --help')\n", stderr)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, _, code = runCLI(t, "completion", shell)
		require.Equal(t, 0, code, shell)
		require.Contains(t, out, "verdryx", shell)
	}
}

func TestVersionText(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}}}
	have := versionText(info)
	require.Contains(t, have, "verdryx v1.2.3\n")
	require.Contains(t, have, "commit 0123abc (modified)\n")
	require.Contains(t, have, runtime.Version())
	require.Contains(t, versionText(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}), "verdryx devel\n")
}
