// Package jsenv starts the embedded NATS server with the verdryx streams
// that the worker packages' tests run against (fleet, evalreq, lease,
// ragask, segpub, tailfwd, worker). Tests only.
package jsenv

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// Env is one test's server: a connection to it, the default subjects,
// the traces and eval consumers EnsureStreams made, and the test's
// temporary directory (the server's store is under it).
type Env struct {
	T        *testing.T
	NC       *nats.Conn
	JS       jetstream.JetStream
	Subjects streams.Subjects
	Traces   jetstream.Consumer
	Eval     jetstream.Consumer
	Dir      string
}

// New starts a server in a temporary directory, connects to it and
// ensures the streams; the test's cleanup closes and shuts both down.
func New(t *testing.T) *Env {
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
	e := &Env{T: t, NC: nc, JS: js, Subjects: streams.DefaultSubjects(), Dir: dir}
	ctx := jstest.Ctx(t, 10*time.Second)
	e.Traces, e.Eval, err = streams.EnsureStreams(ctx, js, e.Subjects, 0)
	require.NoError(t, err)
	return e
}
