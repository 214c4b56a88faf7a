package search

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunSmall(t *testing.T) {
	res, err := Run(context.Background(), Options{Sizes: []int{200, 50}, Dim: 32, Batch: 4, Reps: 3})
	require.NoError(t, err)
	require.Len(t, res.Rows, 2)
	require.Equal(t, 50, res.Rows[0].N, "sizes run ascending")
	require.Equal(t, 200, res.Rows[1].N)
	require.NotEmpty(t, res.KernelF32)
	require.NotEqual(t, "none", res.KernelI8)
	for _, r := range res.Rows {
		require.Equal(t, int64(r.N*32*4), r.MatrixBytes)
		require.Equal(t, int64(r.N*32+r.N*8), r.ReducedBytes)
		require.GreaterOrEqual(t, r.Reranked, 2.0)
		require.Positive(t, r.Build)
		require.Positive(t, r.Single)
	}
	_, err = Run(context.Background(), Options{Sizes: []int{10, 0}, Dim: 32, Batch: 4, Reps: 3})
	require.Error(t, err)
	_, err = Run(context.Background(), Options{Dim: 32, Batch: 4, Reps: 3})
	require.Error(t, err)
}
