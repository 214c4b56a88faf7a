package segfold

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/tracegen"
)

var segUpdate = flag.Bool("update", false, "rewrite testdata/traces fixtures and their golden reports")

func segFixtureDir(name string) string {
	return filepath.Join("..", "..", "testdata", "traces", name)
}

// segReduce replays dir and renders the cost report (text and JSON).
func segReduce(t *testing.T, dir string, opts outcome.Options) (*outcome.Reducer, DirStats, string, string) {
	t.Helper()
	r, err := outcome.NewReducer(opts)
	require.NoError(t, err)
	st, err := ReduceDir(context.Background(), dir, r, DirOptions{})
	require.NoError(t, err)
	rep := r.Report()
	// The golden files sit beside the segments: leave the ignored count
	// (checked in TestTraceFixtureIgnoresOtherFiles) out of the goldens.
	st.Ignored = 0
	var txt bytes.Buffer
	require.NoError(t, rep.WriteTable(&txt))
	fmt.Fprintf(&txt, "segments: %d read, %d rows\n", st.Segments, st.Rows)
	for _, f := range st.Failed {
		fmt.Fprintf(&txt, "skipped: %s\n", f.Reason)
	}
	js, err := json.MarshalIndent(struct {
		*outcome.Report
		Traces DirStats `json:"traces"`
	}{rep, st}, "", "  ")
	require.NoError(t, err)
	return r, st, txt.String(), string(js) + "\n"
}

func segGolden(t *testing.T, path, have string) {
	t.Helper()
	if *segUpdate {
		require.NoError(t, os.WriteFile(path, []byte(have), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./outcome/segfold -run Golden -update")
	require.Equal(t, string(want), have, "golden %s differs", path)
}

// TestTraceFixturesGolden replays every committed fixture and compares the
// report with its golden files; -update regenerates the fixtures from
// tracegen and the goldens from the reports.
func TestTraceFixturesGolden(t *testing.T) {
	for _, fx := range tracegen.Fixtures() {
		t.Run(fx.Name, func(t *testing.T) {
			dir := segFixtureDir(fx.Name)
			if *segUpdate {
				require.NoError(t, os.RemoveAll(dir))
				require.NoError(t, tracegen.WriteFixture(dir, fx))
			}
			r, _, txt, js := segReduce(t, dir, outcome.Options{})
			segGolden(t, filepath.Join(dir, "expected.txt"), txt)
			segGolden(t, filepath.Join(dir, "expected.json"), js)
			if fx.Name != "slo" {
				return
			}
			rep, err := r.SLO(outcome.DefaultSLOOptions(), envelope.ValidAgentID)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, rep.WriteTable(&buf))
			segGolden(t, filepath.Join(dir, "slo.txt"), buf.String())
			b, err := json.MarshalIndent(rep, "", "  ")
			require.NoError(t, err)
			segGolden(t, filepath.Join(dir, "slo.json"), string(b)+"\n")
		})
	}
}

// TestTraceFixturesFromGenerator checks the committed fixture segments are
// byte for byte what the committed generator writes, and small.
func TestTraceFixturesFromGenerator(t *testing.T) {
	for _, fx := range tracegen.Fixtures() {
		t.Run(fx.Name, func(t *testing.T) {
			tmp := t.TempDir()
			require.NoError(t, tracegen.WriteFixture(tmp, fx))
			for _, s := range fx.Segments {
				want, err := os.ReadFile(filepath.Join(tmp, s.Name))
				require.NoError(t, err)
				have, err := os.ReadFile(filepath.Join(segFixtureDir(fx.Name), s.Name))
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, have), "%s/%s differs from the generator's output (go test ./outcome/segfold -run Golden -update)", fx.Name, s.Name)
				require.Less(t, len(have), 100<<10)
			}
		})
	}
}

type segRow struct {
	outcome              string
	runs, calls, blocked int64
	costMicro            int64
}

// TestTraceFixtureRules asserts the hand-computed reduction of each fixture,
// independently of the goldens: each case names the rule it pins.
func TestTraceFixtureRules(t *testing.T) {
	cases := []struct {
		fixture  string
		rule     string
		want     []segRow
		resolved int64
		dropped  int64
		failed   int
	}{
		{"basic", "every call of a run folds into the run's last tag; untagged runs are kept",
			[]segRow{{"abandoned", 1, 2, 0, 120}, {"case_resolved", 2, 5, 0, 850}, {outcome.Untagged, 1, 2, 0, 30}}, 2, 0, 0},
		{"blocked", "blocked rows are counted, not costed; wardryx rows are costed",
			[]segRow{{"abandoned", 1, 10, 9, 7}, {"case_resolved", 1, 3, 1, 300}, {"escalated", 1, 2, 0, 600}}, 1, 0, 0},
		{"split", "the last tag by step wins across segments and out-of-order steps",
			[]segRow{{"case_resolved", 1, 3, 0, 18}, {"escalated", 2, 5, 0, 63}}, 1, 0, 0},
		{"nulls", "nulls read as empty/0; no step falls back to encounter order",
			[]segRow{{"case_resolved", 1, 2, 0, 150}, {"escalated", 1, 3, 0, 7}}, 1, 0, 0},
		{"old8", "an 8-column segment reads with no outcome; a later segment tags the run",
			[]segRow{{"case_resolved", 1, 3, 0, 300}, {outcome.Untagged, 1, 1, 0, 40}}, 1, 0, 0},
		{"norunid", "rows without a run_id column are independent; untagged ones dropped",
			[]segRow{{"abandoned", 1, 1, 1, 0}, {"case_resolved", 3, 3, 0, 600}}, 3, 1, 0},
		{"rowgroups", "runs span row groups and pages; other files are ignored",
			[]segRow{{"abandoned", 1, 5, 0, 15}, {"case_resolved", 2, 10, 0, 30}}, 2, 0, 0},
		{"corrupt", "a corrupt segment is skipped whole and counted",
			[]segRow{{"case_resolved", 1, 1, 0, 100}}, 1, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			r, st, _, _ := segReduce(t, segFixtureDir(tc.fixture), outcome.Options{})
			rep := r.Report()
			require.Len(t, rep.Groups, 1)
			g := rep.Groups[0]
			var have []segRow
			var total int64
			for _, o := range g.Outcomes {
				have = append(have, segRow{o.Outcome, o.Runs, o.Calls, o.BlockedCalls, o.TotalCostMicroUSD})
				total += o.TotalCostMicroUSD
			}
			require.Equal(t, tc.want, have, tc.rule)
			require.Equal(t, total, g.Overall.TotalCostMicroUSD)
			require.Equal(t, tc.resolved, g.ResolvedRuns)
			require.NotNil(t, g.CostPerResolvedUSD)
			require.InDelta(t, float64(total)/1e6/float64(tc.resolved), *g.CostPerResolvedUSD, 1e-12)
			require.Equal(t, tc.dropped, rep.Stats.DroppedUntagged)
			require.Len(t, st.Failed, tc.failed)
		})
	}
}
