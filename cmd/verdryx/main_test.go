package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain keeps the developer's stack out of the tests: a command that
// resolves its store by the stack's rule would otherwise find a real
// ~/.taipan. TAIPAN_HOME names a directory that does not exist (tests
// that want one set it themselves).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verdryx-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.Setenv("TAIPAN_HOME", filepath.Join(dir, "no-taipan")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestStoreInTaipanHome: with TAIPAN_HOME an existing directory and no
// --db or $VERDRYX_DB, eval writes its run to $TAIPAN_HOME/verdryx.db and
// runs reads it from there and names it; without it, the data directory's
// store is used.
func TestStoreInTaipanHome(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	home := filepath.Join(dir, "taipan")
	data := filepath.Join(dir, "data")
	require.NoError(t, os.Mkdir(home, 0o755))
	t.Setenv("TAIPAN_HOME", home)
	set := numberedSet(t, dir, "good.json", 2, func(i int) string { return fmt.Sprintf("q-%d", i) })
	_, stderr, code := runCLI(t, "--data", data, "eval", set)
	require.Equal(t, exitOK, code, stderr)
	assert.FileExists(t, filepath.Join(home, "verdryx.db"))
	assert.NoFileExists(t, filepath.Join(data, "verdryx.db"))
	out, stderr, code := runCLI(t, "--data", data, "runs")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "(2/2)")
	assert.Contains(t, stderr, "store "+filepath.Join(home, "verdryx.db"))

	t.Setenv("TAIPAN_HOME", filepath.Join(dir, "absent"))
	_, stderr, code = runCLI(t, "--data", data, "eval", set)
	require.Equal(t, exitOK, code, stderr)
	assert.FileExists(t, filepath.Join(data, "verdryx.db"))
}
