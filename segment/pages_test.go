package segment

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/tracegen"
)

// TestScannerNumericColumnsAcrossPagesAndFiles: numeric batch columns are
// handed out as views of the page when a batch lies in one page, and
// copied when it spans pages or has nulls. One Scanner reads files with
// one page per column chunk, many small pages, an older layout lacking
// columns and a nullable layout, in turns; every row equals what a fresh
// scanner reads, the calls as written for the current layout, and a
// column a file lacks is never written through a view of an earlier
// file's page.
func TestScannerNumericColumnsAcrossPagesAndFiles(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	gen := func(n int) []calls.Call {
		out := make([]calls.Call, n)
		for i := range out {
			tc := uint32(rng.IntN(5))
			out[i] = calls.Call{TSMillis: 1_700_000_000_000 + int64(i)*7, RunID: fmt.Sprintf("run-%d", rng.IntN(300)), HasRunID: true,
				Model: "m", Decision: []string{"allow", "killed", "cache_hit"}[rng.IntN(3)],
				InputTokens: uint64(rng.IntN(5000)), OutputTokens: uint64(rng.IntN(900)), CostMicroUSD: int64(rng.IntN(100_000)), // a negative cost fails the segment
				Step: uint32(i % 50), HasStep: rng.IntN(10) > 0, AgentID: "agent://x/a", SavedMicroUSD: int64(rng.IntN(3)),
				Outcome: []string{"", "", "", "case_resolved"}[rng.IntN(4)], KeyID: "k", Unit: "tokens", ToolCalls: &tc}
			if rng.IntN(7) == 0 {
				out[i].ToolCalls = nil
			}
		}
		return out
	}
	type file struct {
		path   string
		layout tracegen.Layout
		calls  []calls.Call
	}
	var files []file
	for i, f := range []struct {
		layout tracegen.Layout
		opts   tracegen.Options
	}{
		{tracegen.Current, tracegen.Options{RowGroupRows: 9000, PageBytes: 4 << 20}}, // one page per chunk: views
		{tracegen.Old8, tracegen.Options{RowGroupRows: 9000, PageBytes: 4 << 20}},    // lacks saved_microusd, tool_calls, ...
		{tracegen.Nullable, tracegen.Options{RowGroupRows: 5000, PageBytes: 4 << 20}},
		{tracegen.Current, tracegen.Options{RowGroupRows: 7000, PageBytes: 1000}}, // ~125 values a page: copies
	} {
		cl := gen(10_000)
		for j := range cl {
			if f.layout != tracegen.Nullable {
				cl[j].HasStep = true
			}
			if f.layout == tracegen.Current && cl[j].ToolCalls == nil {
				v := uint32(0)
				cl[j].ToolCalls = &v
			}
		}
		path := filepath.Join(dir, tracegen.SegmentName(1, uint64(i+1), uint64(i)))
		require.NoError(t, tracegen.WriteFile(path, f.layout, cl, f.opts))
		files = append(files, file{path, f.layout, cl})
	}
	want := make([][]calls.Call, len(files))
	for i, f := range files {
		require.NoError(t, Read(f.path, func(c calls.Call) error { want[i] = append(want[i], c); return nil }))
		require.Len(t, want[i], len(f.calls))
		if f.layout == tracegen.Current {
			requireSameCalls(t, f.calls, want[i], "%s as written", filepath.Base(f.path))
		}
	}

	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	sc := NewScanner(calls.AllFields, runs, syms)
	views, copies := 0, 0
	for _, k := range []int{0, 1, 2, 3, 0, 1, 3, 2} {
		f := files[k]
		var have []calls.Call
		require.NoError(t, sc.ScanFile(f.path, func(b *calls.Batch) error {
			if &b.TSMillis[0] == &sc.own.TSMillis[0] {
				copies++
			} else {
				views++
			}
			if f.layout == tracegen.Old8 {
				require.Same(t, &sc.own.SavedMicroUSD[0], &b.SavedMicroUSD[0], "an absent column is the scanner's buffer")
				require.Same(t, &sc.own.ToolCalls[0], &b.ToolCalls[0])
			}
			for i := range b.Len {
				have = append(have, b.Call(i, runs, syms))
			}
			return nil
		}))
		requireSameCalls(t, want[k], have, "%s (%s) through a shared scanner", filepath.Base(f.path), f.layout)
	}
	require.Positive(t, views, "batches inside one page are views")
	require.Positive(t, copies, "batches across pages are copies")
}

// requireSameCalls compares two call lists, reporting the first row that
// differs rather than both lists whole.
func requireSameCalls(t *testing.T, want, have []calls.Call, msg string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(msg, args...)
	require.Len(t, have, len(want), what)
	for i := range want {
		if !reflect.DeepEqual(want[i], have[i]) {
			require.Equal(t, want[i], have[i], "%s: row %d", what, i)
		}
	}
}
