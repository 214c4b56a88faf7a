package calls

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSymbolsAgreeWithAMap: through growth and chunk changes, with empty,
// long and binary strings interned from bytes and from strings, every id
// names its string, equal strings get one id, and a caller's bytes changed
// after Intern do not change what was interned.
func TestSymbolsAgreeWithAMap(t *testing.T) {
	s := NewSymbols()
	require.Equal(t, 1, s.Len())
	require.Equal(t, "", s.Name(0))
	want := map[string]int32{"": 0}
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 0, 64<<10)
	for i := range 200_000 {
		var v string
		switch rng.IntN(6) {
		case 0:
			v = fmt.Sprintf("run-%d", rng.IntN(50_000)) // repeats
		case 1:
			v = strings.Repeat("x", rng.IntN(40_000)) // long, past a chunk
		case 2:
			b := make([]byte, rng.IntN(20))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
			v = string(b)
		default:
			v = fmt.Sprintf("agent://acme.example/bot-%d-%d", i, rng.IntN(3))
		}
		var id int32
		if rng.IntN(2) == 0 {
			buf = append(buf[:0], v...)
			id = s.Intern(buf)
			for j := range buf {
				buf[j] = '!' // the caller reuses its buffer
			}
		} else {
			id = s.InternString(v)
		}
		if old, ok := want[v]; ok {
			require.Equal(t, old, id, "%.30q interned twice", v)
		} else {
			require.Equal(t, int32(len(want)), id, "ids are dense")
			want[v] = id
		}
	}
	require.Equal(t, len(want), s.Len())
	for v, id := range want {
		require.Equal(t, v, s.Name(id))
		got, ok := s.Lookup(v)
		require.True(t, ok)
		require.Equal(t, id, got)
	}
	_, ok := s.Lookup("never interned")
	require.False(t, ok)
}

func BenchmarkSymbolsIntern(b *testing.B) {
	keys := make([][]byte, 100_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "run-%08d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := NewSymbols()
		for _, k := range keys {
			s.Intern(k)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/new")
}

// TestSymbolsReserve: after Reserve(n) the next n new strings are interned
// without a resize, and every id issued before and after still answers.
func TestSymbolsReserve(t *testing.T) {
	s := NewSymbols()
	for i := range 100 {
		s.InternString(fmt.Sprintf("before-%d", i))
	}
	s.Reserve(5000)
	names := cap(s.names)
	s.Intern([]byte("after-0")) // the index is resized here, once
	slots := len(s.slots)
	require.GreaterOrEqual(t, 3*slots, 4*5101, "room for the reservation")
	for i := range 5000 {
		s.Intern([]byte(fmt.Sprintf("after-%d", i)))
	}
	require.Equal(t, slots, len(s.slots), "no resize within the reservation")
	require.Equal(t, names, cap(s.names), "no growth of the names within the reservation")
	for i := range 100 {
		id, ok := s.Lookup(fmt.Sprintf("before-%d", i))
		require.True(t, ok)
		require.Equal(t, int32(i+1), id)
	}
	for i := range 5000 {
		id, ok := s.Lookup(fmt.Sprintf("after-%d", i))
		require.True(t, ok)
		require.Equal(t, fmt.Sprintf("after-%d", i), s.Name(id))
	}
	s.Reserve(0) // nothing to do
	require.Equal(t, slots, len(s.slots))
}

// TestSymbolsAppendNew: strings added by AppendNew, among strings interned
// and reservations, through growth, get dense ids, and Lookup, Intern and
// InternString find them afterwards (the index catches up then).
func TestSymbolsAppendNew(t *testing.T) {
	s := NewSymbols()
	want := map[string]int32{"": 0}
	add := func(v string, id int32) {
		t.Helper()
		require.Equal(t, int32(len(want)), id, "ids are dense")
		want[v] = id
	}
	s.Reserve(300)
	for i := range 3000 {
		v := fmt.Sprintf("run-%08d", i)
		switch i % 7 {
		case 0, 1, 2, 3:
			b := []byte(v)
			add(v, s.AppendNew(b))
			b[0] = '!' // not retained
		case 4:
			add(v, s.Intern([]byte(v)))
			old := fmt.Sprintf("run-%08d", i-2) // appended: found, not added
			require.Equal(t, want[old], s.Intern([]byte(old)))
		case 5:
			add(v, s.InternString(v))
		case 6:
			s.Reserve(i)
			add(v, s.AppendNew([]byte(v)))
		}
	}
	require.Equal(t, len(want), s.Len())
	for v, id := range want {
		require.Equal(t, v, s.Name(id))
		got, ok := s.Lookup(v)
		require.True(t, ok, v)
		require.Equal(t, id, got)
		require.Equal(t, id, s.InternString(v))
	}
	require.Equal(t, len(want), s.Len(), "nothing interned twice")
}
