package segment

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
)

// TestInternCacheAgreesWithTable: through growth, with keys interned into
// the table behind the cache's back, with empty and long keys, the cache
// answers what the table answers.
func TestInternCacheAgreesWithTable(t *testing.T) {
	for _, weak := range []bool{false, true} {
		t.Run(fmt.Sprintf("weak=%v", weak), func(t *testing.T) { testInternCache(t, weak) })
	}
}

func testInternCache(t *testing.T, weak bool) {
	table := calls.NewSymbols()
	c := newInternCache(table)
	n := 50_000
	if weak {
		// Every key of a length has the same hash: every comparison runs.
		c.weakHash = func(b []byte) uint64 { return uint64(len(b))<<32 | uint64(len(b)) }
		n = 1_500
	}
	table.InternString("interned-elsewhere-7")
	long := "a-key-longer-than-the-inline-bytes"
	keys := []string{"", long}
	for i := range n {
		keys = append(keys, fmt.Sprintf("interned-elsewhere-%d", i%5000), fmt.Sprintf("run-%d", i))
	}
	for round := range 2 {
		for _, k := range keys {
			want := table.InternString(k)
			require.Equal(t, want, c.lookup([]byte(k)), "round %d key %.30q", round, k)
		}
	}
	dst := make([]int32, len(keys))
	c.lookupAll(dst, len(keys), func(i int) []byte { return []byte(keys[i]) })
	for i, k := range keys {
		id, ok := table.Lookup(k)
		require.True(t, ok)
		require.Equal(t, id, dst[i])
	}
	require.Equal(t, 2+min(n, 5000)+n, table.Len()) // "", long, interned-elsewhere-*, run-*
	require.Positive(t, len(c.arena))
}

// TestInternCacheReservesForFirstDictionary: the first dictionary an empty
// cache maps makes room for itself and a quarter more at once, in the
// cache and in its table, and the ids are the table's.
func TestInternCacheReservesForFirstDictionary(t *testing.T) {
	table := calls.NewSymbols()
	table.InternString("known")
	c := newInternCache(table)
	keys := make([][]byte, 14000) // doubling alone would stop at 16384 slots, too few for 17500
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("run-%08d", i))
	}
	keys[5] = []byte("known")
	dst := make([]int32, len(keys))
	c.lookupAll(dst, len(keys), func(i int) []byte { return keys[i] })
	slots := len(c.slots)
	require.GreaterOrEqual(t, 7*slots, 8*(len(keys)+len(keys)/4), "room for the dictionary and a quarter more")
	for i, k := range keys {
		id, ok := table.Lookup(string(k))
		require.True(t, ok)
		require.Equal(t, id, dst[i])
	}
	more := make([][]byte, len(keys)/4)
	for i := range more {
		more[i] = []byte(fmt.Sprintf("run-%08d", len(keys)+i))
	}
	c.lookupAll(dst, len(more), func(i int) []byte { return more[i] })
	require.Equal(t, slots, len(c.slots), "a quarter more keys fit without growing")
}
