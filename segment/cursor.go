package segment

import (
	"errors"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/hugepage"
	"io"

	"github.com/parquet-go/parquet-go"
)

// cursor walks the pages of one column chunk, handing out values in runs of
// rows that may span pages.
type cursor struct {
	field  calls.Field
	kind   parquet.Kind
	index  int  // leaf column index in the file, -1 when absent
	maxDef byte // definition level of a present value
	table  *calls.Symbols
	cache  *internCache // in front of table
	huge   bool         // ask for huge pages for large buffers (Scanner.UseHugePages)
	nulls  []bool       // batch null flags (step, tool_calls)
	skip   bool         // a check column whose chunk was verified whole (checkChunk)

	pages parquet.Pages
	page  parquet.Page
	done  bool

	n    int    // rows in the current page
	pos  int    // next row of the page
	vpos int    // next non-null value of the page
	def  []byte // definition levels, nil when the page has no nulls

	i64   []int64
	i32   []int32 // INT32 values or dictionary indexes
	data  []byte  // plain BYTE_ARRAY values
	offs  []uint32
	byDic bool

	dict    parquet.Dictionary
	dictMap []int32    // dictionary index -> symbol id
	bound   []uint32   // a parquet-go dictionary's entry bounds (see mapEntries)
	chunk   *dictChunk // the fast path's buffers, nil until first used
	i64buf  []int64    // values of a dictionary-encoded INT64 page
	i32buf  []int32    // values of a dictionary-encoded INT32 page
}

func (c *cursor) open(p parquet.Pages) {
	c.pages = p
	c.page = nil
	c.done = false
	c.n, c.pos, c.vpos = 0, 0, 0
	c.dict = nil
}

func (c *cursor) close() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	if c.pages != nil {
		c.pages.Close()
		c.pages = nil
	}
}

// hasMore reports whether the chunk holds rows past those consumed.
func (c *cursor) hasMore() bool {
	if c.pos < c.n {
		return true
	}
	for !c.done {
		if err := c.next(); err != nil {
			return false
		}
		if c.n > 0 {
			return true
		}
	}
	return false
}

// next loads the next page of the chunk.
func (c *cursor) next() error {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	p, err := c.pages.ReadPage()
	if err != nil {
		if errors.Is(err, io.EOF) {
			c.done = true
			return io.ErrUnexpectedEOF
		}
		return err
	}
	c.page = p
	c.n = int(p.NumRows())
	c.pos, c.vpos = 0, 0
	c.def = nil
	nonNull := c.n
	if p.NumNulls() > 0 {
		c.def = p.DefinitionLevels()
		if len(c.def) < c.n {
			return fmt.Errorf("page has %d definition levels for %d rows", len(c.def), c.n)
		}
		nonNull = 0
		for _, d := range c.def[:c.n] {
			if d == c.maxDef {
				nonNull++
			}
		}
	}
	data := p.Data()
	have := 0
	dict := p.Dictionary()
	if dict != nil {
		// A dictionary-encoded page (arrow-rs encodes every column so by
		// default, integers included): Data holds indexes.
		idx := data.Int32()
		have = len(idx)
		switch c.kind {
		case parquet.ByteArray:
			c.i32 = idx
			c.byDic = true
			if dict != c.dict {
				if err := c.mapDictionary(dict); err != nil {
					return err
				}
			}
		case parquet.Int64:
			dv := dict.Page().Data()
			vals := dv.Int64()
			c.i64buf = c.i64buf[:0]
			for _, ix := range idx {
				if uint32(ix) >= uint32(len(vals)) {
					return fmt.Errorf("dictionary index %d out of range [0,%d)", ix, len(vals))
				}
				c.i64buf = append(c.i64buf, vals[ix])
			}
			c.i64 = c.i64buf
		case parquet.Int32:
			dv := dict.Page().Data()
			vals := dv.Int32()
			c.i32buf = c.i32buf[:0]
			for _, ix := range idx {
				if uint32(ix) >= uint32(len(vals)) {
					return fmt.Errorf("dictionary index %d out of range [0,%d)", ix, len(vals))
				}
				c.i32buf = append(c.i32buf, vals[ix])
			}
			c.i32 = c.i32buf
		}
	} else {
		switch c.kind {
		case parquet.Int64:
			c.i64 = data.Int64()
			have = len(c.i64)
		case parquet.Int32:
			c.i32 = data.Int32()
			have = len(c.i32)
		case parquet.ByteArray:
			c.data, c.offs = data.ByteArray()
			have = len(c.offs) - 1
			c.byDic = false
		}
	}
	if have < nonNull {
		return fmt.Errorf("page has %d values for %d non-null rows", have, nonNull)
	}
	return nil
}

// mapDictionary maps every entry of d to its symbol id once per dictionary
// (a column chunk has one), so that each row costs one slice index instead
// of a hash lookup, whatever the dictionary's size. The entries are read
// straight out of the dictionary page and looked up through the cursor's
// internCache.
func (c *cursor) mapDictionary(d parquet.Dictionary) error {
	c.dict = nil
	dv := d.Page().Data()
	data, offs := dv.ByteArray()
	n := len(offs) - 1
	if n < 0 {
		n = 0
	}
	if n != d.Len() {
		return fmt.Errorf("dictionary of %d entries has %d offsets", d.Len(), len(offs))
	}
	bound := c.bound[:0]
	for i := range n {
		if offs[i] > offs[i+1] || int(offs[i+1]) > len(data) {
			return fmt.Errorf("dictionary entry %d: bad offsets", i)
		}
		bound = append(bound, offs[i], offs[i+1])
	}
	c.bound = bound
	c.mapEntries(data, bound)
	c.dict = d
	return nil
}

// mapEntries sets c.dictMap to the symbol ids of the entries of a
// dictionary: entry i is data[bound[2i]:bound[2i+1]].
func (c *cursor) mapEntries(data []byte, bound []uint32) {
	n := len(bound) / 2
	if cap(c.dictMap) < n {
		c.dictMap = make([]int32, n, n+n/8)
		if c.huge {
			hugepage.Advise(c.dictMap)
		}
	}
	c.dictMap = c.dictMap[:n]
	c.cache.lookupAll(c.dictMap, data, bound)
}

// openChunk points the cursor at the chunk c.chunk has loaded, as if its
// pages had been read one after the other into a single page: every row
// of the chunk is current, its dictionary mapped.
func (c *cursor) openChunk() {
	c.pages, c.page, c.dict = nil, nil, nil
	c.done = true
	d := c.chunk
	c.n, c.pos, c.vpos = len(d.idx), 0, 0
	c.def = nil
	c.i32, c.byDic = d.idx, true
	c.mapEntries(d.dict, d.bound)
}

// take prepares the next k (<= want) rows, loading a page if needed.
func (c *cursor) take(want int) (int, error) {
	for c.pos >= c.n {
		if c.done {
			return 0, io.ErrUnexpectedEOF
		}
		if err := c.next(); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, errors.New("fewer values than the row group has rows")
			}
			return 0, err
		}
	}
	return min(want, c.n-c.pos), nil
}

// fill writes the next n rows of the column into its batch column and
// reports whether any was null. A numeric column whose n rows are all in
// the current page, none null, is not copied: the batch column is set to
// the page's values (valid until the cursor leaves the page, which is
// after the batch is handed out; the Scanner points the batch back at its
// own buffers before each batch).
func (c *cursor) fill(b *calls.Batch, n int) (anyNull bool, err error) {
	switch c.field {
	case calls.FieldTSMillis:
		return fillNum(c, &b.TSMillis, n, c.i64p, nil)
	case calls.FieldCostMicroUSD:
		return fillNum(c, &b.CostMicroUSD, n, c.i64p, nil)
	case calls.FieldSavedMicroUSD:
		return fillNum(c, &b.SavedMicroUSD, n, c.i64p, nil)
	case calls.FieldInputTokens:
		return fillNum(c, &b.InputTokens, n, c.u64p, nil)
	case calls.FieldOutputTokens:
		return fillNum(c, &b.OutputTokens, n, c.u64p, nil)
	case calls.FieldStep:
		return fillNum(c, &b.Step, n, c.u32p, c.nulls[:n])
	case calls.FieldToolCalls:
		return fillNum(c, &b.ToolCalls, n, c.u32p, c.nulls[:n])
	}
	return c.fillStrings(b.Strings(c.field)[:n])
}

func (c *cursor) i64p() []int64 { return c.i64 }
func (c *cursor) u64p() []uint64 {
	return unsafeSlice[int64, uint64](c.i64)
}
func (c *cursor) u32p() []uint32 {
	return unsafeSlice[int32, uint32](c.i32)
}

// fillNum fills the next n values of a numeric column into *col (the
// Scanner's buffer on entry, of at least n), zero for nulls; when nulls is
// non-nil it also records which were null. When the n values are the next
// n of the current page and none is null, *col is set to them instead.
func fillNum[T int64 | uint64 | uint32](c *cursor, col *[]T, n int, vals func() []T, nulls []bool) (anyNull bool, err error) {
	k, err := c.take(n)
	if err != nil {
		return false, err
	}
	if k == n && c.def == nil {
		*col = vals()[c.vpos : c.vpos+n : c.vpos+n]
		if nulls != nil {
			clear(nulls)
		}
		c.pos += n
		c.vpos += n
		return false, nil
	}
	dst := (*col)[:n]
	for len(dst) > 0 {
		k, err := c.take(len(dst))
		if err != nil {
			return anyNull, err
		}
		v := vals()
		if c.def == nil {
			copy(dst[:k], v[c.pos:c.pos+k])
			if nulls != nil {
				clear(nulls[:k])
			}
			c.vpos += k
		} else {
			def, maxDef := c.def[c.pos:c.pos+k], c.maxDef
			for j, d := range def {
				if d == maxDef {
					dst[j] = v[c.vpos]
					c.vpos++
					if nulls != nil {
						nulls[j] = false
					}
				} else {
					dst[j] = 0
					anyNull = true
					if nulls != nil {
						nulls[j] = true
					}
				}
			}
		}
		c.pos += k
		dst = dst[k:]
		if nulls != nil {
			nulls = nulls[k:]
		}
	}
	return anyNull, nil
}

// fillStrings writes the symbol ids of the next len(dst) values, 0 for nulls.
func (c *cursor) fillStrings(dst []int32) (anyNull bool, err error) {
	for len(dst) > 0 {
		k, err := c.take(len(dst))
		if err != nil {
			return anyNull, err
		}
		out := dst[:k]
		switch {
		case c.byDic && c.def == nil:
			m, in := c.dictMap, c.i32[c.pos:c.pos+k]
			out = out[:len(in)]
			for j, ix := range in {
				u := uint(uint32(ix)) // the one check both bounds need
				if u >= uint(len(m)) {
					return anyNull, fmt.Errorf("dictionary index %d out of range [0,%d)", ix, len(m))
				}
				out[j] = m[u]
			}
			c.vpos += k
		case c.def == nil:
			for j := range out {
				v := c.vpos + j
				out[j] = c.cache.lookup(c.data[c.offs[v]:c.offs[v+1]])
			}
			c.vpos += k
		default:
			for j, d := range c.def[c.pos : c.pos+k] {
				if d != c.maxDef {
					out[j] = 0
					anyNull = true
					continue
				}
				if c.byDic {
					ix := c.i32[c.vpos]
					if uint32(ix) >= uint32(len(c.dictMap)) {
						return anyNull, fmt.Errorf("dictionary index %d out of range [0,%d)", ix, len(c.dictMap))
					}
					out[j] = c.dictMap[ix]
				} else {
					out[j] = c.cache.lookup(c.data[c.offs[c.vpos]:c.offs[c.vpos+1]])
				}
				c.vpos++
			}
		}
		c.pos += k
		dst = dst[k:]
	}
	return anyNull, nil
}
