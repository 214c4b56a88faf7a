package partstate

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/tracegen"
)

// TestOrderKeys: segment rows by (nanos, sequence, pid) of their file
// name, then row; records by time, then identity.
func TestOrderKeys(t *testing.T) {
	name := tracegen.SegmentName(0x1f, 0x2000, 3)
	a := SegmentOrder(name, "d1", 5)
	require.Equal(t, Order{0x2000, 3, 0x1f, 5}, a)
	require.True(t, before(a, SegmentOrder(name, "d1", 6)), "a later row")
	require.True(t, before(a, SegmentOrder(tracegen.SegmentName(0x1f, 0x2000, 4), "d0", 0)), "a later sequence")
	require.True(t, before(a, SegmentOrder(tracegen.SegmentName(0x01, 0x2001, 0), "d0", 0)), "a later segment")
	require.False(t, before(SegmentOrder(name, "d1", 6), a))
	// Unparseable names: ordered by digest, deterministically.
	require.Equal(t, SegmentOrder("x.parquet", "d", 1), SegmentOrder("y.parquet", "d", 1))
	// Records: by time, then by identity.
	require.True(t, before(RecordOrder(10, "k"), RecordOrder(11, "a")))
	require.Equal(t, RecordOrder(10, "k"), RecordOrder(10, "k"))
	require.NotEqual(t, RecordOrder(10, "k"), RecordOrder(10, "j"))
	require.Equal(t, RecordOrder(-5, "k"), RecordOrder(0, "k"))
}

// before reports whether the run kernel's tie-break puts a before b: of
// two outcomes at one step, b's is kept whichever was folded first.
func before(a, b Order) bool {
	kept := func(first, second Order, v1, v2 string) string {
		var r runAgg
		r.Add(calls.ClassAllowed, 0, 1, first, v1, "", 0)
		r.Add(calls.ClassAllowed, 0, 1, second, v2, "", 0)
		return r.Outcome.Value
	}
	return kept(a, b, "a", "b") == "b" && kept(b, a, "b", "a") == "b"
}
