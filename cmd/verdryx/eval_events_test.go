package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
)

// failingFile fails the events file's writes and fsyncs as a test says:
// failWrite and failSync get the 1-based call number and return the error
// to inject. A failed write first writes half its bytes, as a filling disk
// does.
type failingFile struct {
	envelope.File
	mu            sync.Mutex
	writes, syncs int
	failWrite     func(n int) error
	failSync      func(n int) error
}

func (f *failingFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.writes++
	var err error
	if f.failWrite != nil {
		err = f.failWrite(f.writes)
	}
	f.mu.Unlock()
	if err != nil {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f *failingFile) Sync() error {
	f.mu.Lock()
	f.syncs++
	var err error
	if f.failSync != nil {
		err = f.failSync(f.syncs)
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}

// runWithEventsFile runs the CLI with ff injected under the --events file.
func runWithEventsFile(t *testing.T, ff *failingFile, args ...string) (string, string, int) {
	t.Helper()
	ctx := context.WithValue(context.Background(), eventsFileWrapKey{},
		func(f envelope.File) envelope.File { ff.File = f; return ff })
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, &stdout, &stderr)
	return stdout.String(), stderr.String(), report(err, &stderr)
}

// verifyEvents runs verdryx verify on path (exit 0 required) and returns
// the file's report.
func verifyEvents(t *testing.T, path string) envelope.Report {
	t.Helper()
	out, errOut, code := runCLI(t, "verify", path)
	require.Equal(t, exitOK, code, "verify:\n%s%s", out, errOut)
	rep, err := envelope.VerifyFile(path)
	require.NoError(t, err)
	require.Empty(t, rep.Breaks)
	return rep
}

// TestEvalEventsFileFailures: an events file whose writes or fsync fail
// mid-run makes eval exit 1 and say how many events were not written, and
// the file still verifies (no break), so the next run continues the chain.
func TestEvalEventsFileFailures(t *testing.T) {
	cleanEvalEnv(t)
	const agentID = "agent://acme.example/support/bot"
	const cases = 20 // 20 quality_score + 1 eval_run
	for _, tc := range []struct {
		name      string
		ff        *failingFile
		inFile    int // events of this run left in the file
		unwritten int
		warnings  string
	}{
		{"disk full from the 6th event", &failingFile{failWrite: func(n int) error {
			if n >= 6 {
				return syscall.ENOSPC
			}
			return nil
		}}, 5, 16, "... and 13 more"},
		{"one failed write mid-run", &failingFile{failWrite: func(n int) error {
			if n == 8 {
				return syscall.EIO
			}
			return nil
		}}, 20, 1, "event quality_score: append quality_score event: write events file: input/output error"},
		{"fsync fails on close", &failingFile{failSync: func(int) error { return syscall.EIO }}, 0, 21, "fsync events file: input/output error (21 events not written)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "v.db")
			events := filepath.Join(dir, "events.ndjson")
			writeTestChain(t, events, 3) // an earlier run's chain
			set := numberedSet(t, dir, "set.json", cases, func(i int) string { return fmt.Sprintf("q-%d", i) })

			stdout, stderr, code := runWithEventsFile(t, tc.ff, "eval", "--db", db, "--events", events, "--agent-id", agentID, set)
			t.Logf("exit %d\nstderr:\n%s", code, stderr)
			require.Equal(t, exitFailure, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stderr, fmt.Sprintf("verdryx: %d of %d events were not written to %s", tc.unwritten, cases+1, events))
			require.Contains(t, stderr, tc.warnings)
			require.LessOrEqual(t, strings.Count(stderr, "verdryx: warning:"), maxWarnings+2, "warnings are capped:\n%s", stderr)
			require.Contains(t, stdout, fmt.Sprintf("events: %d written", tc.inFile))
			rep := verifyEvents(t, events)
			require.Equal(t, 3+tc.inFile, rep.Events)
			require.Equal(t, 1, rep.Heads)

			// The next run, on a healthy disk, continues the same chain.
			stdout, stderr, code = runCLI(t, "eval", "--db", db, "--events", events, "--agent-id", agentID, set)
			require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			rep = verifyEvents(t, events)
			require.Equal(t, 3+tc.inFile+cases+1, rep.Events)
			require.Equal(t, 1, rep.Heads, "one chain")
		})
	}
}
