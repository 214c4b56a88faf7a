package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/lz4"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
)

// chunkRow has required dictionary-encoded strings (the fast path's case),
// a plain-encoded one (key_id) and an optional one (unit).
type chunkRow struct {
	TSMillis     int64   `parquet:"ts_millis"`
	RunID        string  `parquet:"run_id,dict"`
	Model        string  `parquet:"model,dict"`
	Decision     string  `parquet:"decision,dict"`
	InputTokens  uint64  `parquet:"input_tokens"`
	OutputTokens uint64  `parquet:"output_tokens"`
	CostMicroUSD int64   `parquet:"cost_microusd"`
	Step         uint32  `parquet:"step"`
	AgentID      string  `parquet:"agent_id,dict"`
	Outcome      string  `parquet:"outcome,dict"`
	KeyID        string  `parquet:"key_id"`
	Unit         *string `parquet:"unit,optional,dict"`
}

// chunkRows generates n rows over runs distinct run ids (1 gives a
// one-entry dictionary, of bit width 0), with long and empty strings.
func chunkRows(rng *rand.Rand, n, runs int) []chunkRow {
	rows := make([]chunkRow, n)
	for i := range rows {
		r := &rows[i]
		r.TSMillis = int64(1_700_000_000_000 + i)
		r.RunID = fmt.Sprintf("run-%08d", rng.IntN(runs))
		if rng.IntN(9) == 0 {
			r.RunID += "-with-a-long-suffix-past-the-inline-key"
		}
		r.Model = []string{"m1", "m2", ""}[rng.IntN(3)]
		r.Decision = []string{"allow", "killed", "cache_hit", "budget_exceeded"}[rng.IntN(4)]
		r.InputTokens, r.OutputTokens = uint64(rng.IntN(5000)), uint64(rng.IntN(900))
		r.CostMicroUSD, r.Step = int64(rng.IntN(100_000)), uint32(i)
		r.AgentID = fmt.Sprintf("agent://x/%d", rng.IntN(40))
		r.Outcome = []string{"", "", "", "case_resolved", "ünïcode"}[rng.IntN(5)]
		r.KeyID = fmt.Sprintf("k%d", rng.IntN(7))
		if rng.IntN(3) > 0 {
			u := []string{"tokens", "requests"}[rng.IntN(2)]
			r.Unit = &u
		}
	}
	return rows
}

// chunkFile writes rows as a segment with opts.
func chunkFile(t testing.TB, rows []chunkRow, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[chunkRow](&buf, opts...)
	_, err := w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// scanResult is what one scanner made of a segment: its calls up to the
// first error and that error's text.
type scanResult struct {
	calls []calls.Call
	err   string
	errv  error
	fast  int
}

func scanWith(data []byte, generic bool) scanResult {
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	sc := NewScanner(calls.AllFields, runs, syms)
	sc.generic = generic
	var res scanResult
	err := sc.ScanBytes("calls-1-1-00000001.parquet", data, func(b *calls.Batch) error {
		for i := range b.Len {
			res.calls = append(res.calls, b.Call(i, runs, syms))
		}
		return nil
	})
	if err != nil {
		res.err, res.errv = costValueRE.ReplaceAllString(err.Error(), "${1}N${2}"), err
	}
	res.fast = sc.fastChunks
	return res
}

// staleCostValues reports whether two scans of one corrupt segment failed
// in the same row group's cost_microusd column, at least one of them by
// the cost rule on a value read from parquet-go's stale buffers.
func staleCostValues(a, b string) bool {
	if a == b || a == "" || b == "" {
		return false
	}
	prefix := func(e string) string {
		i := strings.Index(e, "column cost_microusd: ")
		if i < 0 {
			return ""
		}
		return e[:i]
	}
	rule := func(e string) bool {
		return strings.Contains(e, "is over the per-call maximum") || strings.Contains(e, "is negative")
	}
	return prefix(a) != "" && prefix(a) == prefix(b) && (rule(a) || rule(b))
}

// costValueRE finds the value a cost rule names in its error. On a
// corrupt page that value can come out of parquet-go's pooled buffers
// (see requireSameScan), so two scans of the same bytes compare the rule,
// the row and the column, not the garbage value.
var costValueRE = regexp.MustCompile(`(field cost_microusd: )-?[0-9]+( is )`)

// requireSameScan reads data through the generic path and the fast path
// and requires the same error, as many calls and the same string columns
// (the fast path's), and with strict the same calls whole. It returns how
// many chunks the fast path read and the error.
//
// Why not always the calls whole: on some corrupt pages parquet-go
// decodes numeric values out of a pooled buffer's stale bytes (it keeps
// its own buffer when a codec returns a fresh slice no longer than the
// declared page size, and reads past a short page), so the generic path
// alone hands out different numbers from run to run, depending on what
// the pool held. The fast path reads no numeric column.
func requireSameScan(t testing.TB, data []byte, what string, strict bool) (fast int, err string) {
	t.Helper()
	want, have := scanWith(data, true), scanWith(data, false)
	require.Zero(t, want.fast, "the generic scanner took the fast path")
	if !strict && staleCostValues(want.err, have.err) {
		// The two reads of the numbers differ as said above: one met a
		// garbage cost the cost rule refuses before the page's corruption.
		return have.fast, have.err
	}
	require.Equal(t, want.err, have.err, "%s: error", what)
	require.Len(t, have.calls, len(want.calls), what)
	for i := range want.calls {
		w, h := want.calls[i], have.calls[i]
		if !strict {
			w, h = stringsOf(w), stringsOf(h)
		}
		if !reflect.DeepEqual(w, h) {
			require.Equal(t, w, h, "%s: row %d", what, i)
		}
	}
	return have.fast, want.err
}

// stringsOf is c with its numeric fields zeroed.
func stringsOf(c calls.Call) calls.Call {
	return calls.Call{RunID: c.RunID, HasRunID: c.HasRunID, Model: c.Model, Decision: c.Decision, AgentID: c.AgentID,
		ParentRunID: c.ParentRunID, OnBehalfOf: c.OnBehalfOf, Outcome: c.Outcome, KeyID: c.KeyID, Unit: c.Unit}
}

type chunkCase struct {
	name   string
	runs   int
	rows   int
	codec  compress.Codec
	opts   []parquet.WriterOption
	fast   bool // whether the fast path must read some chunk
	stride int  // corrupt every stride-th byte
}

func chunkCases() []chunkCase {
	var cs []chunkCase
	// Not LZ4_RAW: parquet-go reads some valid LZ4_RAW pages wrong
	// (stale pooled bytes, as in requireSameScan), so the generic path is
	// no reference there; the fast path leaves LZ4_RAW chunks to it
	// (TestLZ4SegmentsAreRefused: LZ4 segments are refused).
	codecs := []compress.Codec{&uncompressed.Codec{}, &snappy.Codec{}, &zstd.Codec{}, &gzip.Codec{}}
	for _, v := range []int{1, 2} {
		for _, codec := range codecs {
			for _, page := range []int{300, 64 << 10} {
				cs = append(cs, chunkCase{
					name: fmt.Sprintf("v%d/%s/page%d", v, codec.CompressionCodec(), page),
					runs: 700, rows: 3000, codec: codec,
					opts: []parquet.WriterOption{parquet.DataPageVersion(v), parquet.PageBufferSize(page),
						parquet.MaxRowsPerRowGroup(1100)},
					fast: true,
				})
			}
		}
		cs = append(cs,
			chunkCase{name: fmt.Sprintf("v%d/one-run", v), runs: 1, rows: 500, codec: &uncompressed.Codec{},
				opts: []parquet.WriterOption{parquet.DataPageVersion(v)}, fast: true},
			// Past DictionaryMaxBytes a writer goes on in PLAIN pages: those
			// chunks are read the generic way.
			chunkCase{name: fmt.Sprintf("v%d/dict-overflow", v), runs: 5000, rows: 4000, codec: &snappy.Codec{},
				opts: []parquet.WriterOption{parquet.DataPageVersion(v), parquet.DictionaryMaxBytes(2000),
					parquet.PageBufferSize(1000)}, fast: true},
		)
	}
	return cs
}

// TestDictChunkMatchesGenericPath reads segments of varied encodings
// (data pages v1 and v2, each codec, small and large pages, one-entry
// dictionaries, dictionaries that overflow into PLAIN pages, plain and
// optional string columns, long and empty strings) through the fast path
// and the generic path: the same calls, and the fast path did read chunks
// wherever it applies.
func TestDictChunkMatchesGenericPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	for _, c := range chunkCases() {
		data := chunkFile(t, chunkRows(rng, c.rows, c.runs), append(c.opts, parquet.Compression(c.codec))...)
		fast, err := requireSameScan(t, data, c.name, true)
		require.Empty(t, err, c.name)
		if c.fast {
			require.Positive(t, fast, "%s: the fast path read no chunk", c.name)
		} else {
			require.Zero(t, fast, "%s: the fast path read a chunk of a codec it does not take", c.name)
		}
	}
	// The committed fixtures (nullable, old and corrupt layouts among them).
	segs, err := filepath.Glob(filepath.Join("..", "testdata", "traces", "*", "*.parquet"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	for _, p := range segs {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		requireSameScan(t, data, p, true)
	}
}

// TestDictChunkCorruptionMatchesGenericPath flips bytes all through
// segments of both data page versions, compressed and not: whatever a
// flip does (a CRC mismatch, a bad header, an index out of range, a row
// count off), the fast path reads the segment as the generic path does,
// failing it with the same error after the same calls.
func TestDictChunkCorruptionMatchesGenericPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 3))
	for _, c := range []chunkCase{
		{name: "v2", stride: 11, runs: 90, rows: 300, codec: &uncompressed.Codec{}, opts: []parquet.WriterOption{parquet.DataPageVersion(2)}},
		{name: "v1-snappy", stride: 23, runs: 90, rows: 300, codec: &snappy.Codec{}, opts: []parquet.WriterOption{parquet.DataPageVersion(1)}},
	} {
		orig := chunkFile(t, chunkRows(rng, c.rows, c.runs), append(c.opts, parquet.Compression(c.codec),
			parquet.PageBufferSize(500), parquet.MaxRowsPerRowGroup(150))...)
		failed := 0
		for off := 0; off < len(orig); off += c.stride {
			data := bytes.Clone(orig)
			data[off] ^= byte(1 + rng.IntN(255))
			if _, err := requireSameScan(t, data, fmt.Sprintf("%s: byte %d of %d", c.name, off, len(orig)), false); err != "" {
				failed++
			}
		}
		require.Positive(t, failed, c.name)
	}
}

// TestLZ4SegmentsAreRefused: parquet-go v0.32.0 reads many valid LZ4_RAW
// pages wrong (stale pooled bytes: a cost of 0, a step of millions, no
// error; two files in three of a generated set), so a segment with an
// LZ4 chunk is refused by name on both paths, before any row is read,
// whatever the page size.
func TestLZ4SegmentsAreRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 5))
	for _, page := range []int{300, 4096, 64 << 10} {
		data := chunkFile(t, chunkRows(rng, 2000, 50), parquet.Compression(&lz4.Codec{}), parquet.PageBufferSize(page))
		for _, generic := range []bool{false, true} {
			res := scanWith(data, generic)
			require.Contains(t, res.err, "LZ4_RAW compression", "page %d generic %v", page, generic)
			require.Contains(t, res.err, "column ts_millis")
			require.Empty(t, res.calls, "nothing read")
		}
		err := readBytes("calls-1-1-00000001.parquet", data, func(calls.Call) error { return nil })
		require.ErrorIs(t, err, ErrUnsupported)
	}
	// A column whose first row group is LZ4 is refused in every row group
	// (parquet-go decodes every chunk with the first one's codec).
	s := &Scanner{meta: &format.FileMetaData{RowGroups: []format.RowGroup{
		{Columns: []format.ColumnChunk{{MetaData: format.ColumnMetaData{Codec: format.Lz4}}}},
		{Columns: []format.ColumnChunk{{MetaData: format.ColumnMetaData{Codec: format.Zstd}}}},
	}}}
	codec, bad := s.lz4Chunk(0, 1)
	require.True(t, bad)
	require.Equal(t, format.Lz4, codec)
	s.meta.RowGroups[0].Columns[0].MetaData.Codec = format.Snappy
	_, bad = s.lz4Chunk(0, 1)
	require.False(t, bad)
}

// TestDictChunkMutationsMatchGenericPath: segments of each page version
// and codec the fast path takes, with one to four bytes overwritten,
// nudged or bit-flipped at random (a fixed seed, 2,000 of them), read the
// same through both paths: a short, deterministic stand-in for
// FuzzDictChunkMatchesGenericPath (a longer run of this loop found the
// panicking gzip decoder of TestDictChunkDecoderPanicFallsBack).
func TestDictChunkMutationsMatchGenericPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 1))
	var seeds [][]byte
	for _, c := range chunkCases() {
		if !strings.Contains(c.name, "page300") {
			seeds = append(seeds, chunkFile(t, chunkRows(rng, 60, 25), append(c.opts, parquet.Compression(c.codec),
				parquet.PageBufferSize(200), parquet.MaxRowsPerRowGroup(40))...))
		}
	}
	fast, checked := 0, 0
	for k := range 2000 {
		d := bytes.Clone(seeds[rng.IntN(len(seeds))])
		for k := 1 + rng.IntN(4); k > 0; k-- {
			i := rng.IntN(len(d) - 4)
			switch rng.IntN(4) {
			case 0:
				d[i] = byte(rng.IntN(256))
			case 1:
				d[i] ^= 1 << rng.IntN(8)
			case 2:
				d[i] = byte(int(d[i]) + rng.IntN(5) - 2)
			default:
				copy(d[i:], []byte{0xff, 0xff, 0xff, 0x7f}[:rng.IntN(4)+1])
			}
		}
		if fuzzSkips(d) {
			continue
		}
		if n, _ := requireSameScan(t, d, "mutated segment", false); n > 0 {
			fast++
		}
		if testing.Short() && k%4 != 0 { // the race pass: one in four
			continue
		}
		if requireSameFailure(t, d, checkSets[rng.IntN(len(checkSets))], "mutated segment") > 0 {
			checked++
		}
	}
	require.Positive(t, fast, "no mutated segment went through the fast path")
	require.Positive(t, checked, "no mutated segment had a chunk checked without decoding")
}

// checkSets are the sets of check columns the check tests try: the cost
// report's (ts_millis and agent_id), and others of each physical kind.
var checkSets = []calls.FieldSet{
	calls.Fields(calls.FieldTSMillis, calls.FieldAgentID),
	calls.Fields(calls.FieldCostMicroUSD, calls.FieldStep, calls.FieldModel),
	calls.Fields(calls.FieldInputTokens, calls.FieldOutputTokens, calls.FieldDecision, calls.FieldUnit, calls.FieldKeyID),
}

// requireSameFailure reads data with a scanner that checks the columns of
// checks instead of decoding them, and requires it to fail exactly when
// the generic path reading every column fails, in the same row group, and
// otherwise to hand out as many calls, their other columns the generic
// path's. It returns how many chunks were checked without decoding.
func requireSameFailure(t testing.TB, data []byte, checks calls.FieldSet, what string) int {
	t.Helper()
	return requireFailureAs(t, scanWith(data, true), data, checks, what)
}

// requireFailureAs is requireSameFailure against want, the generic path's
// reading of data.
func requireFailureAs(t testing.TB, want scanResult, data []byte, checks calls.FieldSet, what string) int {
	t.Helper()
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	sc := NewCheckingScanner(calls.AllFields&^checks, checks, runs, syms)
	var have []calls.Call
	err := sc.ScanBytes("calls-1-1-00000001.parquet", data, func(b *calls.Batch) error {
		for i := range b.Len {
			have = append(have, b.Call(i, runs, syms))
		}
		return nil
	})
	if want.err == "" {
		require.NoError(t, err, "%s: checks %b", what, checks)
		require.Len(t, have, len(want.calls), what)
		for i := range want.calls {
			w, h := stringsOutside(want.calls[i], checks), stringsOutside(have[i], checks)
			require.Equal(t, w, h, "%s: row %d", what, i)
		}
		return sc.checkedChunks
	}
	require.Error(t, err, "%s: checks %b: the generic path fails with %s", what, checks, want.err)
	var we, he *Error
	require.ErrorAs(t, want.errv, &we, what)
	require.ErrorAs(t, err, &he, what)
	require.Equal(t, we.RowGroup, he.RowGroup, "%s: checks %b: %v against %v", what, checks, err, want.err)
	return sc.checkedChunks
}

// stringsOutside is stringsOf(c) with the string columns of checks blank.
func stringsOutside(c calls.Call, checks calls.FieldSet) calls.Call {
	c = stringsOf(c)
	for f, p := range map[calls.Field]*string{calls.FieldRunID: &c.RunID, calls.FieldModel: &c.Model,
		calls.FieldDecision: &c.Decision, calls.FieldAgentID: &c.AgentID, calls.FieldParentRunID: &c.ParentRunID,
		calls.FieldOnBehalfOf: &c.OnBehalfOf, calls.FieldOutcome: &c.Outcome, calls.FieldKeyID: &c.KeyID, calls.FieldUnit: &c.Unit} {
		if checks.Has(f) {
			*p = ""
		}
	}
	return c
}

// TestCheckColumnsFailAsReadingThem: on segments of every encoding, page
// version and codec, whole and with bytes flipped all through them, a
// scanner checking some columns instead of decoding them fails where the
// generic path reading them fails, and checks whole chunks without
// decoding wherever the check applies.
func TestCheckColumnsFailAsReadingThem(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 8))
	checked := 0
	for _, c := range chunkCases() {
		data := chunkFile(t, chunkRows(rng, c.rows, c.runs), append(c.opts, parquet.Compression(c.codec))...)
		sets := checkSets
		if testing.Short() { // the race pass: the cost report's set
			sets = sets[:1]
		}
		for _, fs := range sets {
			checked += requireSameFailure(t, data, fs, c.name)
		}
	}
	require.Positive(t, checked)
	for _, c := range []chunkCase{
		{name: "v2", stride: 29, runs: 90, rows: 300, codec: &uncompressed.Codec{}, opts: []parquet.WriterOption{parquet.DataPageVersion(2)}},
		{name: "v1-zstd", stride: 37, runs: 90, rows: 300, codec: &zstd.Codec{}, opts: []parquet.WriterOption{parquet.DataPageVersion(1)}},
	} {
		orig := chunkFile(t, chunkRows(rng, c.rows, c.runs), append(c.opts, parquet.Compression(c.codec),
			parquet.PageBufferSize(500), parquet.MaxRowsPerRowGroup(150))...)
		if testing.Short() { // the race pass
			c.stride *= 5
		}
		for off := 0; off < len(orig); off += c.stride {
			data := bytes.Clone(orig)
			data[off] ^= byte(1 + rng.IntN(255))
			requireSameFailure(t, data, checkSets[off%len(checkSets)], fmt.Sprintf("%s: byte %d of %d", c.name, off, len(orig)))
		}
	}
}

// panicCodec is a gzip codec whose Decode panics, as parquet-go's gzip
// decoder does on a bad stream header.
type panicCodec struct{ gzip.Codec }

func (*panicCodec) Decode(dst, src []byte) ([]byte, error) { panic("gzip: invalid header") }

// TestDictChunkDecoderPanicFallsBack: a codec that panics makes load say
// no instead of panicking (the scanner would turn the panic into the row
// group's error at open time, before rows and errors the generic path
// meets first).
func TestDictChunkDecoderPanicFallsBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 6))
	data := chunkFile(t, chunkRows(rng, 300, 40), parquet.Compression(&gzip.Codec{}))
	pf, err := OpenParquet(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	m := &pf.Metadata().RowGroups[0].Columns[1].MetaData
	require.Equal(t, "run_id", strings.Join(m.PathInSchema, "."))
	src := chunkSource{r: bytes.NewReader(data), size: int64(len(data)), codec: &gzip.Codec{}, first: format.Gzip}
	var d dictChunk
	require.True(t, d.load(src, m, 300), "a gzip chunk is read")
	src.codec = &panicCodec{}
	require.NotPanics(t, func() { require.False(t, d.load(src, m, 300)) })
}

// TestDictChunkIndexes checks the RLE/bit-packed hybrid decoder against
// hand-made pages, well formed and not.
func TestDictChunkIndexes(t *testing.T) {
	d := &dictChunk{}
	for _, c := range []struct {
		name string
		page []byte
		n    int
		want []int32 // nil: refused
	}{
		{"rle run", []byte{9, 5 << 1, 7, 1}, 5, []int32{263, 263, 263, 263, 263}},
		{"bit-packed bw 3 with padding", []byte{3, 1<<1 | 1, 0b10_001_000, 0b1_100_011_0, 0b111_110_10}, 6, []int32{0, 1, 2, 3, 4, 5}},
		{"bit-packed then rle", []byte{2, 1<<1 | 1, 0b11100100, 0b00000000, 2 << 1, 3}, 10, []int32{0, 1, 2, 3, 0, 0, 0, 0, 3, 3}},
		{"zero-count runs skipped", []byte{2, 0, 1, 3 << 1, 2}, 3, []int32{2, 2, 2}},
		{"bit width 0", []byte{0, 4 << 1}, 4, []int32{0, 0, 0, 0}},
		{"too few values", []byte{9, 4 << 1, 7, 1}, 5, nil},
		{"too many values", []byte{9, 13 << 1, 7, 1}, 5, nil},
		{"truncated run value", []byte{9, 5 << 1, 7}, 5, nil},
		{"truncated bit-packed group", []byte{3, 1<<1 | 1, 0, 0}, 5, nil},
		// Left to cursor.fillStrings, which fails the row as the generic path does.
		{"index out of range kept", []byte{9, 5 << 1, 0x2c, 1}, 5, []int32{300, 300, 300, 300, 300}},
		{"bit width 17", []byte{17, 1<<1 | 1, 0xff, 0xff, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}, 8,
			[]int32{0x1ffff, 0, 0, 0, 0, 0, 0, 0x10000}},
		{"out-of-range padding is dropped", []byte{9, 2 << 1, 1, 0, 1 << 1, 0xff, 1}, 2, []int32{1, 1}},
		{"bit width 33", []byte{33, 2 << 1, 0, 0, 0, 0, 0}, 2, nil},
		{"empty page", nil, 2, nil},
		{"bad varint", []byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 2, nil},
	} {
		d.idx = d.idx[:0]
		ok := d.indexes(c.page, c.n)
		if c.want == nil {
			require.False(t, ok, c.name)
			continue
		}
		require.True(t, ok, c.name)
		require.Equal(t, c.want, d.idx, c.name)
	}
}

// FuzzDictChunkMatchesGenericPath: whatever the bytes, the fast path
// reads a segment as the generic path does (same calls, same error).
// Run for a minute with
//
//	go test ./segment -run '^$' -fuzz '^FuzzDictChunkMatchesGenericPath$' -fuzztime 1m
func FuzzDictChunkMatchesGenericPath(f *testing.F) {
	rng := rand.New(rand.NewPCG(27, 4))
	for _, c := range chunkCases() {
		if strings.Contains(c.name, "page300") {
			continue
		}
		f.Add(chunkFile(f, chunkRows(rng, 60, 25), append(c.opts, parquet.Compression(c.codec),
			parquet.PageBufferSize(200), parquet.MaxRowsPerRowGroup(40))...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if fuzzSkips(data) {
			t.Skip()
		}
		requireSameScan(t, data, "fuzzed segment", false)
		requireSameFailure(t, data, checkSets[len(data)%len(checkSets)], "fuzzed segment")
	})
}

// fuzzSkips reports whether a fuzzed segment is one the generic path
// alone cannot read in bounded time and memory, which is not what the
// fuzz target is after: a footer declaring millions of rows, or a chunk
// said to be LZ4 (parquet-go's LZ4 decoder doubles its output buffer
// without bound on a corrupt block; see docs/traces.md, "Not done").
func fuzzSkips(data []byte) bool {
	pf, err := OpenParquet(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return false
	}
	if pf.NumRows() > 1<<14 {
		return true
	}
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			if c := cc.MetaData.Codec; c == format.Lz4 || c == format.Lz4Raw {
				return true
			}
		}
	}
	return false
}

// TestCheckedIndexPastDictionaryFails: a dictionary index past the end of
// its dictionary, in a chunk that is otherwise well formed (its checksum
// made to match), fails the row group when the column is checked as when
// it is read: the check decodes the indexes and bounds them.
func TestCheckedIndexPastDictionaryFails(t *testing.T) {
	rows := chunkRows(rand.New(rand.NewPCG(27, 9)), 200, 20)
	for i := range rows {
		rows[i].AgentID = []string{"agent://x/a", "agent://x/b", "agent://x/c"}[min(2, i/60)] // runs of one index: RLE
	}
	data := chunkFile(t, rows, parquet.DataPageVersion(2), parquet.Compression(&uncompressed.Codec{}))
	m := firstChunkOf(t, data, "agent_id")
	// The data page after the dictionary page: its body is a bit width
	// (2, for 3 entries) and RLE runs; the first run's value becomes 3.
	var d dictChunk
	p := data[m.DictionaryPageOffset:]
	_, p, ok := d.page(p)
	require.True(t, ok)
	hdrAt := len(data) - len(p)
	body, rest, ok := d.page(p)
	require.True(t, ok)
	require.Equal(t, format.DataPageV2, d.hdr.Type)
	bodyAt := len(data) - len(rest) - len(body)
	require.Equal(t, byte(2), data[bodyAt], "bit width")
	u, k := binary.Uvarint(data[bodyAt+1:])
	require.Zero(t, u&1, "an RLE run first")
	valueAt := bodyAt + 1 + k
	require.Equal(t, byte(0), data[valueAt])
	oldCRC := zigzag(d.hdr.CRC)
	crcAt := bytes.Index(data[hdrAt:bodyAt], oldCRC) + hdrAt
	require.Greater(t, crcAt, hdrAt)

	bad := bytes.Clone(data)
	bad[valueAt] = 3
	sum := int32(crc32.ChecksumIEEE(bad[bodyAt : bodyAt+len(body)]))
	newCRC := zigzag(sum)
	if len(newCRC) != len(oldCRC) {
		t.Skipf("the new checksum's varint is %d bytes, not %d", len(newCRC), len(oldCRC))
	}
	copy(bad[crcAt:], newCRC)

	want := scanWith(bad, true)
	require.Contains(t, want.err, "dictionary index 3 out of range", "the generic path fails on the index")
	require.Positive(t, requireSameFailure(t, data, calls.Fields(calls.FieldAgentID), "whole"), "the whole chunk is checked without decoding")
	requireSameFailure(t, bad, calls.Fields(calls.FieldAgentID), "an index past the dictionary")
}

// zigzag is the Thrift compact encoding of an i32 (a zigzag varint).
func zigzag(v int32) []byte {
	return binary.AppendUvarint(nil, uint64(uint32((v<<1)^(v>>31))))
}

// TestPlainChunkHeaderMutationsMatchGenericPath changes each of the first
// 24 bytes (8 with -short) of the first page header of every numeric chunk (nudged by +-2,
// which moves a zigzag varint's value by one, and with a bit flipped): a
// value or row count, a size or an encoding changes, or the header stops
// decoding. A checking scanner (verifying such chunks whole) must read or
// fail each file as the generic path does, and so must the fast path. Random
// flips over a whole file rarely land there: most land in page bodies,
// which the checksums guard.
func TestPlainChunkHeaderMutationsMatchGenericPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 10))
	tried, failed, read := 0, 0, 0
	for _, v := range []int{1, 2} {
		for _, codec := range []compress.Codec{&uncompressed.Codec{}, &snappy.Codec{}} {
			data := chunkFile(t, chunkRows(rng, 300, 20), parquet.DataPageVersion(v), parquet.Compression(codec),
				parquet.PageBufferSize(400), parquet.MaxRowsPerRowGroup(120))
			pf, err := OpenParquet(bytes.NewReader(data), int64(len(data)))
			require.NoError(t, err)
			for _, cc := range pf.Metadata().RowGroups[1].Columns {
				m := cc.MetaData
				if m.Type != format.Int64 && m.Type != format.Int32 {
					continue
				}
				var d dictChunk
				p := data[m.DataPageOffset:]
				body, rest, ok := d.page(p)
				require.True(t, ok)
				at, hlen := int(m.DataPageOffset), len(p)-len(rest)-len(body)
				first := min(hlen, 24)
				if testing.Short() { // the race pass
					first /= 3
				}
				for i := at; i < at+first; i++ {
					for _, mutate := range []func(byte) byte{
						func(b byte) byte { return b + []byte{2, 254}[rng.IntN(2)] }, func(b byte) byte { return b ^ 1<<rng.IntN(8) },
					} {
						mutated := bytes.Clone(data)
						mutated[i] = mutate(mutated[i])
						what := fmt.Sprintf("v%d %s %s header byte %d", v, codec.CompressionCodec(), m.PathInSchema, i-at)
						_, err := requireSameScan(t, mutated, what, false)
						want := scanWith(mutated, true)
						for _, fs := range checkSets {
							read += requireFailureAs(t, want, mutated, fs, what)
						}
						tried++
						if err != "" {
							failed++
						}
					}
				}
			}
		}
	}
	t.Logf("%d header mutations, %d failing the file, %d chunks checked without decoding", tried, failed, read)
	require.Greater(t, tried, 100)
	require.Positive(t, failed)
	require.Less(t, failed, tried, "some mutations leave a file the generic path reads")
}

// TestPageSizePastChunkRefusedBeforeAllocating: a page header declaring a
// compressed size of 2 GB in a column read page by page (the varint
// lengthened, the body shortened to keep every offset) fails the row group
// naming the column, without parquet-go allocating the declared size first
// (2.9 GB allocated without the check).
func TestPageSizePastChunkRefusedBeforeAllocating(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 11))
	data := chunkFile(t, chunkRows(rng, 300, 20), parquet.DataPageVersion(1), parquet.Compression(&uncompressed.Codec{}))
	m := firstChunkOf(t, data, "cost_microusd")
	// The header opens with fields 1-3, each an i32 (0x15 and a zigzag
	// varint): type, uncompressed size, compressed size.
	at := int(m.DataPageOffset)
	i := at
	for f := range 2 {
		require.Equal(t, byte(0x15), data[i], "field %d", f+1)
		_, k := binary.Uvarint(data[i+1:])
		require.Positive(t, k)
		i += 1 + k
	}
	require.Equal(t, byte(0x15), data[i], "field 3")
	_, k := binary.Uvarint(data[i+1:])
	huge := binary.AppendUvarint(nil, uint64(2_000_000_000)<<1)
	require.Greater(t, len(huge), k)
	grow := len(huge) - k
	bad := append(append(bytes.Clone(data[:i+1]), huge...), data[i+1+k:]...)
	// Drop grow bytes at the end of the page body so that every later
	// offset holds.
	_, rest, ok := (&dictChunk{}).page(data[at:])
	require.True(t, ok)
	bodyEnd := len(data) - len(rest) + grow
	bad = append(bad[:bodyEnd-grow], bad[bodyEnd:]...)
	require.Len(t, bad, len(data))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, generic := range []bool{false, true} {
		res := scanWith(bad, generic)
		require.Contains(t, res.err, "column cost_microusd")
		require.Contains(t, res.err, "declares 2000000000 bytes, past its column chunk's end")
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(256<<20), "bytes allocated to refuse the page")
}

// firstChunkOf returns the metadata of column's chunk in row group 0 of
// the segment data.
func firstChunkOf(t *testing.T, data []byte, column string) *format.ColumnMetaData {
	t.Helper()
	pf, err := OpenParquet(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	for i := range pf.Metadata().RowGroups[0].Columns {
		if c := &pf.Metadata().RowGroups[0].Columns[i].MetaData; strings.Join(c.PathInSchema, ".") == column {
			return c
		}
	}
	t.Fatalf("no column %s", column)
	return nil
}
