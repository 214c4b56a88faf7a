// Package rowbatch is the wire form of a batch of segment rows: the rows of
// one partition out of one TokenFuse segment, in a compact columnar
// encoding of the call schema's columns, so that a replay sends a few
// thousand rows per NATS message instead of one JSON record per call.
//
// Layout (version 1, specified in docs/formats.md; varints are
// encoding/binary's, strings are a uvarint length and the bytes):
//
//	"VXRB" 0x01
//	digest     32 bytes, the segment file's SHA-256
//	segment    string, the segment file's base name (orders its rows)
//	parts      uvarint, the partition count the rows were routed with
//	part       uvarint, the partition of every row
//	n          uvarint, rows (1..MaxRows)
//	rows       uvarint first row index, then n-1 uvarint gaps (each >= 1)
//	fields     uvarint, the calls.FieldSet of the columns the segment had
//	dict       uvarint count, then the strings the string columns index
//	columns    each field of fields, in schema order (see appendColumn)
//
// A column starts with a mode byte: modeConst is one value for every row,
// modePlain a value per row, modeNull (nullable columns) no value at all,
// and modeSome a null bitmap of n bits then a value per non-null row.
// Integers are zigzag varints (ts_millis as the difference from the row
// before), unsigned ones uvarints, strings their dictionary index.
//
// A batch may travel compressed (Compress): "VXRZ" and the S2 block of the
// encoding above. Decode reads both forms.
//
// Decode never panics and never allocates more than a small multiple of
// its input, or maxDecoded for a compressed batch (fuzzed by FuzzDecode).
package rowbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/wire"
)

// Magic starts every encoded batch; the byte after it is Version.
const (
	Magic   = "VXRB"
	Version = 1
)

// magicS2 starts a compressed batch: the S2 block of an encoded batch
// follows it.
const magicS2 = "VXRZ"

// maxDecoded bounds a compressed batch's decoded size (a replay's batches
// are about 512 KiB before compression).
const maxDecoded = 8 << 20

// MaxRows is the most rows one batch may hold.
const MaxRows = 1 << 16

// maxSegmentName bounds the segment name a batch carries.
const maxSegmentName = 1024

// Column modes.
const (
	modeConst byte = iota
	modePlain
	modeNull
	modeSome
)

// stringFields are the string columns, in schema order.
var stringFields = [...]calls.Field{calls.FieldRunID, calls.FieldModel, calls.FieldDecision, calls.FieldAgentID,
	calls.FieldParentRunID, calls.FieldOnBehalfOf, calls.FieldOutcome, calls.FieldKeyID, calls.FieldUnit}

// Header identifies a batch: the segment its rows come from and the
// partition they were routed to.
type Header struct {
	Digest  [32]byte // SHA-256 of the segment file
	Segment string   // the segment file's base name
	Parts   int      // partition count of the routing
	Part    int      // partition of every row
}

// Batch is a decoded batch: its header, the segment row index of each row
// (strictly increasing) and each row as a call. Fields names the columns
// the segment had; a call's absent columns are zero (HasRunID and HasStep
// false when run_id or step is absent).
type Batch struct {
	Header
	Fields calls.FieldSet
	Rows   []uint64
	Calls  []calls.Call
	// Intern, when set, is called once per distinct non-empty string of
	// the string columns other than run_id (outcomes, agents, decisions,
	// ...) and the calls get what it returns: a caller that keeps those
	// strings interns them once per batch instead of once per row.
	Intern   func(string) string
	buf      []byte   // a compressed batch's decoded bytes, reused
	interned []string // Intern's answers by dictionary index ("": not asked)
	vals     []uint64 // a column's values, reused
	present  []bool   // a nullable column's rows with a value, reused
	// written is the columns decoded into Calls' backing array since it
	// was last zeroed: only those can hold a value of an earlier batch.
	written calls.FieldSet
}

// IsBatch reports whether b starts like an encoded batch (a JSON record
// never does).
func IsBatch(b []byte) bool {
	return bytes.HasPrefix(b, []byte(Magic)) || bytes.HasPrefix(b, []byte(magicS2))
}

// ErrFormat marks a malformed batch; test with errors.Is.
var ErrFormat = errors.New("malformed row batch")

// Decode reads an encoded batch into into, reusing its slices. The calls'
// strings are substrings of one copy of the batch's dictionary: a caller
// that keeps a string of a call long keeps that copy alive (copy or
// intern what you keep).
func Decode(b []byte, into *Batch) error {
	if bytes.HasPrefix(b, []byte(magicS2)) {
		n, err := s2.DecodedLen(b[len(magicS2):])
		if err == nil && n > maxDecoded {
			err = fmt.Errorf("%d bytes decoded, at most %d", n, maxDecoded)
		}
		if err == nil {
			into.buf, err = s2.Decode(into.buf[:cap(into.buf)], b[len(magicS2):])
		}
		if err != nil {
			return fmt.Errorf("%w: compressed: %w", ErrFormat, err)
		}
		if !bytes.HasPrefix(into.buf, []byte(Magic)) {
			return fmt.Errorf("%w: compressed: format %q inside, this build reads %q", ErrFormat, into.buf[:min(len(into.buf), len(Magic))], Magic)
		}
		b = into.buf
	}
	if !bytes.HasPrefix(b, []byte(Magic)) {
		return fmt.Errorf("%w: format %q, this build reads %q or %q", ErrFormat, b[:min(len(b), len(Magic))], Magic, magicS2)
	}
	if len(b) < len(Magic)+1 {
		return fmt.Errorf("%w: no version byte after %q", ErrFormat, Magic)
	}
	if v := b[len(Magic)]; v != Version {
		return fmt.Errorf("%w: version %d, this build reads %d", ErrFormat, v, Version)
	}
	d := dec{wire.Reader{B: b[len(Magic)+1:]}}
	if len(d.B) < 32 {
		return fmt.Errorf("%w: truncated digest", ErrFormat)
	}
	copy(into.Digest[:], d.B[:32])
	d.B = d.B[32:]
	name := d.Bytes(maxSegmentName)
	into.Segment = string(name)
	parts, part := d.Uvarint(), d.Uvarint()
	if d.Err == nil && (parts == 0 || parts > 1<<16 || part >= parts) {
		d.Fail("partition %d of %d", part, parts)
	}
	into.Parts, into.Part = int(parts), int(part)
	n := d.Uvarint()
	if d.Err == nil && (n == 0 || n > MaxRows || n > uint64(len(d.B))) {
		d.Fail("%d rows", n)
	}
	if d.Err != nil {
		return d.wrap("header")
	}
	rows := grow(into.Rows, int(n))
	row := d.Uvarint()
	rows[0] = row
	for i := 1; i < int(n) && d.Err == nil; i++ {
		gap := d.Uvarint()
		if gap == 0 || row+gap < row {
			d.Fail("row %d: gap %d", i, gap)
		}
		row += gap
		rows[i] = row
	}
	into.Rows = rows
	fields := calls.FieldSet(d.Uvarint())
	if d.Err == nil && fields&^calls.AllFields != 0 {
		d.Fail("fields %#x", uint32(fields))
	}
	into.Fields = fields
	if d.Err != nil {
		return d.wrap("rows")
	}
	nd := d.Uvarint()
	if d.Err == nil && nd > uint64(len(d.B)) {
		d.Fail("%d dictionary strings", nd)
	}
	// The dictionary is copied into one string, its entries substrings of
	// it: one allocation per batch, not one per string.
	region := d.B
	spans := make([][2]int, 0, int(min(nd, uint64(len(d.B)))))
	for i := uint64(0); i < nd && d.Err == nil; i++ {
		v := d.Bytes(uint64(len(d.B)))
		off := len(region) - len(d.B) - len(v)
		spans = append(spans, [2]int{off, off + len(v)})
	}
	if d.Err != nil {
		return d.wrap("dictionary")
	}
	all := string(region[:len(region)-len(d.B)])
	dict := make([]string, len(spans))
	for i, sp := range spans {
		dict[i] = all[sp[0]:sp[1]]
	}
	if into.Intern != nil {
		into.interned = grow(into.interned, len(dict))
		clear(into.interned)
	}
	// Every row of a column of fields is written below (nulls too): the
	// calls are zeroed only when an earlier batch wrote another column.
	cs := into.Calls[:cap(into.Calls)]
	if len(cs) < int(n) {
		cs, into.written = make([]calls.Call, n), 0
	} else if into.written&^fields != 0 {
		clear(cs)
		into.written = 0
	}
	cs = cs[:n]
	into.written |= fields
	hasRun, hasStep := fields.Has(calls.FieldRunID), fields.Has(calls.FieldStep)
	for i := range cs {
		cs[i].HasRunID, cs[i].HasStep = hasRun, hasStep
	}
	into.Calls = cs
	for f := range calls.NumFields {
		if !fields.Has(f) {
			continue
		}
		d.column(f, cs, dict, into)
		if d.Err != nil {
			return d.wrap("column " + f.Name())
		}
	}
	if len(d.B) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrFormat, len(d.B))
	}
	return nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// column decodes field f of every call (its strings through into.Intern
// when set, but for run_id): the column's values first, into a reused
// array, then each field by a loop of its own.
func (d *dec) column(f calls.Field, cs []calls.Call, dict []string, into *Batch) {
	mode := d.Byte()
	if d.Err != nil {
		return
	}
	nullable := f == calls.FieldStep || f == calls.FieldToolCalls
	var present []bool // nil: every row
	switch mode {
	case modeConst, modePlain:
	case modeNull, modeSome:
		if !nullable {
			d.Fail("mode %d on a column that is never null", mode)
			return
		}
		present = grow(into.present, len(cs))
		into.present = present
		clear(present)
		if mode == modeSome {
			nb := (len(cs) + 7) / 8
			if len(d.B) < nb {
				d.Fail("truncated null bitmap")
				return
			}
			for i := range cs {
				present[i] = d.B[i/8]&(1<<(i%8)) != 0
			}
			d.B = d.B[nb:]
		}
	default:
		d.Fail("mode %d", mode)
		return
	}
	vals := grow(into.vals, len(cs))
	into.vals = vals
	switch mode {
	case modeConst:
		v := d.Uvarint()
		for i := range vals {
			vals[i] = v
		}
	case modePlain:
		d.uvarints(vals)
	case modeSome:
		for i := range vals {
			vals[i] = 0
			if present[i] {
				vals[i] = d.Uvarint()
			}
		}
	case modeNull:
		clear(vals)
	}
	if d.Err != nil {
		return
	}
	switch f {
	case calls.FieldTSMillis:
		if mode == modeConst {
			for i := range cs {
				cs[i].TSMillis = unzig(vals[i])
			}
			return
		}
		var prev int64
		for i := range cs {
			prev += unzig(vals[i])
			cs[i].TSMillis = prev
		}
	case calls.FieldCostMicroUSD:
		for i := range cs {
			cs[i].CostMicroUSD = unzig(vals[i])
		}
	case calls.FieldSavedMicroUSD:
		for i := range cs {
			cs[i].SavedMicroUSD = unzig(vals[i])
		}
	case calls.FieldInputTokens:
		for i := range cs {
			cs[i].InputTokens = vals[i]
		}
	case calls.FieldOutputTokens:
		for i := range cs {
			cs[i].OutputTokens = vals[i]
		}
	case calls.FieldStep:
		for i := range cs {
			if present != nil && !present[i] {
				cs[i].HasStep, cs[i].Step = false, 0
				continue
			}
			if vals[i] > 1<<32-1 {
				d.Fail("row %d: step %d overflows uint32", i, vals[i])
				return
			}
			cs[i].Step = uint32(vals[i])
		}
	case calls.FieldToolCalls:
		for i := range cs {
			if present != nil && !present[i] {
				cs[i].ToolCalls = nil
				continue
			}
			if vals[i] > 1<<32-1 {
				d.Fail("row %d: tool_calls %d overflows uint32", i, vals[i])
				return
			}
			v := uint32(vals[i])
			cs[i].ToolCalls = &v
		}
	default:
		for i, v := range vals {
			if v >= uint64(len(dict)) {
				d.Fail("row %d: string %d of a dictionary of %d", i, v, len(dict))
				return
			}
		}
		if f == calls.FieldRunID {
			for i := range cs {
				cs[i].RunID = dict[vals[i]]
			}
			return
		}
		strs := dict
		if into.Intern != nil {
			// Interned once per distinct string of the column.
			for _, v := range vals {
				if into.interned[v] == "" && dict[v] != "" {
					into.interned[v] = into.Intern(dict[v])
				}
			}
			strs = into.interned
		}
		switch f {
		case calls.FieldDecision:
			for i := range cs {
				cs[i].Decision = strs[vals[i]]
			}
		case calls.FieldAgentID:
			for i := range cs {
				cs[i].AgentID = strs[vals[i]]
			}
		case calls.FieldOutcome:
			for i := range cs {
				cs[i].Outcome = strs[vals[i]]
			}
		default:
			for i := range cs {
				*stringField(&cs[i], f) = strs[vals[i]]
			}
		}
	}
}

// uvarints decodes len(vals) uvarints into vals, one and two bytes
// without the general loop.
func (d *dec) uvarints(vals []uint64) {
	if d.Err != nil {
		return
	}
	b := d.B
	for i := range vals {
		if len(b) >= 2 {
			if b0 := b[0]; b0 < 0x80 {
				vals[i], b = uint64(b0), b[1:]
				continue
			} else if b1 := b[1]; b1 < 0x80 {
				vals[i], b = uint64(b0&0x7f)|uint64(b1)<<7, b[2:]
				continue
			}
		}
		v, n := binary.Uvarint(b)
		if n <= 0 {
			d.B = b
			d.Fail("truncated or malformed varint")
			return
		}
		vals[i], b = v, b[n:]
	}
	d.B = b
}

// stringField returns the string field f of c.
func stringField(c *calls.Call, f calls.Field) *string {
	switch f {
	case calls.FieldRunID:
		return &c.RunID
	case calls.FieldModel:
		return &c.Model
	case calls.FieldDecision:
		return &c.Decision
	case calls.FieldAgentID:
		return &c.AgentID
	case calls.FieldParentRunID:
		return &c.ParentRunID
	case calls.FieldOnBehalfOf:
		return &c.OnBehalfOf
	case calls.FieldOutcome:
		return &c.Outcome
	case calls.FieldKeyID:
		return &c.KeyID
	case calls.FieldUnit:
		return &c.Unit
	}
	panic(fmt.Sprintf("rowbatch: %s is not a string field", f.Name()))
}

func zig(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzig(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// dec reads what the encoder wrote; the first error sticks.
type dec struct{ wire.Reader }

func (d *dec) wrap(where string) error { return fmt.Errorf("%w: %s: %v", ErrFormat, where, d.Err) }
