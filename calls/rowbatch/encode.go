package rowbatch

import (
	"encoding/binary"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/verdryx/verdryx/calls"
)

// Builder collects rows (from scanned calls.Batch columns of interned ids)
// and encodes them as batches. Strings are resolved through the symbol
// tables given to Encode: run_id through runs, every other string through
// syms, the tables the rows were interned into. A Builder reuses its
// buffers; it is not safe for concurrent use.
type Builder struct {
	rows               []uint64
	ts, cost, saved    []int64
	in, out            []uint64
	step, tool         []uint32
	stepNull, toolNull []bool
	str                [len(stringFields)][]int32

	// The dictionary being built: for each table (0 runs, 1 syms), the
	// local index of a symbol id, valid where its stamp is gen.
	stamp [2][]uint32
	local [2][]uint32
	gen   uint32
	dict  []string
	idx   []uint32
}

// Row returns the segment row index of collected row i.
func (b *Builder) Row(i int) uint64 { return b.rows[i] }

// Len returns the rows collected.
func (b *Builder) Len() int { return len(b.rows) }

// Reset forgets the rows collected.
func (b *Builder) Reset() {
	b.rows, b.ts, b.cost, b.saved = b.rows[:0], b.ts[:0], b.cost[:0], b.saved[:0]
	b.in, b.out, b.step, b.tool = b.in[:0], b.out[:0], b.step[:0], b.tool[:0]
	b.stepNull, b.toolNull = b.stepNull[:0], b.toolNull[:0]
	for k := range b.str {
		b.str[k] = b.str[k][:0]
	}
}

// AppendRows adds rows idx[k] of src as segment rows rows[k], a column
// at a time; a column src was not filled with (nil) is taken as zero
// (null). Rows must be appended in increasing row order.
func (b *Builder) AppendRows(src *calls.Batch, idx []int32, rows []uint64) {
	b.rows = append(b.rows, rows...)
	b.ts = gather(b.ts, src.TSMillis, idx)
	b.cost = gather(b.cost, src.CostMicroUSD, idx)
	b.saved = gather(b.saved, src.SavedMicroUSD, idx)
	b.in = gather(b.in, src.InputTokens, idx)
	b.out = gather(b.out, src.OutputTokens, idx)
	b.step = gather(b.step, src.Step, idx)
	b.stepNull = gatherNull(b.stepNull, src.Step == nil, src.StepNull, idx)
	b.tool = gather(b.tool, src.ToolCalls, idx)
	b.toolNull = gatherNull(b.toolNull, src.ToolCalls == nil, src.ToolNull, idx)
	for k, f := range stringFields {
		b.str[k] = gather(b.str[k], src.Strings(f), idx)
	}
}

// gather appends col[i] for each i of idx, or zeros for a column the
// batch was not filled with (nil).
func gather[T any](dst, col []T, idx []int32) []T {
	if col == nil {
		var z T
		for range idx {
			dst = append(dst, z)
		}
		return dst
	}
	for _, i := range idx {
		dst = append(dst, col[i])
	}
	return dst
}

// gatherNull appends the null flags of rows idx: all null when the column
// is absent, else null where null says so (nil: never).
func gatherNull(dst []bool, absent bool, null []bool, idx []int32) []bool {
	if absent || null == nil {
		for range idx {
			dst = append(dst, absent)
		}
		return dst
	}
	return gather(dst, null, idx)
}

// SetDigest writes d as the segment digest of enc, a batch Encode
// returned (uncompressed), in place: a batch can be encoded before its
// segment's digest is known. It panics when enc is not such a batch.
func SetDigest(enc []byte, d [32]byte) {
	if len(enc) < digestAt+len(d) || string(enc[:len(Magic)]) != Magic || enc[len(Magic)] != Version {
		panic("rowbatch: SetDigest on bytes that are not an encoded batch")
	}
	copy(enc[digestAt:], d[:])
}

// digestAt is where an encoded batch's segment digest starts.
const digestAt = len(Magic) + 1

// Encode appends to dst the batch of the collected rows [lo, hi) with
// header h. fields names the columns the segment had (calls.AllFields, or
// without calls.FieldRunID for a segment without run ids); an absent
// column is not sent and decodes as zero (null for step and tool_calls).
func (b *Builder) Encode(dst []byte, h Header, fields calls.FieldSet, lo, hi int, runs, syms *calls.Symbols) []byte {
	n := hi - lo
	dst = append(dst, Magic...)
	dst = append(dst, Version)
	dst = append(dst, h.Digest[:]...)
	dst = appendString(dst, h.Segment)
	dst = binary.AppendUvarint(dst, uint64(h.Parts))
	dst = binary.AppendUvarint(dst, uint64(h.Part))
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, b.rows[lo])
	for i := lo + 1; i < hi; i++ {
		dst = binary.AppendUvarint(dst, b.rows[i]-b.rows[i-1])
	}
	dst = binary.AppendUvarint(dst, uint64(fields&calls.AllFields))

	// The dictionary of the strings of the present string columns.
	b.gen++
	if b.gen == 0 { // wrapped: stale stamps could match
		for t := range b.stamp {
			clear(b.stamp[t])
		}
		b.gen = 1
	}
	b.dict = b.dict[:0]
	for t, tab := range [2]*calls.Symbols{runs, syms} {
		if len(b.stamp[t]) < tab.Len() {
			b.stamp[t] = append(b.stamp[t], make([]uint32, tab.Len()-len(b.stamp[t]))...)
			b.local[t] = append(b.local[t], make([]uint32, tab.Len()-len(b.local[t]))...)
		}
	}
	b.idx = b.idx[:0]
	for k, f := range stringFields {
		if !fields.Has(f) {
			continue
		}
		t, tab := 1, syms
		if f == calls.FieldRunID {
			t, tab = 0, runs
		}
		stamp, local := b.stamp[t], b.local[t]
		for _, id := range b.str[k][lo:hi] {
			if stamp[id] != b.gen {
				stamp[id], local[id] = b.gen, uint32(len(b.dict))
				b.dict = append(b.dict, tab.Name(id))
			}
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.dict)))
	for _, s := range b.dict {
		dst = appendString(dst, s)
	}

	for f := range calls.NumFields {
		if !fields.Has(f) {
			continue
		}
		switch f {
		case calls.FieldTSMillis:
			dst = appendInts(dst, b.ts[lo:hi], true)
		case calls.FieldCostMicroUSD:
			dst = appendInts(dst, b.cost[lo:hi], false)
		case calls.FieldSavedMicroUSD:
			dst = appendInts(dst, b.saved[lo:hi], false)
		case calls.FieldInputTokens:
			dst = appendUints(dst, b.in[lo:hi], nil)
		case calls.FieldOutputTokens:
			dst = appendUints(dst, b.out[lo:hi], nil)
		case calls.FieldStep:
			dst = appendUints(dst, b.step[lo:hi], b.stepNull[lo:hi])
		case calls.FieldToolCalls:
			dst = appendUints(dst, b.tool[lo:hi], b.toolNull[lo:hi])
		default:
			k := stringIndex(f)
			t := 1
			if f == calls.FieldRunID {
				t = 0
			}
			local := b.local[t]
			ids := b.str[k][lo:hi]
			b.idx = b.idx[:0]
			for _, id := range ids {
				b.idx = append(b.idx, local[id])
			}
			dst = appendUints(dst, b.idx, nil)
		}
	}
	return dst
}

func stringIndex(f calls.Field) int {
	for k, g := range stringFields {
		if g == f {
			return k
		}
	}
	return -1
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendInts appends a signed column: one value when all are equal, else
// zigzag varints (differences from the previous value with delta).
func appendInts(dst []byte, vs []int64, delta bool) []byte {
	if allSame(vs) {
		return binary.AppendUvarint(append(dst, modeConst), zig(vs[0]))
	}
	dst = append(dst, modePlain)
	prev := int64(0)
	for _, v := range vs {
		if delta {
			dst = binary.AppendUvarint(dst, zig(v-prev))
			prev = v
		} else {
			dst = binary.AppendUvarint(dst, zig(v))
		}
	}
	return dst
}

// appendUints appends an unsigned column whose rows are null where null
// says so (nil: never).
func appendUints[T uint32 | uint64](dst []byte, vs []T, null []bool) []byte {
	nulls := 0
	for _, n := range null {
		if n {
			nulls++
		}
	}
	switch {
	case nulls == len(vs):
		return append(dst, modeNull)
	case nulls == 0 && allSame(vs):
		return binary.AppendUvarint(append(dst, modeConst), uint64(vs[0]))
	case nulls == 0:
		dst = append(dst, modePlain)
	default:
		dst = append(dst, modeSome)
		start := len(dst)
		dst = append(dst, make([]byte, (len(vs)+7)/8)...)
		for i, n := range null {
			if !n {
				dst[start+i/8] |= 1 << (i % 8)
			}
		}
	}
	for i, v := range vs {
		if null == nil || !null[i] {
			dst = binary.AppendUvarint(dst, uint64(v))
		}
	}
	return dst
}

func allSame[T comparable](vs []T) bool {
	for _, v := range vs[1:] {
		if v != vs[0] {
			return false
		}
	}
	return true
}

// Compress appends to dst the compressed form of enc, an encoded batch:
// S2 (github.com/klauspost/compress/s2, the block format NATS itself
// uses), which keeps about two thirds of a replay's bytes off the wire
// and out of the stream at about half a gigabyte per second per core.
func Compress(dst, enc []byte) []byte {
	dst = append(dst, magicS2...)
	n := len(dst)
	dst = slices.Grow(dst, s2.MaxEncodedLen(len(enc)))
	out := s2.Encode(dst[n:cap(dst)], enc)
	return dst[:n+len(out)]
}
