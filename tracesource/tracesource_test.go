package tracesource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segment"
)

var basic = filepath.Join("..", "testdata", "traces", "basic")

// TestOneSource: none (with no directory in the environment) or two
// sources are the caller's error, and the fleet is never connected to.
func TestOneSource(t *testing.T) {
	t.Setenv(segment.DirEnv, "")
	dialed := false
	dial := func() (jetstream.JetStream, error) { dialed = true; return nil, errors.New("unreachable") }
	for _, s := range []Source{{}, {Traces: basic, Input: "x.ndjson"}, {Traces: basic, Fleet: dial}} {
		_, err := Reduce(context.Background(), s, outcome.Options{})
		var us *UsageError
		require.ErrorAs(t, err, &us)
		require.ErrorIs(t, err, ErrSources)
	}
	_, err := Reduce(context.Background(), Source{Fleet: dial}, outcome.Options{By: "model"})
	require.ErrorIs(t, err, ErrGroupedFleet)
	require.False(t, dialed, "the fleet was connected to for a source refused before any read")
}

// TestTracesFromTheEnvironment: with no source given, the environment's
// TokenFuse directory is read, and the Result says so; it is the same
// reduction as naming the directory.
func TestTracesFromTheEnvironment(t *testing.T) {
	t.Setenv(segment.DirEnv, basic)
	env, err := Reduce(context.Background(), Source{}, outcome.Options{})
	require.NoError(t, err)
	require.True(t, env.FromEnv)
	require.Equal(t, basic, env.Traces)
	t.Setenv(segment.DirEnv, "")
	named, err := Reduce(context.Background(), Source{Traces: basic, Procs: 2}, outcome.Options{})
	require.NoError(t, err)
	require.False(t, named.FromEnv)
	require.Positive(t, named.Dir.Segments)
	want, err := named.Reducer.CheckedReport()
	require.NoError(t, err)
	have, err := env.Reducer.CheckedReport()
	require.NoError(t, err)
	require.Equal(t, want, have)
}

// TestEmptyAndBadSources: an empty directory or record file is refused
// unless AllowEmpty; a file given as the directory is the caller's error,
// a bad record the data's, named by file and line.
func TestEmptyAndBadSources(t *testing.T) {
	t.Setenv(segment.DirEnv, "")
	ctx := context.Background()
	dir := t.TempDir()
	_, err := Reduce(ctx, Source{Traces: dir}, outcome.Options{})
	require.ErrorIs(t, err, ErrEmpty)
	res, err := Reduce(ctx, Source{Traces: dir, AllowEmpty: true}, outcome.Options{})
	require.NoError(t, err)
	require.Zero(t, res.Dir.Segments)

	empty := filepath.Join(dir, "empty.ndjson")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, err = Reduce(ctx, Source{Input: empty}, outcome.Options{})
	require.ErrorIs(t, err, ErrEmpty)

	var us *UsageError
	_, err = Reduce(ctx, Source{Traces: empty}, outcome.Options{})
	require.ErrorAs(t, err, &us)
	require.ErrorContains(t, err, "not a directory")

	bad := filepath.Join(dir, "bad.ndjson")
	require.NoError(t, os.WriteFile(bad, []byte(`{"run_id":"r","outcome":"ok"}`+"\n"+`{"run_id":"r","cost_microusd":-1}`+"\n"), 0o600))
	_, err = Reduce(ctx, Source{Input: bad}, outcome.Options{})
	var in *InputError
	require.ErrorAs(t, err, &in)
	require.ErrorContains(t, err, "bad.ndjson:2")

	_, err = Reduce(ctx, Source{Input: segfold.Stdin, Stdin: strings.NewReader(`{"run_id":"r","outcome":"ok","cost_microusd":5}`)}, outcome.Options{})
	require.NoError(t, err)
	_, err = Reduce(ctx, Source{Traces: basic, Procs: -1}, outcome.Options{})
	require.ErrorAs(t, err, &us)
}
