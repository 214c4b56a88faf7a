package index

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPruneKeepsLeasedGenerations: Prune removes every inactive
// generation past keep but a leased one, which it reports as kept with
// why, and removes once the lease is released; two holders share a
// lease; a lease on a removed generation is refused.
func TestPruneKeepsLeasedGenerations(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	var ids []string
	for i := range 3 {
		ids = append(ids, saveSmall(t, s, time.Unix(int64(100+i), 0)).ID)
	}
	active, err := s.Active()
	require.NoError(t, err)
	require.Equal(t, ids[2], active)

	release1, err := s.Lease(ids[0])
	require.NoError(t, err)
	release2, err := s.Lease(ids[0]) // a second holder of the same generation
	require.NoError(t, err)

	res, err := s.Prune(0)
	require.NoError(t, err)
	assert.Equal(t, []string{ids[1]}, res.Removed)
	assert.Equal(t, []Kept{{ID: ids[0], Reason: reasonLeased}}, res.Kept)
	assert.DirExists(t, filepath.Join(s.Dir(), generationsDir, ids[0]))

	release1()
	release1() // idempotent
	res, err = s.Prune(0)
	require.NoError(t, err)
	assert.Empty(t, res.Removed, "the other holder still serves it")
	assert.Equal(t, []Kept{{ID: ids[0], Reason: reasonLeased}}, res.Kept)

	release2()
	res, err = s.Prune(0)
	require.NoError(t, err)
	assert.Equal(t, []string{ids[0]}, res.Removed)
	assert.Empty(t, res.Kept)
	assert.NoFileExists(t, filepath.Join(s.Dir(), leasesDir, ids[0]+leaseSuffix), "the lease file goes with its generation")

	_, err = s.Lease(ids[0])
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "does not exist")
	_, err = s.Lease("../x")
	require.ErrorIs(t, err, ErrCorrupt)

	// The active generation is kept without a lease, and may be leased.
	release, err := s.Lease(active)
	require.NoError(t, err)
	release()
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.True(t, list[0].Active)
}

// TestLeaseOfKilledProcessDoesNotBlockPrune: a generation leased by
// another process is kept while it lives and removed once it is killed
// with SIGKILL (the kernel dropped its lock; no clean-up ran).
func TestLeaseOfKilledProcessDoesNotBlockPrune(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("SIGKILL of a helper process")
	}
	data := t.TempDir()
	s := NewStore(data, StoreOptions{})
	old := saveSmall(t, s, time.Unix(1, 0)).ID
	saveSmall(t, s, time.Unix(2, 0))

	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHelperProcess$")
	cmd.Env = append(os.Environ(), "VERDRYX_INDEX_LEASE_HELPER="+data+string(os.PathListSeparator)+old)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // never closed: the helper blocks on it
	require.NoError(t, err)
	t.Cleanup(func() { stdin.Close() })
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the helper says it holds the lease")
	require.Equal(t, "leased "+old, strings.TrimSpace(line))

	res, err := s.Prune(0)
	require.NoError(t, err)
	require.Empty(t, res.Removed, "the generation a live process leases is kept")
	require.Equal(t, []Kept{{ID: old, Reason: reasonLeased}}, res.Kept)

	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	_ = cmd.Wait()
	res, err = s.Prune(0)
	require.NoError(t, err)
	require.Equal(t, []string{old}, res.Removed)
	require.Empty(t, res.Kept)
	require.NoDirExists(t, filepath.Join(s.Dir(), generationsDir, old))
}

// TestLeaseHelperProcess is the process
// TestLeaseOfKilledProcessDoesNotBlockPrune kills: it leases the
// generation it is given, says so and blocks (reading a stdin never
// closed) until killed.
func TestLeaseHelperProcess(t *testing.T) {
	arg := os.Getenv("VERDRYX_INDEX_LEASE_HELPER")
	if arg == "" {
		t.Skip("only as TestLeaseOfKilledProcessDoesNotBlockPrune's helper")
	}
	data, id, ok := strings.Cut(arg, string(os.PathListSeparator))
	require.True(t, ok)
	_, err := NewStore(data, StoreOptions{}).Lease(id)
	require.NoError(t, err)
	fmt.Println("leased", id)
	_, _ = io.Copy(io.Discard, os.Stdin) // until SIGKILL
}
