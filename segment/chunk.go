package segment

import (
	"encoding/binary"
	"github.com/verdryx/verdryx/internal/hugepage"
	"hash/crc32"
	"io"
	"math"

	"github.com/parquet-go/bitpack"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// maxChunkBytes bounds the column chunks dictChunk reads whole; a larger
// chunk is read page by page through parquet-go.
const maxChunkBytes = 64 << 20

// dictChunk decodes one dictionary-encoded BYTE_ARRAY column chunk of a
// flat required column straight from the file's bytes into buffers it
// reuses from chunk to chunk: the dictionary entries stay where they are
// in the page (no copy per entry, no allocation per row group) and the
// data pages' RLE/bit-packed indexes go into one slice for the chunk.
//
// It is a fast path in front of parquet-go's page reader, not a second
// reader: load accepts only a chunk it decodes to exactly what the generic
// path (cursor.next over parquet-go's pages) hands out, and says no to
// anything else (another encoding, levels, nulls, an encrypted or
// oversized chunk, a CRC mismatch, any malformed or merely unusual byte),
// so that the caller reads that chunk the generic way, errors included.
// A chunk it accepts is one the generic path reads without error to the
// same dictionary and indexes (an index outside the dictionary is kept:
// cursor.fillStrings fails the row group on it at the same row either
// way). What the two paths read is compared over generated segments of
// varied encodings, over corrupted and mutated ones and over fuzzed bytes
// (TestDictChunkMatchesGenericPath, TestDictChunkCorruptionMatchesGenericPath,
// TestDictChunkMutationsMatchGenericPath, FuzzDictChunkMatchesGenericPath).
type dictChunk struct {
	raw   []byte   // the chunk's bytes
	dbuf  []byte   // the decompressed dictionary page
	pbuf  []byte   // a decompressed data page
	dict  []byte   // the dictionary page's PLAIN values
	bound []uint32 // entry i is dict[bound[2i]:bound[2i+1]]
	idx   []int32  // the chunk's dictionary indexes, one a row
	pad   []byte   // a bit-packed run copied with room after it
	peek  []byte   // page header bytes (peekHeader)
	hdr   format.PageHeader
	proto thrift.CompactProtocol
	huge  bool // ask for huge pages for the large buffers (Scanner.UseHugePages)
}

// chunkSource is what dictChunk.load needs to find a chunk in the file.
type chunkSource struct {
	r     io.ReaderAt
	size  int64
	codec compress.Codec // the column's codec, as parquet-go decodes it
	first format.CompressionCodec
}

// load reads and decodes the chunk described by m, of rows rows, and
// reports whether it did; on false the chunk must be read the generic way
// and what d holds is meaningless. A panic while decoding (parquet-go's
// gzip and brotli decoders panic on a bad stream header) is a false too:
// the generic path meets it, if at all, when it reaches that page, after
// the rows before it and the errors of other columns' pages in between.
func (d *dictChunk) load(src chunkSource, m *format.ColumnMetaData, rows int64) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	if m.Type != format.ByteArray || !d.read(src, m, rows) {
		return false
	}
	if cap(d.idx) < int(rows)+8 {
		d.idx = make([]int32, 0, rows+8)
		if d.huge {
			hugepage.Advise(d.idx)
		}
	}
	d.dict, d.bound, d.idx = nil, d.bound[:0], d.idx[:0]
	for p, first := d.raw, true; len(p) > 0; first = false {
		body, rest, read := d.page(p)
		if !read {
			return false
		}
		p = rest
		switch h := &d.hdr; h.Type {
		case format.DictionaryPage:
			read = first && d.dictionaryPage(body, src.codec)
		case format.DataPage:
			read = d.dict != nil && d.dataPageV1(body, src.codec)
		case format.DataPageV2:
			read = d.dict != nil && d.dataPageV2(body, src.codec)
		default:
			read = false
		}
		if !read {
			return false
		}
	}
	return int64(len(d.idx)) == rows
}

// read reads the bytes of the chunk described by m, of rows rows, into
// d.raw, and reports whether it did: false for a chunk of another codec
// than the column's first (parquet-go decodes every chunk of a column with
// that one), a row count out of range, or bytes outside the file.
func (d *dictChunk) read(src chunkSource, m *format.ColumnMetaData, rows int64) bool {
	if m.Codec != src.first || rows <= 0 || rows > math.MaxInt32 {
		return false
	}
	base := m.DataPageOffset
	if m.DictionaryPageOffset != 0 {
		base = m.DictionaryPageOffset
	}
	n := m.TotalCompressedSize
	if base < 0 || n <= 0 || n > maxChunkBytes || base > src.size-n {
		return false
	}
	if int64(cap(d.raw)) < n+bitpack.PaddingInt32 {
		// An eighth more than asked: the next row group's chunk is
		// likely a little larger.
		d.raw = make([]byte, n, n+n/8+bitpack.PaddingInt32)
		if d.huge {
			hugepage.Advise(d.raw)
		}
	}
	d.raw = d.raw[:n]
	k, err := src.r.ReadAt(d.raw, base)
	return int64(k) == n && (err == nil || err == io.EOF)
}

// indexesIn reports whether every index load decoded is below n (the
// dictionary's size): the generic path fails a row group on any other.
func (d *dictChunk) indexesIn(n int) bool {
	for _, ix := range d.idx {
		if uint32(ix) >= uint32(n) {
			return false
		}
	}
	return true
}

// checkPlain reports whether the chunk described by m, of rows rows, of a
// flat required INT64 or INT32 column, is one the generic path reads
// without error: every page a PLAIN data page (v1, or v2 without levels
// or nulls) whose header decodes, whose checksum (when it has one)
// matches, which decompresses to exactly its values' bytes, the values
// adding up to rows. It decodes no value. A false says nothing (the
// chunk is then read the generic way, errors included): like load, it
// says no to anything unusual, so that a chunk it accepts is never one
// the generic path fails.
func (d *dictChunk) checkPlain(src chunkSource, m *format.ColumnMetaData, rows int64) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	var width int64
	switch m.Type {
	case format.Int64:
		width = 8
	case format.Int32:
		width = 4
	default:
		return false
	}
	if !d.read(src, m, rows) {
		return false
	}
	uncompressed := src.codec == nil || src.codec.CompressionCodec() == format.Uncompressed
	values := int64(0)
	for p := d.raw; len(p) > 0; {
		body, rest, read := d.page(p)
		if !read {
			return false
		}
		p = rest
		h := &d.hdr
		var n int64
		compressed := true
		switch h.Type {
		case format.DataPage:
			dh := &h.DataPageHeader.V
			if !h.DataPageHeader.Valid || dh.Encoding != format.Plain || dh.NumValues <= 0 {
				return false
			}
			n = int64(dh.NumValues)
		case format.DataPageV2:
			dh := &h.DataPageHeaderV2.V
			if !h.DataPageHeaderV2.Valid || dh.Encoding != format.Plain || dh.NumValues <= 0 || dh.NumNulls != 0 ||
				dh.NumRows != dh.NumValues || dh.RepetitionLevelsByteLength != 0 || dh.DefinitionLevelsByteLength != 0 {
				return false
			}
			n = int64(dh.NumValues)
			compressed = !dh.IsCompressed.Valid || dh.IsCompressed.V
		default:
			return false
		}
		if (uncompressed || !compressed) && h.UncompressedPageSize != h.CompressedPageSize {
			return false
		}
		data := body
		if compressed {
			var ok bool
			if data, ok = decompress(src.codec, body, h.UncompressedPageSize, &d.pbuf); !ok {
				return false
			}
		}
		if int64(len(data)) != width*n || int64(h.UncompressedPageSize) != width*n {
			return false
		}
		values += n
		if values > rows {
			return false
		}
	}
	return values == rows
}

// page decodes the page header at the start of p into d.hdr and returns
// the page's body and the bytes after it.
func (d *dictChunk) page(p []byte) (body, rest []byte, ok bool) {
	d.hdr = format.PageHeader{}
	r := d.proto.NewReaderFromBytes(p)
	if err := thrift.NewDecoder(r).Decode(&d.hdr); err != nil {
		return nil, nil, false
	}
	h := &d.hdr
	p = p[r.BytesRead():]
	if h.CompressedPageSize < 0 || h.UncompressedPageSize < 0 || int(h.CompressedPageSize) > len(p) ||
		h.UncompressedPageSize > maxPageBytes { // the generic path's page check fails it
		return nil, nil, false
	}
	body, rest = p[:h.CompressedPageSize], p[h.CompressedPageSize:]
	if h.CRC != 0 && uint32(h.CRC) != crc32.ChecksumIEEE(body) {
		return nil, nil, false
	}
	return body, rest, true
}

// maxPageBytes bounds the uncompressed size a page may declare
// (Scanner.checkPageSizes): writers cut pages at about a megabyte.
const maxPageBytes = 1 << 30

// peekHeader decodes the page header at byte off of r (a chunk ending at
// byte end) into d.hdr, reading a little at a time, and returns it and its
// length; ok is false when no header decodes from the bytes up to end or
// up to 64 KiB.
func (d *dictChunk) peekHeader(r io.ReaderAt, off, end int64) (h *format.PageHeader, n int, ok bool) {
	defer func() {
		if recover() != nil {
			h, n, ok = nil, 0, false
		}
	}()
	for want := int64(256); ; want *= 16 {
		k := min(want, end-off)
		if int64(cap(d.peek)) < k {
			d.peek = make([]byte, k)
		}
		buf := d.peek[:k]
		if got, err := r.ReadAt(buf, off); int64(got) != k && err != nil {
			return nil, 0, false
		}
		d.hdr = format.PageHeader{}
		rd := d.proto.NewReaderFromBytes(buf)
		if err := thrift.NewDecoder(rd).Decode(&d.hdr); err == nil {
			return &d.hdr, int(rd.BytesRead()), true
		}
		if k < want || want >= 64<<10 {
			return nil, 0, false
		}
	}
}

// decompress returns body decompressed into *buf when the column's codec
// compresses, body itself otherwise.
func decompress(codec compress.Codec, body []byte, size int32, buf *[]byte) ([]byte, bool) {
	if codec == nil || codec.CompressionCodec() == format.Uncompressed {
		return body, true
	}
	if size > maxChunkBytes {
		return nil, false
	}
	if cap(*buf) < int(size) {
		*buf = make([]byte, size)
	}
	out, err := codec.Decode((*buf)[:size], body)
	if err != nil {
		return nil, false
	}
	if cap(out) > cap(*buf) {
		*buf = out
	}
	return out, true
}

// dictionaryPage takes the PLAIN-encoded dictionary page body: entry
// bounds are recorded in place, and the count must be the header's.
func (d *dictChunk) dictionaryPage(body []byte, codec compress.Codec) bool {
	h := &d.hdr
	if !h.DictionaryPageHeader.Valid {
		return false
	}
	dh := &h.DictionaryPageHeader.V
	//lint:ignore SA1019 older writers (parquet-mr 1.x, arrow before 0.15) still label dictionary pages PLAIN_DICTIONARY
	if dh.Encoding != format.Plain && dh.Encoding != format.PlainDictionary || dh.NumValues < 0 {
		return false
	}
	data, ok := decompress(codec, body, h.UncompressedPageSize, &d.dbuf)
	if !ok || len(data) > math.MaxUint32 {
		return false
	}
	bound := d.bound[:0]
	if want := 2 * min(int(dh.NumValues), len(data)/4); cap(bound) < want {
		// An eighth more: the next row group's dictionary is likely a
		// little larger, and a fresh array is page faults.
		bound = make([]uint32, 0, want+want/8)
		if d.huge {
			hugepage.Advise(bound)
		}
	}
	for i := 0; i < len(data); {
		if len(data)-i < 4 {
			return false
		}
		n := int(binary.LittleEndian.Uint32(data[i:]))
		i += 4
		if n > len(data)-i {
			return false
		}
		bound = append(bound, uint32(i), uint32(i+n))
		i += n
	}
	d.bound = bound
	if len(bound)/2 != int(dh.NumValues) {
		return false
	}
	d.dict = data
	return true
}

// dataPageV1 takes a data page (v1) of dictionary indexes; a required
// flat column's page has no levels.
func (d *dictChunk) dataPageV1(body []byte, codec compress.Codec) bool {
	h := &d.hdr
	if !h.DataPageHeader.Valid {
		return false
	}
	dh := &h.DataPageHeader.V
	if !isDictEncoding(dh.Encoding) || dh.NumValues <= 0 {
		return false
	}
	data, ok := decompress(codec, body, h.UncompressedPageSize, &d.pbuf)
	return ok && d.indexes(data, int(dh.NumValues))
}

// dataPageV2 takes a data page (v2) of dictionary indexes without levels
// or nulls.
func (d *dictChunk) dataPageV2(body []byte, codec compress.Codec) bool {
	h := &d.hdr
	if !h.DataPageHeaderV2.Valid {
		return false
	}
	dh := &h.DataPageHeaderV2.V
	if !isDictEncoding(dh.Encoding) || dh.NumValues <= 0 || dh.NumNulls != 0 || dh.NumRows < 0 ||
		dh.RepetitionLevelsByteLength != 0 || dh.DefinitionLevelsByteLength != 0 {
		return false
	}
	data := body
	if !dh.IsCompressed.Valid || dh.IsCompressed.V {
		var ok bool
		if data, ok = decompress(codec, body, h.UncompressedPageSize, &d.pbuf); !ok {
			return false
		}
	}
	return d.indexes(data, int(dh.NumValues))
}

func isDictEncoding(e format.Encoding) bool {
	//lint:ignore SA1019 older writers label dictionary-index data pages PLAIN_DICTIONARY
	return e == format.RLEDictionary || e == format.PlainDictionary
}

// indexes appends the page's n dictionary indexes (a bit width byte, then
// the RLE/bit-packed hybrid) to d.idx. The runs must be well formed to the
// last byte and hold n values plus at most the padding of a bit-packed
// group (the generic path decodes and drops that padding). An index out
// of the dictionary's range is kept: cursor.fillStrings fails the row
// group on it as it does on the generic path's pages, at the same row.
func (d *dictChunk) indexes(data []byte, n int) bool {
	if len(data) == 0 || data[0] > 32 {
		return false
	}
	bw, src := uint(data[0]), data[1:]
	start := len(d.idx)
	d.idx = growInt32(d.idx, n+8) // room for a bit-packed group's padding
	out := d.idx[start:]
	got := 0 // values decoded so far, padding included
	for i := 0; i < len(src); {
		u, k := binary.Uvarint(src[i:])
		if k <= 0 || u>>1 > uint64(n+7-got) {
			return false
		}
		i += k
		count := int(u >> 1)
		if u&1 == 0 && count > 0 {
			// A run of count copies of one value of (bw+7)/8 bytes.
			w := int(bw+7) / 8
			if w > len(src)-i {
				return false
			}
			var b [4]byte
			copy(b[:], src[i:i+w])
			i += w
			v := int32(binary.LittleEndian.Uint32(b[:]))
			fill := out[min(got, n):min(n, got+count)]
			for j := range fill {
				fill[j] = v
			}
		} else if count > 0 {
			// count groups of 8 values, bw bytes a group.
			bytes := count * int(bw)
			if bw == 0 || 8*count > n+7-got || bytes > len(src)-i {
				return false
			}
			d.unpack(out[got:got+8*count], src[i:i+bytes], bw)
			i += bytes
			count *= 8
		}
		got += count
	}
	d.idx = d.idx[:start+n]
	return got >= n
}

// unpack decodes len(out) bw-bit values (0 < bw <= 32), least significant
// bit first, from in (bitpack.Unpack, as parquet-go's RLE decoder; it
// reads up to bitpack.PaddingInt32 bytes past in, so in is copied when
// its backing array ends sooner).
func (d *dictChunk) unpack(out []int32, in []byte, bw uint) {
	if cap(in)-len(in) < bitpack.PaddingInt32 {
		d.pad = append(append(d.pad[:0], in...), make([]byte, bitpack.PaddingInt32)...)
		in = d.pad[:len(in)]
	}
	bitpack.Unpack(out, in[:cap(in)], bw)
}

// growInt32 returns s with n more elements (their values unspecified).
func growInt32(s []int32, n int) []int32 {
	if need := len(s) + n; need > cap(s) {
		t := make([]int32, need, max(need, 2*cap(s)))
		copy(t, s)
		return t
	}
	return s[:len(s)+n]
}
