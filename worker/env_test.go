package worker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/testkit/jstest/jsenv"
)

// TestMain keeps a developer's stack out of the tests: the default store
// path would otherwise be a real ~/.taipan/verdryx.db.
func TestMain(m *testing.M) {
	if err := os.Setenv("TAIPAN_HOME", filepath.Join(os.TempDir(), "verdryx-worker-test-no-taipan")); err != nil {
		panic(err)
	}
	if err := os.Unsetenv("VERDRYX_DB"); err != nil {
		panic(err)
	}
	jstest.VerifyMain(m)
}

// env is the embedded server and streams a test runs against.
type env struct{ *jsenv.Env }

func newEnv(t *testing.T) *env { return &env{jsenv.New(t)} }
