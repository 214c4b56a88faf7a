package report_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/report"
	"github.com/verdryx/verdryx/store"
)

func openStore(t testing.TB, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// reduceFixture reduces testdata/traces/<name>.
func reduceFixture(t testing.TB, name string) *outcome.Reducer {
	t.Helper()
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	_, err = segfold.ReduceDir(context.Background(), filepath.Join("..", "testdata", "traces", name), r, segfold.DirOptions{Strict: true})
	require.NoError(t, err)
	return r
}

// sloOptions are the options the page computes SLOs with.
func sloOptions(in report.Input) outcome.SLOOptions {
	o := outcome.DefaultSLOOptions()
	o.Scores = in.AgentScores
	return o
}
