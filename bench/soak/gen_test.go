package soak

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
)

// TestGeneratorDeliversEveryCallOnceSomeLate: every generated call is
// delivered exactly once, late ones on a later day than their ts says,
// but those due after the last day, which are never delivered (the last
// day's delivery is like the others'), and the same fleet gives the same
// bytes.
func TestGeneratorDeliversEveryCallOnceSomeLate(t *testing.T) {
	fleet := Fleet{Days: 5, CallsPerDay: 4000, LateFraction: 0.05, SegmentRows: 1500,
		Start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Seed: 3}
	var beyond int64
	gen := func(root string) []Delivery {
		g, err := NewGenerator(root, fleet)
		require.NoError(t, err)
		var out []Delivery
		for {
			dl, ok, err := g.Next()
			require.NoError(t, err)
			if !ok {
				beyond = g.Beyond()
				return out
			}
			out = append(out, dl)
		}
	}
	a, b := gen(t.TempDir()), gen(t.TempDir())
	require.Len(t, a, 5)
	var rows, late, held int64
	for i, dl := range a {
		rows += dl.Rows
		late += dl.Late
		held += dl.Held
		fa, _ := os.ReadDir(dl.Dir)
		fb, _ := os.ReadDir(b[i].Dir)
		require.Equal(t, len(fa), len(fb))
		for j := range fa {
			x, err := os.ReadFile(filepath.Join(dl.Dir, fa[j].Name()))
			require.NoError(t, err)
			y, err := os.ReadFile(filepath.Join(b[i].Dir, fb[j].Name()))
			require.NoError(t, err)
			require.Equal(t, x, y, "day %d segment %d differs between two runs of one fleet", i, j)
		}
	}
	assert.EqualValues(t, 5*4000, rows+beyond, "every call delivered once, or due after the last day")
	assert.Equal(t, held, late+beyond, "every held call delivered later, or due after the last day")
	last := a[len(a)-1]
	assert.Positive(t, last.Held, "the last day's stragglers are held like any day's")
	// No pile-up of stragglers on the last day: it receives, like any
	// day after the first three, the late calls of the three days before.
	assert.Less(t, float64(last.Late), 1.5*float64(a[3].Late), "the last day's late calls (day 4's: %d)", a[3].Late)
	assert.Greater(t, late, int64(400), "about 5% late")
	assert.Zero(t, a[0].Late)

	// A late call's ts is on an earlier day than its delivery; the day's
	// own calls are within the day.
	for _, dl := range a {
		start, end := fleet.Start.AddDate(0, 0, dl.Day), fleet.Start.AddDate(0, 0, dl.Day+1)
		r, err := outcome.NewReducer(outcome.Options{From: start, To: end})
		require.NoError(t, err)
		_, err = segfold.ReduceDir(context.Background(), dl.Dir, r, segfold.DirOptions{Procs: 1})
		require.NoError(t, err)
		st := r.Stats()
		assert.Equal(t, dl.Late, st.OutsideWindow, "day %d: the late calls are exactly those before the day", dl.Day)
		assert.Equal(t, dl.Rows, st.Calls)
	}
}

func TestOptionsRefuseNonsense(t *testing.T) {
	for _, o := range []Options{{}, {Bin: "x", Days: 0, CallsPerDay: 5000}, {Bin: "x", Days: 3, CallsPerDay: 10}, {Bin: "x", Days: 3, CallsPerDay: 5000, DaySeconds: 0.1}} {
		_, err := Run(context.Background(), o)
		assert.Error(t, err, "%+v", o)
	}
	_, err := NewGenerator(t.TempDir(), Fleet{Days: 2, CallsPerDay: 10, LateFraction: 1.5})
	assert.ErrorContains(t, err, "late fraction")
}

// TestFlatMeanComparesCycles: a series that repeats a 5-day cycle is flat
// by its cycle means whatever day of the cycle a point falls on, and a
// series that grows is not.
func TestFlatMeanComparesCycles(t *testing.T) {
	var res Result
	for d := range 30 {
		cycle := int64(100 + 40*(d%5)) // 100..260, repeating
		res.Series = append(res.Series, Day{Day: d + 1, DiskBytes: cycle, RSS: int64(100 + 10*d), StateBytes: 7, SnapshotBytes: cycle})
	}
	m := res.FlatMean(9, 29, 5)
	assert.InDelta(t, 1.0, m["disk"], 1e-9)
	assert.InDelta(t, 1.0, m["snapshot"], 1e-9)
	assert.InDelta(t, 1.0, m["state"], 1e-9)
	assert.InDelta(t, 370.0/170.0, m["rss"], 1e-9, "grows")
	assert.Nil(t, res.FlatMean(2, 29, 5), "not enough days before a")
}
