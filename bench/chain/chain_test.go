package chain

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunSmall(t *testing.T) {
	res, err := Run(context.Background(), Options{MinTime: 10 * time.Millisecond})
	require.NoError(t, err)
	require.Greater(t, res.EventBytes, 200)
	for _, r := range []Rate{res.Floor, res.Writer} {
		require.GreaterOrEqual(t, r.N, 1000)
		require.Greater(t, r.EventsPerSec, 0.0)
		require.InDelta(t, float64(r.Elapsed.Nanoseconds())/float64(r.N), r.NsPerEvent, 1e-9)
	}
	require.InDelta(t, res.Writer.NsPerEvent/res.Floor.NsPerEvent, res.Ratio, 1e-9)
}
