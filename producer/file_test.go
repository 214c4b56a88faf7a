package producer

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
)

func TestDedupeFileDropsReEmittedEventsAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	ev := func(i int) envelope.Event {
		return envelope.New(envelope.TypeQualityScore, "agent://acme.example/bot", "run-1", map[string]any{"case_id": i}, time.Unix(int64(i), 0))
	}
	open := func() (*envelope.Writer, *DedupeFile) {
		w, err := envelope.OpenWriter(path, envelope.WriterOptions{})
		require.NoError(t, err)
		d, err := NewDedupeFile(w, path)
		require.NoError(t, err)
		return w, d
	}
	ctx := context.Background()
	w, d := open()
	for i := 0; i < 3; i++ {
		ok, err := d.Append(ctx, ev(i))
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := d.Append(ctx, ev(1)) // re-emitted in the same process
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, w.Close())

	// After a restart, an event of the earlier process emitted again is
	// dropped too; a new one is appended and chains on.
	w, d = open()
	for _, i := range []int{2, 0, 3} {
		_, err := d.Append(ctx, ev(i))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	rep, err := envelope.VerifyFile(path)
	require.NoError(t, err)
	require.True(t, rep.OK())
	require.Equal(t, 4, rep.Events)
	require.Equal(t, 1, rep.Heads)
}
