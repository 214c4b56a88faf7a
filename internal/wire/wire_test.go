package wire

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReaderRoundTrip: values written by encoding/binary read back, the
// one- and two-byte fast path included, and the first error sticks.
func TestReaderRoundTrip(t *testing.T) {
	var b []byte
	us := []uint64{0, 1, 127, 128, 300, 16383, 16384, 1 << 40, math.MaxUint64}
	for _, u := range us {
		b = binary.AppendUvarint(b, u)
	}
	is := []int64{0, -1, 1, math.MinInt64, math.MaxInt64}
	for _, i := range is {
		b = binary.AppendVarint(b, i)
	}
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = append(b, 7)
	r := Reader{B: b}
	for _, u := range us {
		require.Equal(t, u, r.Uvarint())
	}
	for _, i := range is {
		require.Equal(t, i, r.Varint())
	}
	require.Equal(t, "abc", string(r.Bytes(3)))
	require.Equal(t, byte(7), r.Byte())
	require.NoError(t, r.Err)
	require.Empty(t, r.B)

	require.Zero(t, r.Byte())
	require.ErrorContains(t, r.Err, "truncated")
	r = Reader{B: []byte{0x80}}
	require.Zero(t, r.Uvarint())
	require.ErrorIs(t, r.Err, errVarint)
	require.Zero(t, r.Uvarint(), "the first error sticks")

	r = Reader{B: []byte{5, 'a'}}
	require.Nil(t, r.Bytes(10))
	require.ErrorContains(t, r.Err, "a length of 5 past the end")
	r = Reader{B: []byte{2, 'a', 'b'}}
	require.Nil(t, r.Bytes(1))
	require.ErrorContains(t, r.Err, "over 1")
}

func TestAddInt64(t *testing.T) {
	s, ok := AddInt64(math.MaxInt64-1, 1)
	require.True(t, ok)
	require.Equal(t, int64(math.MaxInt64), s)
	_, ok = AddInt64(math.MaxInt64, 1)
	require.False(t, ok)
	_, ok = AddInt64(math.MinInt64, -1)
	require.False(t, ok)
	s, ok = AddInt64(-5, 3)
	require.True(t, ok)
	require.Equal(t, int64(-2), s)
}
