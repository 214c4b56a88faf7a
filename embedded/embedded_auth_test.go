package embedded

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// The documented permissions config parses, and a client under it may
// publish requests but not publish into the events stream, nor connect
// without credentials.
func TestDocumentedPermissionsConfig(t *testing.T) {
	ns, err := StartWith(filepath.Join(t.TempDir(), "nats"), "127.0.0.1:0",
		Security{ConfigFile: filepath.Join("..", "docs", "nats-permissions.conf")})
	require.NoError(t, err)
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	_, err = nats.Connect(ns.ClientURL())
	require.Error(t, err, "no credentials: refused")
	errs := make(chan error, 4)
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("client", "$CLIENT_PASSWORD_BCRYPT"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.Publish("verdryx.eval.requests", []byte(`{}`)))
	require.NoError(t, nc.Publish("verdryx.events.x", []byte(`{}`)))
	require.NoError(t, nc.Flush())
	select {
	case err := <-errs:
		require.ErrorContains(t, err, "Permissions Violation for Publish to \"verdryx.events.x\"")
	case <-time.After(5 * time.Second):
		t.Fatal("publishing into the events stream was not refused")
	}
}
