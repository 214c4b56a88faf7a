package traces

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunGeneratesThenReuses(t *testing.T) {
	dir := t.TempDir()
	var progress []int64
	res, err := Run(context.Background(), Options{Rows: 20000, RowGroupRows: 5000, Rounds: 1, Dir: dir,
		OnGenerate: func(done int64) { progress = append(progress, done) }})
	require.NoError(t, err)
	require.Equal(t, int64(20000), res.Rows)
	require.True(t, res.Generated)
	require.NotEmpty(t, progress)
	require.Equal(t, int64(20000), progress[len(progress)-1])
	require.Greater(t, res.ReduceRowsPerSec, 0.0)
	require.Greater(t, res.ScanRowsPerSec, 0.0)
	require.Greater(t, res.Runs, int64(0))
	require.NotEmpty(t, res.Columns)

	res2, err := Run(context.Background(), Options{Rounds: 1, Dir: dir})
	require.NoError(t, err)
	require.False(t, res2.Generated, "the segments are reused")
	require.Equal(t, res.Rows, res2.Rows)
	require.Equal(t, res.Runs, res2.Runs)
}

func TestIsInput(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", inputError{errors.New("list trace directory: denied")})
	require.True(t, IsInput(err))
	require.EqualError(t, err, "wrapped: list trace directory: denied")
	require.False(t, IsInput(errors.New("bench traces: reduce: bad")))
}
