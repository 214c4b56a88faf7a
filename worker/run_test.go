package worker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
)

// runOnce runs a worker with Once over a replayed fixture directory, on
// its own data directory and a free port, and returns what Drained saw.
func runOnce(t *testing.T, fixture string, mutate func(*Options)) (calls int64, err error) {
	t.Helper()
	dir, aerr := filepath.Abs(filepath.Join("..", "testdata", "traces", fixture))
	require.NoError(t, aerr)
	opts := DefaultOptions(t.TempDir())
	opts.Listen, opts.HTTPAddr, opts.Once, opts.ReplayDir = "127.0.0.1:0", "", true, dir
	calls = -1
	opts.Drained = func(_ context.Context, _ *store.Store, traces *fleet.Aggregate) error {
		calls = traces.Calls()
		return nil
	}
	if mutate != nil {
		mutate(&opts)
	}
	w, err := New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = w.Run(ctx)
	// Shutdown released everything: the data directory can be locked again.
	release, lerr := lockDataDir(opts.DataDir)
	require.NoError(t, lerr, "the data directory is still locked after Run")
	release()
	return calls, err
}

func TestWorkerRunOnceDrainsThenReportsFromTheOpenStore(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.ndjson")
	var results []evalrun.Result
	have, err := runOnce(t, "basic", func(o *Options) {
		o.EventsPath = events
		o.Roots = []string{filepath.Join("..", "testdata")}
		o.EvalRequestFiles = []string{filepath.Join("..", "testdata", "requests", "grimoire.json")}
		o.OnResult = func(_ evalreq.Request, res evalrun.Result) { results = append(results, res) }
	})
	require.NoError(t, err)
	require.Len(t, results, 1, "the eval request ran once before the drain")
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	want, err := segfold.ReduceDir(context.Background(), filepath.Join("..", "testdata", "traces", "basic"), r, segfold.DirOptions{Strict: true})
	require.NoError(t, err)
	require.Equal(t, want.Rows, have, "every replayed row was stored before the drain was declared")
	rep, err := envelope.VerifyFile(events)
	require.NoError(t, err, "the events file is flushed and verifies")
	require.EqualValues(t, results[0].EventsWritten, rep.Events, "every event of the run is in the file")
}

func TestWorkerRunReportsFailedSegments(t *testing.T) {
	have, err := runOnce(t, "corrupt", nil)
	var failed *ReplayFailedError
	require.True(t, errors.As(err, &failed), "want a *ReplayFailedError, have %v", err)
	require.Len(t, failed.Segments, 1)
	require.Contains(t, failed.Segments[0], "calls-9-20-00000002.parquet")
	require.Positive(t, have, "the good segment was stored and Drained still ran")
}

func TestWorkerNewAndRunRefuseBadInput(t *testing.T) {
	_, err := New(Options{})
	require.ErrorIs(t, err, ErrInput)

	_, err = runOnce(t, "basic", func(o *Options) { o.EventsPath = filepath.Join(t.TempDir(), "missing", "dir", "events.ndjson") })
	require.ErrorIs(t, err, ErrInput)
	require.Contains(t, err.Error(), "--events")
}

func TestEnsureDefaults(t *testing.T) {
	o := Options{DataDir: "d"}
	o.EnsureDefaults()
	require.Equal(t, filepath.Join("d", "verdryx.db"), o.DBPath)
	require.Equal(t, []string{filepath.Join("d", "eval")}, o.Roots)
	require.Equal(t, streams.DefaultSubjects(), o.Subjects)
	require.Equal(t, DefaultInstance("d"), o.Instance)
	require.Empty(t, o.HTTPAddr, "an empty HTTP address disables HTTP and stays empty")
	require.NotNil(t, o.Logger)
	require.NotNil(t, o.Replay)
}
