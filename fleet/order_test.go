package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracegen"
)

// splitDirs writes runs whose calls are spread over three segments (as
// two gateway processes writing one run would), with many calls of a run
// at one step carrying different outcomes and agents: the first and last
// segments in dirA, the middle one in dirB, all three in union. want is
// the direct reduction of union.
func splitDirs(t *testing.T) (dirA, dirB string, want []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	segs := make([][]calls.Call, 3)
	outcomes := []string{"", "case_resolved", "escalated", "abandoned"}
	for run := range 300 {
		for i := range 8 {
			c := calls.Call{TSMillis: int64(1_000_000 + run*10 + i), RunID: fmt.Sprintf("run-%03d", run), HasRunID: true,
				Step: uint32(rng.IntN(3)), HasStep: true, Decision: "allow", CostMicroUSD: int64(rng.IntN(500)), Model: "m",
				Outcome: outcomes[rng.IntN(len(outcomes))], AgentID: fmt.Sprintf("agent://x/%d", rng.IntN(4))}
			s := rng.IntN(3)
			segs[s] = append(segs[s], c)
		}
	}
	dirA, dirB, union := t.TempDir(), t.TempDir(), t.TempDir()
	for i, cl := range segs {
		name := tracegen.SegmentName(0x42, uint64(1_700_000_000_000_000_000+i*1_000_000), uint64(i))
		dst := dirA
		if i == 1 {
			dst = dirB
		}
		for _, d := range []string{dst, union} {
			require.NoError(t, tracegen.WriteFile(filepath.Join(d, name), tracegen.Current, cl, tracegen.Options{}))
		}
	}
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	_, err = segfold.ReduceDir(context.Background(), union, r, segfold.DirOptions{})
	require.NoError(t, err)
	return dirA, dirB, calltest.ReportJSON(t, r)
}

// TestSplitReplayGivesTheReportOfTheUnion: a directory split in two,
// replayed as two replays in either order, gives the report of one
// reduction of both: ties at one step go by the records' own order
// (segment, row), never by arrival.
func TestSplitReplayGivesTheReportOfTheUnion(t *testing.T) {
	dirA, dirB, want := splitDirs(t)
	for _, order := range [][]string{{dirA, dirB}, {dirB, dirA}} {
		t.Run(filepath.Base(order[0]), func(t *testing.T) {
			e := newEnv(t)
			ctx := jstest.Ctx(t, 60*time.Second)
			for _, d := range order {
				_, err := segpub.Publish(ctx, e.JS, e.Subjects.Traces, d, segpub.Options{})
				require.NoError(t, err)
			}
			w := startFleet(t, e.JS, e.Subjects, "split", Options{})
			waitFleetDrained(t, e.JS, e.Subjects, 30*time.Second)
			require.JSONEq(t, string(want), string(mergedJSON(t, e.JS, e.Subjects)))
			w.stop(t)
		})
	}
}
