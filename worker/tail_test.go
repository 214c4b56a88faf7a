package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer"
	"github.com/verdryx/verdryx/envelope"
)

// TestTailForwarder: envelopes go to the tail subject, call records to the
// traces subject (and on into the store), malformed lines to the dead
// letters with their reason; nothing is published twice on a restart.
func TestTailForwarder(t *testing.T) {
	e := newEnv(t)
	st := openStore(t, filepath.Join(e.dir, "v.db"))
	runPuller(t, e.traces, &TraceHandler{Store: st}, consumer.PullOptions{Name: "traces"})

	ev, _, err := envelope.Seal(envelope.New(envelope.TypeEvalRun, "agent://acme.example/bot", "r1", map[string]any{"cases": 1}, time.Now()), "")
	require.NoError(t, err)
	path := filepath.Join(e.dir, "in.ndjson")
	doc := string(ev) + "\n" +
		`{"run_id":"r1","step":1,"decision":"allow","cost_microusd":10,"outcome":"case_resolved"}` + "\n" +
		"not json\n"
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))

	deadSub, err := e.nc.SubscribeSync(e.subjects.DeadLetter)
	require.NoError(t, err)
	tailSub, err := e.nc.SubscribeSync(e.subjects.Tail)
	require.NoError(t, err)

	forward := func() {
		tl, err := consumer.NewTailer(path, consumer.TailOptions{StatePath: filepath.Join(e.dir, "off"), FromStart: true, Once: true}, nil)
		require.NoError(t, err)
		f := &TailForwarder{Tailer: tl, JS: e.js, Subjects: e.subjects}
		require.NoError(t, f.Run(context.Background()))
	}
	forward()
	m, err := tailSub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, string(ev), string(m.Data))
	m, err = deadSub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(consumer.HeaderDeadReason), "line 3: malformed JSON")
	waitStored(t, st, 1)

	forward() // restart: the offset is persisted, nothing is read again
	_, err = tailSub.NextMsg(200 * time.Millisecond)
	require.Error(t, err)
	n, err := st.CallCount(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
