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
		c = newHashedCache(table, func(b []byte) uint64 { return uint64(len(b))<<32 | uint64(len(b)) })
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
	lookupKeys(c, dst, keys)
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
	lookupKeys(c, dst, keys)
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
	lookupKeys(c, dst, more)
	require.Equal(t, slots, len(c.slots), "a quarter more keys fit without growing")
}

// lookupKeys maps keys through c.lookupAll, laid out back to back as in a
// dictionary page.
func lookupKeys[K string | []byte](c *internCache, dst []int32, keys []K) {
	data, bound := pageOf(keys)
	c.lookupAll(dst, data, bound)
}

// pageOf lays keys out back to back and returns their bounds.
func pageOf[K string | []byte](keys []K) ([]byte, []uint32) {
	var data []byte
	var bound []uint32
	for _, k := range keys {
		bound = append(bound, uint32(len(data)), uint32(len(data)+len(k)))
		data = append(data, k...)
	}
	return data, bound
}

// TestInternCacheAppendsOnlyWhatIsNew: a cache that holds every string of
// its table adds misses to it without the table's lookup; once strings
// are interned behind its back, it asks the table again. Either way the
// table ends up with each string once, every id the cache gave its own.
func TestInternCacheAppendsOnlyWhatIsNew(t *testing.T) {
	table := calls.NewSymbols()
	c := newInternCache(table)
	var keys []string
	for i := range 2000 {
		keys = append(keys, fmt.Sprintf("run-%08d", i), fmt.Sprintf("agent://fleet.example/bot-%d", i))
	}
	dst := make([]int32, len(keys))
	lookupKeys(c, dst, keys[:1000])
	require.Equal(t, c.used, table.Len(), "complete: every miss was new")
	table.InternString(keys[1500]) // behind the cache's back
	table.InternString("elsewhere")
	lookupKeys(c, dst, keys)
	lookupKeys(c, dst, keys) // all hits
	require.Equal(t, len(keys)+2, table.Len(), `"", the keys and "elsewhere", once each`)
	for i, k := range keys {
		id, ok := table.Lookup(k)
		require.True(t, ok)
		require.Equal(t, id, dst[i], k)
		require.Equal(t, k, table.Name(id))
	}
}

// TestShortHashSeesEveryByte: for keys of 0 to 16 bytes, changing any one
// byte, or the length, changes the hash, and the high half (the slot tag)
// is spread.
func TestShortHashSeesEveryByte(t *testing.T) {
	k0, k1 := uint64(0x9e3779b97f4a7c15), uint64(0xbf58476d1ce4e5b9)
	seen := map[uint64]string{}
	tags := map[uint32]bool{}
	for n := range inlineKey + 1 {
		base := []byte("0123456789abcdef"[:n])
		for pos := -1; pos < n; pos++ {
			for _, v := range []byte{0, 'x', 0xff} {
				b := append([]byte(nil), base...)
				if pos >= 0 {
					b[pos] = v
				}
				h := shortHash(k0, k1, b)
				if old, ok := seen[h]; ok && old != string(b) {
					t.Fatalf("%q and %q hash alike", old, b)
				}
				seen[h] = string(b)
				tags[uint32(h>>32)] = true
			}
		}
	}
	require.Equal(t, len(seen), len(tags), "distinct keys, distinct tags")
}

// TestScannerInternsAnotherTablesRuns: InternRunIDs maps every string of
// another table (more than one chunk of them) to the id the scanner's run
// table has for it, adding the new ones once, whether the scanner's index
// holds its whole table or strings were interned behind its back; a
// scanner without the run_id field interns through the table.
func TestScannerInternsAnotherTablesRuns(t *testing.T) {
	for _, fields := range []calls.FieldSet{calls.Fields(calls.FieldRunID, calls.FieldCostMicroUSD), calls.Fields(calls.FieldCostMicroUSD)} {
		runs := calls.NewSymbols()
		sc := NewScanner(fields, runs, calls.NewSymbols())
		from := calls.NewSymbols()
		for i := range 10_000 {
			from.InternString(fmt.Sprintf("run-%08d", (i*7919)%10_000))
		}
		from.InternString("a run id longer than sixteen bytes")
		ids := make([]int32, from.Len())
		sc.InternRunIDs(ids, from)
		check := func() {
			t.Helper()
			for i, id := range ids {
				require.Equal(t, from.Name(int32(i)), runs.Name(id), "string %d", i)
			}
		}
		check()
		require.Equal(t, from.Len(), runs.Len(), "each string once")

		runs.InternString("behind the index's back")
		from.InternString("behind the index's back")
		from.InternString("new to both")
		ids = make([]int32, from.Len())
		sc.InternRunIDs(ids, from)
		check()
		require.Equal(t, from.Len(), runs.Len(), "each string once")
	}
}
