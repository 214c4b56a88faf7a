package fleet

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/testkit/jstest/jsenv"
)

func TestMain(m *testing.M) { jstest.VerifyMain(m) }

// env is the embedded server and streams a test runs against.
type env struct{ *jsenv.Env }

func newEnv(t *testing.T) *env { return &env{jsenv.New(t)} }

func (e *env) publishCalls(cl []calls.Call, idPrefix string) {
	e.T.Helper()
	ctx := jstest.Ctx(e.T, 10*time.Second)
	for i, c := range cl {
		_, err := e.JS.Publish(ctx, e.Subjects.Traces, calltest.RecordJSON(c), jetstream.WithMsgID(fmt.Sprintf("%s-%d", idPrefix, i)))
		require.NoError(e.T, err)
	}
}

// runsOf returns agg's call count per run.
func runsOf(t *testing.T, agg *partstate.Aggregate) map[string]uint64 {
	t.Helper()
	runs, err := agg.Runs()
	require.NoError(t, err)
	return runs
}
