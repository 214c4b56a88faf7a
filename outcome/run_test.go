package outcome

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunMergeRefusesWholly: a merge that overflows the call count
// changes nothing, even when the cost overflows too (mergeRun saturates
// the cost only for a merge that can go through).
func TestRunMergeRefusesWholly(t *testing.T) {
	a := runState{Calls: math.MaxUint32, Cost: math.MaxInt64 - 1, LastTS: 5}
	b := runState{Calls: 1, Cost: 10, LastTS: 9}
	before := a
	require.ErrorIs(t, a.Merge(&b), errTooManyCalls)
	require.Equal(t, before, a)

	r, err := NewReducer(Options{})
	require.NoError(t, err)
	id := r.runSyms.InternString("r")
	r.sync()
	r.runs[id] = a
	require.ErrorIs(t, r.mergeRun(&r.runs[id], &b, id), errTooManyCalls)
	require.Equal(t, before, r.runs[id], "the run changed by a merge refused")

	// A cost overflow alone saturates and merges.
	c := runState{Calls: 1, Cost: math.MaxInt64 - 1}
	r.runs[id] = c
	require.NoError(t, r.mergeRun(&r.runs[id], &b, id))
	require.Equal(t, uint32(2), r.runs[id].Calls)
}
