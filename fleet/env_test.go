package fleet

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/internal/jstest"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// modernc sqlite and the nats-server keep process-wide helpers.
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
	)
}

type env struct {
	t        *testing.T
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects streams.Subjects
	traces   jetstream.Consumer
	eval     jetstream.Consumer
	dir      string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	ns, err := embedded.Start(filepath.Join(dir, "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(func() {
		nc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	e := &env{t: t, nc: nc, js: js, subjects: streams.DefaultSubjects(), dir: dir}
	ctx := jstest.Ctx(t, 10*time.Second)
	e.traces, e.eval, err = streams.EnsureStreams(ctx, js, e.subjects, 0)
	require.NoError(t, err)
	return e
}

func (e *env) publishCalls(cl []calls.Call, idPrefix string) {
	e.t.Helper()
	ctx := jstest.Ctx(e.t, 10*time.Second)
	for i, c := range cl {
		b, err := json.Marshal(tracemsg.RecordOf(c))
		require.NoError(e.t, err)
		_, err = e.js.Publish(ctx, e.subjects.Traces, b, jetstream.WithMsgID(fmt.Sprintf("%s-%d", idPrefix, i)))
		require.NoError(e.t, err)
	}
}

// runsOf returns agg's call count per run.
func runsOf(t *testing.T, agg *Aggregate) map[string]uint64 {
	t.Helper()
	runs, err := agg.Runs()
	require.NoError(t, err)
	return runs
}
