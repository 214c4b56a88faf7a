package ingest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

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
