package segfold

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/tracegen"
)

func segWriteRows[T any](t *testing.T, path string, rows []T, opts ...parquet.WriterOption) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := parquet.NewGenericWriter[T](f, opts...)
	_, err = w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

// segPlain has no dictionary encoding: strings take the plain path.
type segPlain struct {
	TSMillis     int64  `parquet:"ts_millis"`
	RunID        string `parquet:"run_id,plain"`
	Model        string `parquet:"model,plain"`
	Decision     string `parquet:"decision,plain"`
	InputTokens  uint64 `parquet:"input_tokens"`
	OutputTokens uint64 `parquet:"output_tokens"`
	CostMicroUSD int64  `parquet:"cost_microusd"`
	Step         uint32 `parquet:"step"`
	Outcome      string `parquet:"outcome,optional,plain"`
}

func TestReduceDirStrictAndLenient(t *testing.T) {
	dir := segFixtureDir("corrupt")
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	_, err = ReduceDir(context.Background(), dir, r, DirOptions{Strict: true})
	require.ErrorIs(t, err, segment.ErrCorrupt)
	require.Contains(t, err.Error(), "row group 1")

	r, err = outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	var seen []string
	st, err := ReduceDir(context.Background(), dir, r, DirOptions{OnSegment: func(s segment.Segment) { seen = append(seen, filepath.Base(s.Path)) }})
	require.NoError(t, err)
	require.Equal(t, 1, st.Segments)
	require.Len(t, st.Failed, 1)
	require.Equal(t, "calls-9-20-00000002.parquet", st.Failed[0].File)
	require.Len(t, seen, 2)
	// Row group 0 of the bad segment (run c2) was read before row group 1
	// failed; it must have been rolled back.
	rep := r.Report()
	require.Equal(t, int64(1), rep.Groups[0].Overall.Runs)
	require.Equal(t, int64(1), rep.Stats.Calls)
}

func TestReduceDirCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	_, err = ReduceDir(ctx, segFixtureDir("split"), r, DirOptions{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestSegmentPlainStringsAndPages(t *testing.T) {
	dir := t.TempDir()
	var rows []segPlain
	for i := range 3000 {
		run := []string{"p1", "p2", "p3"}[i%3]
		row := segPlain{TSMillis: int64(i), RunID: run, Model: "m", Decision: "allow", CostMicroUSD: 1, Step: uint32(i / 3)}
		if i/3 == 999 {
			row.Outcome = map[string]string{"p1": "case_resolved", "p2": "abandoned", "p3": ""}[run]
		}
		rows = append(rows, row)
	}
	path := filepath.Join(dir, tracegen.SegmentName(1, 1, 0))
	segWriteRows(t, path, rows, parquet.PageBufferSize(512), parquet.MaxRowsPerRowGroup(700))
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	st, err := ReduceDir(context.Background(), dir, r, DirOptions{Strict: true})
	require.NoError(t, err)
	require.Equal(t, int64(3000), st.Rows)
	rep := r.Report()
	var tags []string
	for _, o := range rep.Groups[0].Outcomes {
		tags = append(tags, o.Outcome)
		require.Equal(t, int64(1000), o.Calls)
		require.Equal(t, int64(1000), o.TotalCostMicroUSD)
	}
	require.Equal(t, "abandoned,case_resolved,(untagged)", strings.Join(tags, ","))
}

// BenchmarkReduce measures the full reduction (page reading, interning,
// per-run folding, report and SLOs) over a generated 1M-row directory: large
// enough for several row groups and thousands of runs, small enough to build
// in about a second. `verdryx bench traces` runs the 10M-row version.
func BenchmarkReduce(b *testing.B) {
	dir := b.TempDir()
	opts := tracegen.DefaultFleetOptions()
	opts.Rows = 1_000_000
	opts.SegmentRows = 500_000
	opts.RowGroupRows = 250_000
	if _, err := tracegen.GenerateFleet(dir, opts); err != nil {
		b.Fatal(err)
	}
	segs, _, err := segment.List(dir)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, s := range segs {
		size += s.Size
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, _ := outcome.NewReducer(outcome.Options{})
		if _, err := ReduceSegments(context.Background(), segs, 0, r, DirOptions{Strict: true}); err != nil {
			b.Fatal(err)
		}
		r.Report()
		if _, err := r.SLO(outcome.DefaultSLOOptions(), nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(opts.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
