package partstate

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRowSetMergesAndAnswers(t *testing.T) {
	var r rowSet
	r = r.add(10, 19)
	r = r.add(30, 39)
	require.Len(t, r, 2)
	require.True(t, r.Has(10) && r.Has(19) && r.Has(35))
	require.False(t, r.Has(9) || r.Has(20) || r.Has(29) || r.Has(40))
	require.True(t, r.Covers(12, 18))
	require.False(t, r.Covers(15, 35), "a gap in between")
	r = r.add(20, 29) // touches both: one span
	require.Equal(t, rowSet{{10, 39}}, r)
	r = r.add(0, 3).add(5, 5).add(4, 4)
	require.Equal(t, rowSet{{0, 5}, {10, 39}}, r)
	r = r.add(^uint64(0)-1, ^uint64(0))
	require.True(t, r.Has(^uint64(0)))
	before := append(rowSet{}, r...)
	_ = r.add(6, 9)
	require.Equal(t, before, r, "add does not change its receiver")

	got, err := decodeRowSet(r.encode(nil))
	require.NoError(t, err)
	require.Equal(t, r, got)
	for _, bad := range [][]byte{nil, {9}, {rowSetVersion, 2, 0, 1}, append(r.encode(nil), 0),
		{rowSetVersion, 2, 0, 1, 1, 1}} { // the second span touches the first
		_, err := decodeRowSet(bad)
		require.Error(t, err, "%x", bad)
	}
}
