//go:build unix

package e2e

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary stand for a child that touches
// E2E_TEST_TOUCH_MIB MiB of fresh memory and exits.
func TestMain(m *testing.M) {
	if v := os.Getenv("E2E_TEST_TOUCH_MIB"); v != "" {
		n, _ := strconv.Atoi(v)
		b := make([]byte, n<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		runtime.KeepAlive(b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChildUsageGrowsWithWhatItTouches: a child that touches 256 MiB more
// than another shows that many more page faults (at least a quarter of
// one per 4 KiB page, whatever huge pages the kernel hands out without
// being asked) and a larger peak RSS.
func TestChildUsageGrowsWithWhatItTouches(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("page faults and ru_maxrss in KiB are Linux's")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	run := func(mib int) child {
		t.Setenv("E2E_TEST_TOUCH_MIB", strconv.Itoa(mib))
		c, err := runChild(context.Background(), exe, "-test.run", "^$")
		require.NoError(t, err)
		return c
	}
	small, large := run(1), run(257)
	const pages = 256 << 20 / 4096
	require.Greater(t, large.faults-small.faults, int64(pages/4), "faults: %d against %d", large.faults, small.faults)
	require.Greater(t, large.peakRSS-small.peakRSS, int64(200<<20), "peak RSS: %d against %d", large.peakRSS, small.peakRSS)
}
