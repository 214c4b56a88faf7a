package worker

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/streams"
)

// runOnce runs a worker with Once over a replayed fixture directory, on
// its own data directory and a free port, and returns the calls of the
// trace aggregate it reported last and everything it reported.
func runOnce(t *testing.T, fixture string, mutate func(*Options)) (calls int64, outs []Output, err error) {
	t.Helper()
	dir, aerr := filepath.Abs(filepath.Join("..", "testdata", "traces", fixture))
	require.NoError(t, aerr)
	opts := Options{DataDir: t.TempDir()}
	opts.Listen, opts.HTTPAddr, opts.Once, opts.ReplayDir = "127.0.0.1:0", "", true, dir
	if mutate != nil {
		mutate(&opts)
	}
	return runWorker(t, opts)
}

// runWorker runs a worker of opts until it returns, collecting its
// outputs; calls is -1 when it reported no trace aggregate.
func runWorker(t *testing.T, opts Options) (calls int64, outs []Output, err error) {
	t.Helper()
	w, err := New(opts)
	require.NoError(t, err)
	ch := w.Outputs()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for o := range ch {
			if o.ReplayRows == 0 {
				outs = append(outs, o)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = w.Run(ctx)
	<-done // Run closed the channel
	// Shutdown released everything: the data directory can be locked again.
	release, lerr := lockDataDir(opts.DataDir)
	require.NoError(t, lerr, "the data directory is still locked after Run")
	release()
	calls = -1
	if n := len(outs); n > 0 && outs[n-1].Traces != nil {
		calls = outs[n-1].Traces.Calls()
	}
	return calls, outs, err
}

// evals are the eval outputs of outs.
func evals(outs []Output) []EvalOutput {
	var r []EvalOutput
	for _, o := range outs {
		if o.Eval != nil {
			r = append(r, *o.Eval)
		}
	}
	return r
}

// TestWorkerRunOnceDrainsThenReportsFromTheOpenStore: a Once run reports
// its replay first, then the eval request it graded, and last the trace
// aggregate holding every replayed row; a second run over the same data
// directory grades nothing again and reports the stored result as
// Earlier.
func TestWorkerRunOnceDrainsThenReportsFromTheOpenStore(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.ndjson")
	opts := Options{DataDir: t.TempDir()}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "traces", "basic"))
	require.NoError(t, err)
	opts.Listen, opts.HTTPAddr, opts.Once, opts.ReplayDir = "127.0.0.1:0", "", true, dir
	opts.EventsPath = events
	opts.Roots = []string{filepath.Join("..", "testdata")}
	opts.EvalRequestFiles = []string{filepath.Join("..", "testdata", "requests", "grimoire.json")}
	have, outs, err := runWorker(t, opts)
	require.NoError(t, err)
	require.NotNil(t, outs[0].Replay, "the replay is reported first")
	results := evals(outs)
	require.Len(t, results, 1, "the eval request ran once before the drain")
	require.False(t, results[0].Earlier)
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	want, err := segfold.ReduceDir(context.Background(), dir, r, segfold.DirOptions{Strict: true})
	require.NoError(t, err)
	require.Equal(t, want.Rows, have, "every replayed row was stored before the drain was declared")
	require.EqualValues(t, want.Rows, outs[0].Replay.Rows)
	rep, err := envelope.VerifyFile(events)
	require.NoError(t, err, "the events file is flushed and verifies")
	require.EqualValues(t, results[0].Result.EventsWritten, rep.Events, "every event of the run is in the file")

	_, outs, err = runWorker(t, opts)
	require.NoError(t, err)
	again := evals(outs)
	require.Len(t, again, 1)
	require.True(t, again[0].Earlier, "the second run reports the stored result, not a new grading")
	require.Equal(t, results[0].Result.Run.ID, again[0].Result.Run.ID)
	require.Zero(t, outs[0].Replay.New, "nothing of the replay is new the second time")
}

func TestWorkerRunReportsFailedSegments(t *testing.T) {
	have, _, err := runOnce(t, "corrupt", nil)
	var failed *ReplayFailedError
	require.True(t, errors.As(err, &failed), "want a *ReplayFailedError, have %v", err)
	require.Len(t, failed.Segments, 1)
	require.Contains(t, failed.Segments[0], "calls-9-20-00000002.parquet")
	require.Positive(t, have, "the good segment was stored and the trace aggregate still reported")
}

func TestWorkerNewAndRunRefuseBadInput(t *testing.T) {
	_, err := New(Options{})
	require.ErrorIs(t, err, ErrInput)

	_, _, err = runOnce(t, "basic", func(o *Options) { o.EventsPath = filepath.Join(t.TempDir(), "missing", "dir", "events.ndjson") })
	require.ErrorIs(t, err, ErrInput)
	require.Contains(t, err.Error(), "Options.EventsPath")
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
}

// TestEnsureDefaultsFillsEveryDefault: each option Defaults gives a value
// (HTTPAddr excepted) is that value in zero options EnsureDefaults filled,
// and an option already set is left as it is.
func TestEnsureDefaultsFillsEveryDefault(t *testing.T) {
	d := Defaults()
	var o Options
	o.EnsureDefaults()
	dv, ov := reflect.ValueOf(d), reflect.ValueOf(o)
	filled := 0
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		if dv.Field(i).IsZero() || name == "HTTPAddr" {
			continue
		}
		filled++
		require.Equal(t, dv.Field(i).Interface(), ov.Field(i).Interface(), "Options.%s", name)
	}
	require.GreaterOrEqual(t, filled, 12, "Defaults holds the defaults")
	require.Empty(t, o.HTTPAddr)
	set := Options{PublishRetryFor: time.Second, SLOEvery: -1, HoursKept: -1, MaxRecordBytes: -1}
	set.EnsureDefaults()
	require.Equal(t, time.Second, set.PublishRetryFor)
	require.Equal(t, time.Duration(-1), set.SLOEvery)
	require.Equal(t, time.Duration(-1), set.HoursKept)
	require.Equal(t, -1, set.MaxRecordBytes)
}
