// Package wire holds what verdryx's binary formats share (docs/formats.md):
// a varint reader that keeps its first error, and checked int64 addition.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Reader reads the varint encodings of encoding/binary from B, keeping
// the first error in Err: after one, every read returns zero. It is not
// safe for concurrent use.
type Reader struct {
	B   []byte
	Err error
}

// Fail sets Err unless it is already set.
func (r *Reader) Fail(format string, args ...any) {
	if r.Err == nil {
		r.Err = fmt.Errorf(format, args...)
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil {
		return 0
	}
	if len(r.B) == 0 {
		r.Fail("truncated")
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// errVarint is Err after a varint that is truncated or longer than ten
// bytes.
var errVarint = errors.New("truncated or malformed varint")

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	// One or two bytes (most values, dictionary indexes of a few
	// thousand strings included) without the general loop.
	if len(r.B) >= 2 && r.Err == nil {
		if b0 := r.B[0]; b0 < 0x80 {
			r.B = r.B[1:]
			return uint64(b0)
		} else if b1 := r.B[1]; b1 < 0x80 {
			r.B = r.B[2:]
			return uint64(b0&0x7f) | uint64(b1)<<7
		}
	}
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Err = errVarint
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed (zig-zag) varint.
func (r *Reader) Varint() int64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Err = errVarint
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Bytes reads a uvarint length and that many bytes, at most limit; the
// result aliases B.
func (r *Reader) Bytes(limit uint64) []byte {
	n := r.Uvarint()
	if r.Err != nil {
		return nil
	}
	switch {
	case n > uint64(len(r.B)):
		r.Fail("a length of %d past the end", n)
		return nil
	case n > limit:
		r.Fail("a length of %d, over %d", n, limit)
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// AddInt64 returns a+b and whether it did not overflow.
func AddInt64(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}
