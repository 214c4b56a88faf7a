package lease

import (
	"testing"

	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/testkit/jstest/jsenv"
)

func TestMain(m *testing.M) { jstest.VerifyMain(m) }

// env is the embedded server and streams a test runs against.
type env struct{ *jsenv.Env }

func newEnv(t *testing.T) *env { return &env{jsenv.New(t)} }
