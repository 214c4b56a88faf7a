package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunSmall(t *testing.T) {
	var published, rounds int
	res, err := Run(context.Background(), Options{Records: 2000, Batch: 128, Rounds: 2,
		OnPublished: func(_, n int, _ time.Duration) { published += n },
		OnRound:     func(Round) { rounds++ }})
	require.NoError(t, err)
	require.Equal(t, 4000, published)
	require.Equal(t, 2, rounds)
	require.Len(t, res.Rounds, 2)
	for i, rd := range res.Rounds {
		require.Equal(t, i+1, rd.Round)
		require.Equal(t, int64(2000), rd.Stored, "round %d", rd.Round)
		require.Zero(t, rd.NotAcked)
		require.Greater(t, rd.RawPerSec, 0.0)
		require.Greater(t, rd.WorkerPerSec, 0.0)
		require.LessOrEqual(t, rd.RawPerSec, res.RawPerSec, "best raw")
		require.LessOrEqual(t, rd.WorkerPerSec, res.WorkerPerSec, "best worker")
	}
	require.InDelta(t, res.WorkerPerSec/res.RawPerSec, res.Ratio, 1e-9)
	require.InDelta(t, (res.Rounds[0].Ratio+res.Rounds[1].Ratio)/2, res.MedianRatio, 1e-9)
	require.NoError(t, res.Check())
	res.Rounds[1].Stored--
	require.ErrorContains(t, res.Check(), "round 2: stored 1999 calls, want 2000")
}

// TestSummarizeTakesTheBestOfEachKind: the best raw and the best worker
// round may be different rounds; the median is of the rounds' own ratios.
func TestSummarizeTakesTheBestOfEachKind(t *testing.T) {
	res := summarize(10, []Round{
		{Round: 1, RawPerSec: 100, WorkerPerSec: 60, Ratio: 0.6},
		{Round: 2, RawPerSec: 200, WorkerPerSec: 90, Ratio: 0.45},
		{Round: 3, RawPerSec: 150, WorkerPerSec: 120, Ratio: 0.8},
	})
	require.Equal(t, 200.0, res.RawPerSec)
	require.Equal(t, 120.0, res.WorkerPerSec)
	require.InDelta(t, 0.6, res.Ratio, 1e-12)
	require.InDelta(t, 0.6, res.MedianRatio, 1e-12)
	require.Len(t, res.Rounds, 3)
	four := summarize(10, append(res.Rounds, Round{Round: 4, RawPerSec: 1, WorkerPerSec: 1, Ratio: 1}))
	require.InDelta(t, 0.7, four.MedianRatio, 1e-12)
}

func TestRunNDJSONSmall(t *testing.T) {
	res, err := RunNDJSON(context.Background(), NDJSONOptions{Records: 5000, Rounds: 1})
	require.NoError(t, err)
	require.True(t, res.Generated)
	require.Equal(t, int64(5000), res.Records)
	require.InDelta(t, 250, float64(res.Bytes)/5000, 30, "bytes per record")
	require.NoError(t, res.Check())
	require.Contains(t, res.Report, "case_resolved")
	for _, p := range []Pass{res.JSONBare, res.DecoderBare, res.Input, res.JSONInput} {
		require.Greater(t, p.MBPerSec, 0.0)
	}
	require.Less(t, res.DecoderBare.AllocsPerRecord, 0.1)
	res.ReportsEqual = false
	require.Error(t, res.Check())
}
