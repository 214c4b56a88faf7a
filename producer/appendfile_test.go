package producer

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
)

func TestAppendFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	ev := func(i int, agent string) envelope.Event {
		return envelope.New("slo_burn", agent, "", map[string]any{"i": i}, time.Unix(int64(i), 0))
	}
	const agent = "agent://acme.example/bot"

	n, err := AppendFile(path, nil)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "no events: the file is not created")

	n, err = AppendFile(path, []envelope.Event{ev(1, agent), ev(2, ""), ev(3, agent)})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the event without agent_id is skipped, not counted")
	n, err = AppendFile(path, []envelope.Event{ev(4, agent)})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	rep, err := envelope.VerifyFile(path)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Events)
	assert.Empty(t, rep.Breaks, "appended across opens, the chain holds")

	bad := ev(5, agent)
	bad.Type = ""
	n, err = AppendFile(path, []envelope.Event{ev(6, agent), bad, ev(7, agent)})
	assert.Equal(t, 1, n, "written before the bad event")
	assert.ErrorContains(t, err, "append")

	_, err = AppendFile(filepath.Join(t.TempDir(), "missing", "events.ndjson"), []envelope.Event{ev(1, agent)})
	assert.ErrorContains(t, err, "open events file")
}
