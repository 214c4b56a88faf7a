package partstate

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/tracegen"
)

// TestOrderKeys: segment rows by (nanos, sequence, pid) of their file
// name, then row; records by time, then identity.
func TestOrderKeys(t *testing.T) {
	name := tracegen.SegmentName(0x1f, 0x2000, 3)
	a := SegmentOrder(name, "d1", 5)
	require.Equal(t, Order{0x2000, 3, 0x1f, 5}, a)
	require.Equal(t, -1, a.Compare(SegmentOrder(name, "d1", 6)), "a later row")
	require.Equal(t, -1, a.Compare(SegmentOrder(tracegen.SegmentName(0x1f, 0x2000, 4), "d0", 0)), "a later sequence")
	require.Equal(t, -1, a.Compare(SegmentOrder(tracegen.SegmentName(0x01, 0x2001, 0), "d0", 0)), "a later segment")
	// Unparseable names: ordered by digest, deterministically.
	require.Equal(t, SegmentOrder("x.parquet", "d", 1), SegmentOrder("y.parquet", "d", 1))
	// Records: by time, then by identity.
	require.Equal(t, -1, RecordOrder(10, "k").Compare(RecordOrder(11, "a")))
	require.Equal(t, RecordOrder(10, "k"), RecordOrder(10, "k"))
	require.NotEqual(t, RecordOrder(10, "k"), RecordOrder(10, "j"))
	require.Equal(t, RecordOrder(-5, "k"), RecordOrder(0, "k"))
}
