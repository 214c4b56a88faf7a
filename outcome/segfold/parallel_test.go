package segfold

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/tracegen"
)

type dirResult struct {
	Report *outcome.Report
	SLO    *outcome.SLOReport
	Stats  DirStats
}

func reduceWith(t *testing.T, dir string, opts outcome.Options, procs int, strict bool) (dirResult, error) {
	t.Helper()
	r, err := outcome.NewReducer(opts)
	require.NoError(t, err)
	st, err := ReduceDir(context.Background(), dir, r, DirOptions{Procs: procs, Strict: strict})
	if err != nil {
		return dirResult{}, err
	}
	sopts := outcome.DefaultSLOOptions()
	sopts.MinEvents = 1
	slo, err := r.SLO(sopts, envelope.ValidAgentID)
	require.NoError(t, err)
	return dirResult{r.Report(), slo, st}, nil
}

// genDir writes a fleet directory whose runs span row groups and segments,
// with equal-step outcome ties across row groups (a run's last two calls
// both tagged, at the same step).
func genDir(t *testing.T, allInFlight bool) string {
	t.Helper()
	dir := t.TempDir()
	o := tracegen.DefaultFleetOptions()
	o.Rows, o.SegmentRows, o.RowGroupRows = 40_000, 9_000, 1_700
	o.MeanCallsPerRun, o.Concurrent, o.AllInFlight = 20, 60, allInFlight
	_, err := tracegen.GenerateFleet(dir, o)
	require.NoError(t, err)
	// A segment of ties: the same run and step tagged differently in two
	// row groups and two segments (later position wins).
	ts := o.Start.UnixMilli()
	var cs []calls.Call
	for i := range 9 {
		cs = append(cs, calls.Call{TSMillis: ts + int64(i), RunID: fmt.Sprintf("tie-%d", i%3), HasRunID: true,
			Step: 7, HasStep: true, Decision: "allow", CostMicroUSD: int64(10 + i),
			Outcome: []string{"escalated", "abandoned", "case_resolved"}[i%3], AgentID: fmt.Sprintf("agent://t/%d", i%2)})
	}
	writeSeg := func(name string, cs []calls.Call) {
		f, err := os.Create(filepath.Join(dir, name))
		require.NoError(t, err)
		w, err := tracegen.NewSegmentWriter(f, tracegen.Current, tracegen.Options{RowGroupRows: 2})
		require.NoError(t, err)
		require.NoError(t, w.Write(cs))
		require.NoError(t, w.Close())
		require.NoError(t, f.Close())
	}
	writeSeg(tracegen.SegmentName(7, 1, 0), cs)
	for i := range cs {
		cs[i].Outcome = []string{"abandoned", "case_resolved", "escalated"}[(i+1)%3]
	}
	writeSeg(tracegen.SegmentName(7, 1<<62, 1), cs)
	return dir
}

// TestParallelEqualsSequential: --procs 2 and 7 give the report, SLO
// report and replay counts of --procs 1, on generated
// directories (runs in flight 60 and all) and on every shipped fixture,
// with and without a window and grouping.
func TestParallelEqualsSequential(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dirs := map[string]string{"fleet": genDir(t, false), "all-in-flight": genDir(t, true)}
	for _, name := range []string{"basic", "blocked", "corrupt", "norunid", "nulls", "old8", "rowgroups", "slo", "split"} {
		dirs[name] = segFixtureDir(name)
	}
	optsList := []outcome.Options{{}, {By: calls.ColAgentID}, {From: t0.Add(3 * 24 * time.Hour), To: t0.Add(20 * 24 * time.Hour)}}
	for name, dir := range dirs {
		for oi, opts := range optsList {
			t.Run(fmt.Sprintf("%s/opts=%d", name, oi), func(t *testing.T) {
				want, err := reduceWith(t, dir, opts, 1, false)
				require.NoError(t, err)
				for _, procs := range []int{2, 3, 7} {
					got, err := reduceWith(t, dir, opts, procs, false)
					require.NoError(t, err)
					require.Equal(t, want.Report, got.Report, "procs %d", procs)
					require.Equal(t, want.SLO, got.SLO, "procs %d", procs)
					require.Equal(t, want.Stats, got.Stats, "procs %d", procs)
				}
			})
		}
	}
}

func TestParallelStrictAndLenient(t *testing.T) {
	dir := segFixtureDir("corrupt")
	_, seqErr := reduceWith(t, dir, outcome.Options{}, 1, true)
	require.Error(t, seqErr)
	for _, procs := range []int{2, 7} {
		_, err := reduceWith(t, dir, outcome.Options{}, procs, true)
		require.Equal(t, seqErr.Error(), err.Error())
		got, err := reduceWith(t, dir, outcome.Options{}, procs, false)
		require.NoError(t, err)
		require.Len(t, got.Stats.Failed, 1)
		require.Equal(t, 1, got.Stats.Segments)
	}
}

// TestTuneGCHoldsOnlyWhileReducing: with TuneGC the reduction runs at
// tunedGCPercent and the process's pace is restored when it returns;
// without it the pace is left alone.
func TestTuneGCHoldsOnlyWhileReducing(t *testing.T) {
	const before = 123
	defer debug.SetGCPercent(debug.SetGCPercent(before))
	segs, ignored, err := segment.List(segFixtureDir("split"))
	require.NoError(t, err)
	for _, tune := range []bool{true, false} {
		var during []int
		seen := func(segment.Segment) {
			p := debug.SetGCPercent(before)
			debug.SetGCPercent(p)
			during = append(during, p)
		}
		r, err := outcome.NewReducer(outcome.Options{})
		require.NoError(t, err)
		_, err = ReduceSegments(context.Background(), segs, ignored, r, DirOptions{TuneGC: tune, OnSegment: seen})
		require.NoError(t, err)
		require.NotEmpty(t, during)
		want := before
		if tune {
			want = tunedGCPercent
		}
		for _, p := range during {
			require.Equal(t, want, p, "TuneGC %v", tune)
		}
		p := debug.SetGCPercent(before)
		require.Equal(t, before, p, "the pace is restored")
	}
}
