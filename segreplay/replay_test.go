package segreplay

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/internal/jstest"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/replay"
)

func TestReplayCorruptSegmentPublishesNothingOfIt(t *testing.T) {
	e := newEnv(t)
	dir, err := filepath.Abs("../testdata/traces/corrupt")
	require.NoError(t, err)
	st, err := Replay(jstest.Ctx(t, 10*time.Second), e.JS, e.Subjects.Traces, dir, Options{})
	require.NoError(t, err)
	require.Len(t, st.Failed, 1)
	require.Equal(t, 1, st.Segments)
	// The direct reduction rolls the bad segment back whole: its rows are
	// what the good segments hold, and exactly those were published.
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	direct, err := replay.ReduceDir(context.Background(), dir, r, replay.DirOptions{})
	require.NoError(t, err)
	stream, err := e.JS.Stream(context.Background(), e.Subjects.TracesStream)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, direct.Rows, st.Rows)
	require.EqualValues(t, direct.Rows, info.State.Msgs, "only the good segment's rows were published")

	_, err = Replay(jstest.Ctx(t, 10*time.Second), e.JS, e.Subjects.Traces, dir, Options{Strict: true})
	require.Error(t, err)
}
