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
	table := calls.NewSymbols()
	c := newInternCache(table)
	table.InternString("interned-elsewhere-7")
	long := string(make([]byte, maxCachedKey+1))
	keys := []string{"", long}
	for i := range 50_000 {
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
	require.Equal(t, 55_002, table.Len()) // "", long, 5000 + 50000 distinct
}
