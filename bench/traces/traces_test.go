package traces

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunGeneratesThenReuses(t *testing.T) {
	dir := t.TempDir()
	var progress []int64
	res, err := Run(context.Background(), Options{Rows: 20000, RowGroupRows: 5000, SegmentRows: 8000, Rounds: 1, Procs: 2, Dir: dir,
		OnGenerate: func(done int64) { progress = append(progress, done) }})
	require.NoError(t, err)
	require.Len(t, res.Shapes, 2)
	def, all := res.Shapes[0], res.Shapes[1]
	require.Equal(t, "in-flight-1000", def.Name)
	require.Equal(t, "in-flight-all", all.Name)
	require.Equal(t, int64(20000), def.Rows)
	require.InDelta(t, 20000, float64(all.Rows), 3000, "all in flight: the sum of the run lengths")
	require.Equal(t, int64(200), all.Runs)
	require.NotEmpty(t, progress)
	require.Equal(t, def.Rows+all.Rows, progress[len(progress)-1])
	for _, sh := range res.Shapes {
		require.True(t, sh.Generated)
		require.Equal(t, 3, sh.Segments)
		require.Equal(t, int64(5000), sh.RowGroupRows)
		require.Greater(t, sh.ReduceRowsPerSec, 0.0)
		require.Greater(t, sh.ScanRowsPerSec, 0.0)
		require.Greater(t, sh.Runs, int64(0))
	}
	require.NotEmpty(t, res.Columns)

	res2, err := Run(context.Background(), Options{Rounds: 1, Dir: dir})
	require.NoError(t, err)
	require.Len(t, res2.Shapes, 2)
	for i, sh := range res2.Shapes {
		require.False(t, sh.Generated, "the segments are reused")
		require.Equal(t, res.Shapes[i].Rows, sh.Rows)
		require.Equal(t, res.Shapes[i].Runs, sh.Runs)
	}

	// A directory holding segments is the one shape measured.
	res3, err := Run(context.Background(), Options{Rounds: 1, Dir: filepath.Join(dir, "in-flight-all")})
	require.NoError(t, err)
	require.Len(t, res3.Shapes, 1)
	require.Equal(t, "dir", res3.Shapes[0].Name)
	require.Equal(t, all.Rows, res3.Shapes[0].Rows)
}

func TestIsInput(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", inputError{errors.New("list trace directory: denied")})
	require.True(t, IsInput(err))
	require.EqualError(t, err, "wrapped: list trace directory: denied")
	require.False(t, IsInput(errors.New("bench traces: reduce: bad")))
}
