package tracegen

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGenerateFleetDeterministic(t *testing.T) {
	opts := DefaultFleetOptions()
	opts.Rows = 30_000
	opts.SegmentRows = 12_000
	opts.RowGroupRows = 5_000
	opts.Concurrent = 50
	a, b := t.TempDir(), t.TempDir()
	sa, err := GenerateFleet(a, opts)
	require.NoError(t, err)
	sb, err := GenerateFleet(b, opts)
	require.NoError(t, err)
	require.Equal(t, sa, sb)
	require.Equal(t, int64(30_000), sa.Rows)
	require.Equal(t, 3, sa.Segments)
	require.Positive(t, sa.Runs)
	entries, err := os.ReadDir(a)
	require.NoError(t, err)
	require.Len(t, entries, 3)
	for _, e := range entries {
		x, err := os.ReadFile(filepath.Join(a, e.Name()))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, e.Name()))
		require.NoError(t, err)
		require.True(t, bytes.Equal(x, y), e.Name())
	}
	// Another seed: the same shape (rows, segment names) but other content.
	opts.Seed++
	c := t.TempDir()
	sc, err := GenerateFleet(c, opts)
	require.NoError(t, err)
	require.Equal(t, sa.Rows, sc.Rows)
	require.Equal(t, sa.Segments, sc.Segments)
	for _, e := range entries {
		x, err := os.ReadFile(filepath.Join(a, e.Name()))
		require.NoError(t, err)
		z, err := os.ReadFile(filepath.Join(c, e.Name()))
		require.NoError(t, err, "segment names do not depend on the seed")
		require.False(t, bytes.Equal(x, z), "seed %d and %d wrote the same %s", opts.Seed-1, opts.Seed, e.Name())
	}

	_, err = GenerateFleet(t.TempDir(), FleetOptions{})
	require.Error(t, err)
}

func TestSegmentName(t *testing.T) {
	require.Equal(t, "calls-1a2b-ff-00000012.parquet", SegmentName(0x1a2b, 0xff, 12))
}

func TestGenerateFleetAllInFlight(t *testing.T) {
	opts := DefaultFleetOptions()
	opts.Rows = 20_000
	opts.SegmentRows = 8_000
	opts.RowGroupRows = 2_000
	opts.AllInFlight = true
	dir := t.TempDir()
	sum, err := GenerateFleet(dir, opts)
	require.NoError(t, err)
	// 200 runs of mean 100 calls: every run starts, the rows are the sum
	// of their lengths.
	require.Equal(t, int64(200), sum.Runs)
	require.InDelta(t, 20_000, float64(sum.Rows), 3_000)
	again, err := GenerateFleet(t.TempDir(), opts)
	require.NoError(t, err)
	require.Equal(t, sum, again)
}
