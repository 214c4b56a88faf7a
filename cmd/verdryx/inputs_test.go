package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer/segment"
)

// copySegments copies the segments of src into dir under name(i), i their
// index in src's segment order.
func copySegments(t *testing.T, src, dir string, name func(i int) string) {
	t.Helper()
	segs, _, err := segment.List(src)
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	for i, s := range segs {
		data, err := os.ReadFile(s.Path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name(i)), data, 0o644))
	}
}

// TestTracesEarlierGatewayNaming: a directory of calls-{seq:08}.parquet
// segments (earlier gateways), and one where an upgraded gateway went on
// with the current naming, report what the same segments under current
// names report.
func TestTracesEarlierGatewayNaming(t *testing.T) {
	want, errOut, code := tracesRun(t, "cost-per-correct", "--traces", tracesFixture("split"))
	require.Equal(t, 0, code, errOut)
	legacy := t.TempDir()
	copySegments(t, tracesFixture("split"), legacy, func(i int) string { return fmt.Sprintf("calls-%08d.parquet", i) })
	got, errOut, code := tracesRun(t, "cost-per-correct", "--traces", legacy)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want, got)

	mixed := t.TempDir()
	copySegments(t, tracesFixture("split"), mixed, func(i int) string {
		if i == 0 {
			return "calls-00000007.parquet"
		}
		return fmt.Sprintf("calls-3-1-%08d.parquet", i)
	})
	got, errOut, code = tracesRun(t, "cost-per-correct", "--traces", mixed)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want, got)
}
