package streams

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/testkit/jstest"
)

func TestMain(m *testing.M) { jstest.VerifyMain(m) }

type env struct {
	t        *testing.T
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects Subjects
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
	e := &env{t: t, nc: nc, js: js, subjects: DefaultSubjects(), dir: dir}
	ctx := jstest.Ctx(t, 10*time.Second)
	e.traces, e.eval, err = EnsureStreams(ctx, js, e.subjects, 0)
	require.NoError(t, err)
	return e
}
