package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunSmall(t *testing.T) {
	var published int
	res, err := Run(context.Background(), Options{Records: 2000, Batch: 128,
		OnPublished: func(n int, _ time.Duration) { published = n }})
	require.NoError(t, err)
	require.Equal(t, 2000, published)
	require.Equal(t, int64(2000), res.Stored)
	require.Zero(t, res.NotAcked)
	require.NoError(t, res.Check())
	require.Greater(t, res.RawPerSec, 0.0)
	require.Greater(t, res.WorkerPerSec, 0.0)
	res.Stored--
	require.ErrorContains(t, res.Check(), "stored 1999 calls, want 2000")
}
