package fleet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/consumer/tail"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/tailfwd"
)

// TestTailForwarder: envelopes go to the tail subject, call records to the
// traces subject (and on into the store), malformed lines to the dead
// letters with their reason; nothing is published twice on a restart.
func TestTailForwarder(t *testing.T) {
	e := newEnv(t)
	w := startFleet(t, e.JS, e.Subjects, "tail", Options{})

	ev, _, err := envelope.Seal(envelope.New(envelope.TypeEvalRun, "agent://acme.example/bot", "r1", map[string]any{"cases": 1}, time.Now()), "")
	require.NoError(t, err)
	path := filepath.Join(e.Dir, "in.ndjson")
	doc := string(ev) + "\n" +
		`{"run_id":"r1","step":1,"decision":"allow","cost_microusd":10,"outcome":"case_resolved"}` + "\n" +
		"not json\n"
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))

	deadSub, err := e.NC.SubscribeSync(e.Subjects.DeadLetter)
	require.NoError(t, err)
	tailSub, err := e.NC.SubscribeSync(e.Subjects.Tail)
	require.NoError(t, err)

	// forward runs the forwarder once over the file, from the saved offset,
	// and returns the class of every line it handled.
	forward := func() []string {
		tl, err := tail.New(path, tail.Options{StatePath: filepath.Join(e.Dir, "off"), FromStart: true, Once: true})
		require.NoError(t, err)
		var classes []string
		f := tailfwd.New(tl, e.JS, e.Subjects, tailfwd.Options{Counted: func(c string) { classes = append(classes, c) }})
		require.NoError(t, f.Run(context.Background()))
		return classes
	}
	require.Equal(t, []string{"event", "record", "invalid"}, forward())
	m, err := tailSub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, string(ev), string(m.Data))
	m, err = deadSub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(producer.HeaderDeadReason), "line 3: malformed JSON")
	waitFleetCalls(t, w, 1)

	// Restart: the offset is persisted, so no line is handled (hence none
	// published) again. Counting what the forwarder handles, rather than
	// waiting for a message that does not come, does not depend on timing
	// nor on JetStream's dedupe window hiding a second publish.
	require.Empty(t, forward(), "lines handled again after a restart")
	// A line appended while stopped is the only one the next restart reads.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"run_id":"r2","step":1,"decision":"allow","cost_microusd":5,"outcome":"case_resolved"}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, []string{"record"}, forward())
	waitFleetCalls(t, w, 2)
	waitFleetDrained(t, e.JS, e.Subjects, 10*time.Second)
	agg, err := ReadAggregate(context.Background(), w.f.js, w.f.opts.Subjects)
	require.NoError(t, err)
	require.EqualValues(t, 2, agg.Calls())
}
