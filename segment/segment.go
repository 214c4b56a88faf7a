// Package segment reads TokenFuse Parquet segment files into the call
// schema of package calls.
//
// The reader (docs/traces.md, "TokenFuse segments") works column page by column
// page, without reconstructing rows: values are copied in batches straight
// out of decoded pages, and dictionary-encoded strings are mapped to
// interned ids once per dictionary, not once per row.
package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/verdryx/verdryx/calls"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Errors a segment read can be marked with; test with errors.Is.
var (
	ErrMissingColumn = errors.New("missing required column")
	ErrColumnType    = errors.New("column has the wrong type")
	ErrCorrupt       = errors.New("corrupt segment")
	// ErrUnsupported marks a segment in a form this build refuses to read
	// rather than risk reading it wrong (LZ4 and LZ4_RAW compression).
	ErrUnsupported = errors.New("unsupported segment encoding")
)

// Error is an error reading one segment, naming the file and, where
// known, the row group and column (RowGroup is -1 and Column "" when the
// error is about the whole file).
type Error struct {
	File     string
	RowGroup int
	Column   string
	Err      error
}

func (e *Error) Error() string {
	s := "segment " + e.File
	if e.RowGroup >= 0 {
		s += fmt.Sprintf(": row group %d", e.RowGroup)
	}
	if e.Column != "" {
		s += ": column " + e.Column
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// DefaultBatchRows is the number of rows per Batch: small enough that the
// working set of a batch stays in cache, large enough to amortise the call.
const DefaultBatchRows = 4096

// Scanner reads segments into batches of interned ids. It reuses its batch
// buffers and per-column state across files. A Scanner is not safe for
// concurrent use.
type Scanner struct {
	fields calls.FieldSet
	checks calls.FieldSet // verified, not decoded (NewCheckingScanner)
	runs   *calls.Symbols
	syms   *calls.Symbols
	rows   int
	batch  calls.Batch
	own    calls.Batch // the numeric columns' buffers (batch may point at pages)
	chk    calls.Batch // where check columns read the generic way are decoded to
	chkOwn calls.Batch // chk's own buffers
	cols   [calls.NumFields]cursor
	allNul []bool

	// The file being read, for the fast path of dictionary-encoded string
	// chunks (dictChunk); src.r is nil when the fast path is not to be used.
	src  chunkSource
	meta *format.FileMetaData
	// generic, set by tests, turns the fast path off; fastChunks counts
	// the chunks it read, checkedChunks the check columns' chunks it
	// verified without decoding.
	generic       bool
	fastChunks    int
	checkedChunks int

	// The segment ScanRowGroup read last, kept open (its footer parsed)
	// for the next row group of the same path; nil when none.
	kept *keptFile
}

// keptFile is an open segment with its parsed footer.
type keptFile struct {
	path, name string
	f          *os.File
	pf         *parquet.File
	size       int64
}

// NewScanner returns a scanner filling the fields of fields, interning
// run_id values into runs and every other string into syms.
func NewScanner(fields calls.FieldSet, runs, syms *calls.Symbols) *Scanner {
	return NewCheckingScanner(fields, 0, runs, syms)
}

// NewCheckingScanner is NewScanner that also verifies the columns of
// checks (less those of fields) in every row group, as reading them would,
// without handing them out: a segment or row group fails on a check column
// exactly when a scanner filling that column would fail it (missing,
// mistyped, unreadable), though not always at the same row or naming the
// same column when several are bad. It is for a reduction that does not
// need a column but must skip what a reduction reading it (the worker's)
// skips. A check column's chunk that passes a structural check (every
// page's header, checksum, encoding and value count; package-internal
// checkPlain and dictChunk.load) is not decoded; any other is decoded the
// generic way and dropped. The batch's slices of check columns are
// unspecified.
func NewCheckingScanner(fields, checks calls.FieldSet, runs, syms *calls.Symbols) *Scanner {
	checks &^= fields
	s := &Scanner{fields: fields, checks: checks, runs: runs, syms: syms, rows: DefaultBatchRows}
	runCache, symCache := newInternCache(runs), newInternCache(syms)
	n := s.rows
	for f := range calls.NumFields {
		if !fields.Has(f) && !checks.Has(f) {
			continue
		}
		b := &s.batch
		if checks.Has(f) {
			b = &s.chk
		}
		c := &s.cols[f]
		c.field = f
		c.table, c.cache = syms, symCache
		switch f {
		case calls.FieldRunID:
			c.table, c.cache = runs, runCache
			b.RunID = make([]int32, n)
		case calls.FieldTSMillis:
			b.TSMillis = make([]int64, n)
		case calls.FieldCostMicroUSD:
			b.CostMicroUSD = make([]int64, n)
		case calls.FieldSavedMicroUSD:
			b.SavedMicroUSD = make([]int64, n)
		case calls.FieldInputTokens:
			b.InputTokens = make([]uint64, n)
		case calls.FieldOutputTokens:
			b.OutputTokens = make([]uint64, n)
		case calls.FieldStep:
			b.Step = make([]uint32, n)
			c.nulls = make([]bool, n)
		case calls.FieldToolCalls:
			b.ToolCalls = make([]uint32, n)
			c.nulls = make([]bool, n)
		case calls.FieldModel:
			b.Model = make([]int32, n)
		case calls.FieldDecision:
			b.Decision = make([]int32, n)
		case calls.FieldAgentID:
			b.AgentID = make([]int32, n)
		case calls.FieldParentRunID:
			b.ParentRunID = make([]int32, n)
		case calls.FieldOnBehalfOf:
			b.OnBehalfOf = make([]int32, n)
		case calls.FieldOutcome:
			b.Outcome = make([]int32, n)
		case calls.FieldKeyID:
			b.KeyID = make([]int32, n)
		case calls.FieldUnit:
			b.Unit = make([]int32, n)
		}
	}
	s.own, s.chkOwn = s.batch, s.chk
	s.allNul = make([]bool, n)
	for i := range s.allNul {
		s.allNul[i] = true
	}
	return s
}

// physical returns the Parquet physical type a field must have.
func physical(f calls.Field) parquet.Kind {
	switch f {
	case calls.FieldTSMillis, calls.FieldInputTokens, calls.FieldOutputTokens,
		calls.FieldCostMicroUSD, calls.FieldSavedMicroUSD:
		return parquet.Int64
	case calls.FieldStep, calls.FieldToolCalls:
		return parquet.Int32
	}
	return parquet.ByteArray
}

func typeName(f calls.Field) string {
	switch f {
	case calls.FieldInputTokens, calls.FieldOutputTokens:
		return "INT64 (UINT64)"
	case calls.FieldStep, calls.FieldToolCalls:
		return "INT32 (UINT32)"
	case calls.FieldTSMillis, calls.FieldCostMicroUSD, calls.FieldSavedMicroUSD:
		return "INT64"
	}
	return "BYTE_ARRAY (UTF8)"
}

// ScanFile reads the segment at path and calls fn with each batch, in row
// order. The batch and its slices are reused: fn must not keep them. A
// segment without a required column (columns 1-8 but run_id), with a column
// of the wrong physical type, or with unreadable bytes yields a
// *Error naming the file, row group and column; batches already
// passed to fn stay passed (outcome/segfold folds a segment all or
// nothing by redoing its pass without it). An error from fn is returned
// as is.
func (s *Scanner) ScanFile(path string, fn func(*calls.Batch) error) error {
	f, pf, name, err := s.open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for gi, rg := range pf.RowGroups() {
		if err := s.scanRowGroup(rg, gi, name, fn); err != nil {
			return err
		}
	}
	return nil
}

// ScanBytes is ScanFile over a segment already read into memory (named
// name in errors): a caller that read the file through a confinement rule
// scans exactly the bytes it checked and never reopens the path.
func (s *Scanner) ScanBytes(name string, b []byte, fn func(*calls.Batch) error) error {
	base := filepath.Base(name)
	r := bytes.NewReader(b)
	pf, err := OpenParquet(r, int64(len(b)))
	if err != nil {
		return &Error{File: base, RowGroup: -1, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	if err := s.bind(pf, base, r, int64(len(b))); err != nil {
		return err
	}
	for gi, rg := range pf.RowGroups() {
		if err := s.scanRowGroup(rg, gi, base, fn); err != nil {
			return err
		}
	}
	return nil
}

// ScanRowGroup reads row group gi (0-based, in file order) of the segment
// at path, as ScanFile reads each of its row groups: several Scanners may
// read the row groups of one file in parallel, each its own. Errors are
// those of ScanFile; a gi the file does not have is a *Error.
//
// The file stays open, its footer parsed, for the next ScanRowGroup of the
// same path (a parallel replay reads a segment's row groups one after the
// other): Close closes it.
func (s *Scanner) ScanRowGroup(path string, gi int, fn func(*calls.Batch) error) error {
	k := s.kept
	if k == nil || k.path != path {
		s.Close()
		f, pf, name, size, err := openSegment(path)
		if err != nil {
			return err
		}
		k = &keptFile{path: path, name: name, f: f, pf: pf, size: size}
		s.kept = k
	}
	pf, name := k.pf, k.name
	if err := s.bind(pf, name, k.f, k.size); err != nil {
		s.Close()
		return err
	}
	rgs := pf.RowGroups()
	if gi < 0 || gi >= len(rgs) {
		return &Error{File: name, RowGroup: -1, Err: fmt.Errorf("%w: no row group %d (the file has %d)", ErrCorrupt, gi, len(rgs))}
	}
	err := s.scanRowGroup(rgs[gi], gi, name, fn)
	if err != nil {
		// After a failure the next row group starts from a fresh open,
		// as every row group did before files were kept open.
		s.Close()
	}
	return err
}

// Close closes the file ScanRowGroup keeps open, if any. The Scanner stays
// usable.
func (s *Scanner) Close() error {
	k := s.kept
	if k == nil {
		return nil
	}
	s.kept = nil
	return k.f.Close()
}

// RowGroups returns the number of rows of each row group of the segment
// at path, in file order (from the footer; no page is read). A footer that
// does not decode is a *Error.
func RowGroups(path string) ([]int64, error) {
	f, pf, _, _, err := openSegment(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []int64
	for _, rg := range pf.RowGroups() {
		rows = append(rows, rg.NumRows())
	}
	return rows, nil
}

// open opens the segment at path and binds the scanner's columns to it.
func (s *Scanner) open(path string) (*os.File, *parquet.File, string, error) {
	f, pf, name, size, err := openSegment(path)
	if err != nil {
		return nil, nil, "", err
	}
	if err := s.bind(pf, name, f, size); err != nil {
		f.Close()
		return nil, nil, "", err
	}
	return f, pf, name, nil
}

// openSegment opens and parses the footer of the segment at path; the
// caller closes the file.
func openSegment(path string) (*os.File, *parquet.File, string, int64, error) {
	name := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, "", 0, fmt.Errorf("open segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, "", 0, fmt.Errorf("stat segment: %w", err)
	}
	pf, err := OpenParquet(f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, "", 0, &Error{File: name, RowGroup: -1, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	return f, pf, name, st.Size(), nil
}

// OpenParquet opens a segment with the options every reader here uses (no
// page index, no bloom filters, 256 KiB read buffer); a footer whose
// decoding panics is returned as an error. The page-scan benchmark opens
// files through it so its floor reads pages as the reduction does.
//
// The footer's declared length is checked against the file's size first:
// parquet-go v0.32.0 allocates a buffer of the declared length before
// reading, so an 8-byte file "PAR1PAR1" (a length of 827 MB) or any
// garbled trailer would cost up to 4 GiB of memory to refuse.
func OpenParquet(r io.ReaderAt, size int64) (f *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("footer: %v", p)
		}
	}()
	if size < 12 {
		return nil, fmt.Errorf("footer: a file of %d bytes is too short for Parquet (at least 12)", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return nil, fmt.Errorf("footer: the file does not end in the Parquet magic PAR1 (%q)", tail[4:])
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return nil, fmt.Errorf("footer: declared length %d bytes, but the file has %d bytes before it", n, size-12)
	}
	return parquet.OpenFile(r, size,
		parquet.SkipPageIndex(true),
		parquet.SkipBloomFilters(true),
		parquet.ReadBufferSize(256<<10),
	)
}

// bind resolves the requested columns by name in the file's schema; r
// (of size bytes) is the file pf reads, for the fast path.
func (s *Scanner) bind(pf *parquet.File, name string, r io.ReaderAt, size int64) error {
	s.src, s.meta = chunkSource{r: r, size: size}, pf.Metadata()
	schema := pf.Schema()
	s.batch.HasRunID = true
	for f := range calls.NumFields {
		if !s.fields.Has(f) && !s.checks.Has(f) {
			continue
		}
		c := &s.cols[f]
		c.index = -1
		leaf, ok := schema.Lookup(f.Name())
		if !ok {
			if f == calls.FieldRunID {
				s.batch.HasRunID = false
				continue
			}
			if f.Required() {
				return &Error{File: name, RowGroup: 0, Column: f.Name(), Err: ErrMissingColumn}
			}
			continue
		}
		if leaf.Node == nil || !leaf.Node.Leaf() || leaf.MaxRepetitionLevel != 0 {
			return &Error{File: name, RowGroup: 0, Column: f.Name(),
				Err: fmt.Errorf("%w: want a flat %s column", ErrColumnType, typeName(f))}
		}
		if k, ok := kindOf(leaf.Node); !ok || k != physical(f) {
			have := "a type without a physical kind"
			if ok {
				have = k.String()
			}
			return &Error{File: name, RowGroup: 0, Column: f.Name(),
				Err: fmt.Errorf("%w: have %s, want %s", ErrColumnType, have, typeName(f))}
		}
		c.index = leaf.ColumnIndex
		c.kind = physical(f)
		c.maxDef = byte(leaf.MaxDefinitionLevel)
	}
	return nil
}

func (s *Scanner) scanRowGroup(rg parquet.RowGroup, gi int, name string, fn func(*calls.Batch) error) (err error) {
	chunks := rg.ColumnChunks()
	total := rg.NumRows()
	var open []*cursor
	defer func() {
		for _, c := range open {
			c.close()
		}
		if p := recover(); p != nil {
			err = &Error{File: name, RowGroup: gi, Err: fmt.Errorf("%w: %v", ErrCorrupt, p)}
		}
	}()
	all := s.fields | s.checks
	for f := range calls.NumFields {
		c := &s.cols[f]
		if !all.Has(f) || c.index < 0 {
			continue
		}
		c.skip = false
		if c.index >= len(chunks) {
			return &Error{File: name, RowGroup: gi, Column: f.Name(),
				Err: fmt.Errorf("%w: row group has %d column chunks", ErrCorrupt, len(chunks))}
		}
		if codec, bad := s.lz4Chunk(c.index, gi); bad {
			return &Error{File: name, RowGroup: gi, Column: f.Name(),
				Err: fmt.Errorf("%w: %s compression (parquet-go v0.32.0 reads some of its pages from stale buffers: wrong numbers, no error); rewrite the segment with zstd or snappy", ErrUnsupported, codec)}
		}
		if s.checks.Has(f) && s.checkChunk(c, gi, total) {
			c.skip = true
			continue
		}
		open = append(open, c)
		if c.kind == parquet.ByteArray && c.maxDef == 0 && s.readChunk(c, gi, total) {
			continue
		}
		if err := s.checkPageSizes(c, gi); err != nil {
			return &Error{File: name, RowGroup: gi, Column: f.Name(), Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
		}
		c.open(chunks[c.index].Pages())
	}
	b := &s.batch
	for done := int64(0); done < total; {
		n := int(min(int64(s.rows), total-done))
		b.Len = n
		// The previous batch's numeric columns may point into pages the
		// cursors are about to release: back to the scanner's buffers.
		b.TSMillis, b.CostMicroUSD, b.SavedMicroUSD = s.own.TSMillis, s.own.CostMicroUSD, s.own.SavedMicroUSD
		b.InputTokens, b.OutputTokens = s.own.InputTokens, s.own.OutputTokens
		b.Step, b.ToolCalls = s.own.Step, s.own.ToolCalls
		b.StepNull, b.ToolNull = nil, nil
		s.chk = s.chkOwn
		for f := range calls.NumFields {
			if !all.Has(f) {
				continue
			}
			c := &s.cols[f]
			check := s.checks.Has(f)
			if c.index < 0 {
				if !check {
					s.fillAbsent(f, n)
				}
				continue
			}
			if c.skip {
				continue
			}
			dst := b
			if check {
				dst = &s.chk
			}
			anyNull, err := c.fill(dst, n)
			if err != nil {
				return &Error{File: name, RowGroup: gi, Column: f.Name(), Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
			}
			if anyNull && !check {
				switch f {
				case calls.FieldStep:
					b.StepNull = c.nulls[:n]
				case calls.FieldToolCalls:
					b.ToolNull = c.nulls[:n]
				}
			}
		}
		if s.fields.Has(calls.FieldCostMicroUSD) && s.cols[calls.FieldCostMicroUSD].index >= 0 {
			for i, v := range b.CostMicroUSD[:n] {
				if v < 0 || v > calls.MaxCallMicroUSD {
					return &Error{File: name, RowGroup: gi, Column: calls.ColCostMicroUSD,
						Err: fmt.Errorf("row %d: %w", done+int64(i), calls.CheckCostMicroUSD(v))}
				}
			}
		}
		if err := fn(b); err != nil {
			return err
		}
		done += int64(n)
	}
	for _, c := range open {
		if c.hasMore() {
			return &Error{File: name, RowGroup: gi, Column: c.field.Name(),
				Err: fmt.Errorf("%w: more values than the row group's %d rows", ErrCorrupt, total)}
		}
	}
	return nil
}

// kindOf returns the physical kind of a leaf column; ok is false for a
// type that has none (parquet-go panics on Kind for a leaf whose schema
// element claims a MAP or LIST logical type, as a garbled footer can).
func kindOf(n parquet.Node) (k parquet.Kind, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return n.Type().Kind(), true
}

// lz4Chunk reports whether the chunk of column index in row group gi is
// LZ4 or LZ4_RAW compressed, or would be decoded as such (parquet-go
// decodes a column with the codec of its first row group's chunk), and
// which codec.
func (s *Scanner) lz4Chunk(index, gi int) (format.CompressionCodec, bool) {
	md := s.meta
	if md == nil {
		return 0, false
	}
	for _, g := range []int{0, gi} {
		if g < len(md.RowGroups) && index < len(md.RowGroups[g].Columns) {
			if c := md.RowGroups[g].Columns[index].MetaData.Codec; c == format.Lz4 || c == format.Lz4Raw {
				return c, true
			}
		}
	}
	return 0, false
}

// readChunk reads column chunk gi of c's column through the fast path
// (dictChunk) and reports whether it did; on false nothing is changed and
// the chunk is to be read page by page.
func (s *Scanner) readChunk(c *cursor, gi int, rows int64) bool {
	src, cc, ok := s.fastSource(c, gi)
	if !ok || !c.chunk.load(src, &cc.MetaData, rows) {
		return false
	}
	c.openChunk()
	s.fastChunks++
	return true
}

// checkPageSizes walks the page headers of column chunk gi of c's column,
// before parquet-go reads its pages, and fails on a page whose declared
// size does not fit: parquet-go v0.32.0 allocates a page's declared
// compressed size before reading it (up to 2 GiB for one garbled header,
// on every such page), and its uncompressed size before decompressing.
// A page's compressed bytes must lie inside the chunk, and it may not
// claim more than maxPageBytes uncompressed. Headers that do not decode
// are left to parquet-go, which fails on them before allocating. Costs a
// small read per page.
func (s *Scanner) checkPageSizes(c *cursor, gi int) error {
	md := s.meta
	if s.src.r == nil || md == nil || md.EncryptionAlgorithm.Value != nil || gi >= len(md.RowGroups) ||
		c.index >= len(md.RowGroups[gi].Columns) {
		return nil
	}
	cc := &md.RowGroups[gi].Columns[c.index]
	if cc.FilePath != "" || cc.CryptoMetadata.Value != nil || len(cc.EncryptedColumnMetadata) > 0 {
		return nil
	}
	m := &cc.MetaData
	base := m.DataPageOffset
	if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < base {
		base = m.DictionaryPageOffset
	}
	end := base + m.TotalCompressedSize
	if base < 0 || m.TotalCompressedSize <= 0 || end > s.src.size || end < base {
		return nil // parquet-go refuses such a chunk itself
	}
	if c.chunk == nil {
		c.chunk = &dictChunk{huge: c.huge}
	}
	d := c.chunk
	for off := base; off < end; {
		h, n, ok := d.peekHeader(s.src.r, off, end)
		if !ok {
			return nil
		}
		body := int64(h.CompressedPageSize)
		if body < 0 || body > end-off-int64(n) {
			return fmt.Errorf("page at byte %d declares %d bytes, past its column chunk's end (byte %d)", off, h.CompressedPageSize, end)
		}
		if h.UncompressedPageSize < 0 || h.UncompressedPageSize > maxPageBytes {
			return fmt.Errorf("page at byte %d declares %d bytes uncompressed (at most %d)", off, h.UncompressedPageSize, maxPageBytes)
		}
		off += int64(n) + body
	}
	return nil
}

// checkChunk verifies column chunk gi of c's column, a check column,
// without decoding it, and reports whether it did; on false it is to be
// read page by page (and its values dropped), which fails the row group
// if the chunk is bad.
func (s *Scanner) checkChunk(c *cursor, gi int, rows int64) bool {
	src, cc, ok := s.fastSource(c, gi)
	if !ok || c.maxDef != 0 {
		return false
	}
	switch c.kind {
	case parquet.ByteArray:
		// An index past the dictionary fails the row group when read.
		ok = c.chunk.load(src, &cc.MetaData, rows) && c.chunk.indexesIn(len(c.chunk.bound)/2)
	default:
		ok = c.chunk.checkPlain(src, &cc.MetaData, rows)
	}
	if ok {
		s.checkedChunks++
	}
	return ok
}

// fastSource returns where column chunk gi of c's column is, for reading
// it whole (dictChunk), and its metadata; ok is false when the chunk is to
// be read page by page through parquet-go: the fast path is off, or the
// file is encrypted, the chunk elsewhere, or its codec one dictChunk does
// not decode.
func (s *Scanner) fastSource(c *cursor, gi int) (src chunkSource, cc *format.ColumnChunk, ok bool) {
	md := s.meta
	if s.generic || s.src.r == nil || md == nil || md.EncryptionAlgorithm.Value != nil ||
		gi >= len(md.RowGroups) || c.index >= len(md.RowGroups[0].Columns) || c.index >= len(md.RowGroups[gi].Columns) {
		return src, nil, false
	}
	cc = &md.RowGroups[gi].Columns[c.index]
	if cc.FilePath != "" || cc.CryptoMetadata.Value != nil || len(cc.EncryptedColumnMetadata) > 0 {
		return src, nil, false
	}
	// parquet-go decodes every chunk of a column with the codec of its
	// first row group's chunk; so does dictChunk, and only chunks of that
	// codec.
	first := md.RowGroups[0].Columns[c.index].MetaData.Codec
	switch first {
	case format.Uncompressed, format.Snappy, format.Gzip, format.Zstd:
	default:
		return src, nil, false
	}
	if c.chunk == nil {
		c.chunk = &dictChunk{huge: c.huge}
	}
	src = s.src
	src.codec, src.first = parquet.LookupCompressionCodec(first), first
	return src, cc, true
}

// fillAbsent zeroes the batch column of a field the segment lacks.
func (s *Scanner) fillAbsent(f calls.Field, n int) {
	b := &s.batch
	switch f {
	case calls.FieldTSMillis:
		clear(b.TSMillis[:n])
	case calls.FieldCostMicroUSD:
		clear(b.CostMicroUSD[:n])
	case calls.FieldSavedMicroUSD:
		clear(b.SavedMicroUSD[:n])
	case calls.FieldInputTokens:
		clear(b.InputTokens[:n])
	case calls.FieldOutputTokens:
		clear(b.OutputTokens[:n])
	case calls.FieldStep:
		clear(b.Step[:n])
		b.StepNull = s.allNul[:n]
	case calls.FieldToolCalls:
		clear(b.ToolCalls[:n])
		b.ToolNull = s.allNul[:n]
	default:
		clear(b.Strings(f)[:n])
	}
}

// UseHugePages makes the scanner ask for transparent huge pages for its
// large buffers (chunk bytes and indexes, dictionary maps, its intern
// caches; package hugepage) from now on. For a process that reduces a
// directory and exits: the hint stays on the memory after the heap frees
// it, and the kernel's background collapse (khugepaged) may then keep
// sparsely used huge pages resident, so a long-running worker leaves it
// off. Call it before the scanner reads anything.
func (s *Scanner) UseHugePages() {
	for f := range s.cols {
		c := &s.cols[f]
		c.huge = true
		if c.cache != nil {
			c.cache.huge = true
		}
		if c.chunk != nil {
			c.chunk.huge = true
		}
	}
}

// InternRunIDs writes into dst[:from.Len()] the id, in the run table the
// scanner interns into (NewScanner's runs), of each string of from in id
// order, adding those the table lacks, through the scanner's own index of
// that table: for merging another reducer's runs into the one this scanner
// filled without building a second index of its table. It panics when dst
// is shorter than from.
func (s *Scanner) InternRunIDs(dst []int32, from *calls.Symbols) {
	n := from.Len()
	dst = dst[:n]
	c := s.cols[calls.FieldRunID].cache
	if c == nil { // run_id is not among the fields: no index of the table here
		for i := range n {
			dst[i] = s.runs.InternString(from.Name(int32(i)))
		}
		return
	}
	// A chunk at a time, in small reused buffers: lookupAll hashes a
	// chunk's keys before probing for them.
	const chunk = 4096
	var data []byte
	bound := make([]uint32, 0, 2*chunk)
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		data, bound = data[:0], bound[:0]
		size := 0
		for i := lo; i < hi; i++ {
			size += len(from.Name(int32(i)))
		}
		if uint64(size) > math.MaxUint32 { // past 32-bit bounds: one at a time
			for i := lo; i < hi; i++ {
				dst[i] = c.lookup([]byte(from.Name(int32(i))))
			}
			continue
		}
		for i := lo; i < hi; i++ {
			v := from.Name(int32(i))
			bound = append(bound, uint32(len(data)))
			data = append(data, v...)
			bound = append(bound, uint32(len(data)))
		}
		c.lookupAll(dst[lo:hi], data, bound)
	}
}
