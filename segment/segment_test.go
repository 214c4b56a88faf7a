package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/verdryx/verdryx/calls"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/tracegen"
)

func segWriteRows[T any](t *testing.T, path string, rows []T, opts ...parquet.WriterOption) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := parquet.NewGenericWriter[T](f, opts...)
	_, err = w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

type segNoDecision struct {
	TSMillis     int64  `parquet:"ts_millis"`
	RunID        string `parquet:"run_id"`
	Model        string `parquet:"model"`
	InputTokens  uint64 `parquet:"input_tokens"`
	OutputTokens uint64 `parquet:"output_tokens"`
	CostMicroUSD int64  `parquet:"cost_microusd"`
	Step         uint32 `parquet:"step"`
}

type segStringCost struct {
	TSMillis     int64  `parquet:"ts_millis"`
	RunID        string `parquet:"run_id"`
	Model        string `parquet:"model"`
	Decision     string `parquet:"decision"`
	InputTokens  uint64 `parquet:"input_tokens"`
	OutputTokens uint64 `parquet:"output_tokens"`
	CostMicroUSD string `parquet:"cost_microusd"`
	Step         uint32 `parquet:"step"`
}

func segReduceFile(t *testing.T, path string) error {
	t.Helper()
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	sc := NewScanner(r.Fields(), r.RunSymbols(), r.Symbols())
	return sc.ScanFile(path, func(b *calls.Batch) error { r.AddBatch(b); return nil })
}

func TestSegmentBadFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, tracegen.SegmentName(1, 1, 0))
	segWriteRows(t, missing, []segNoDecision{{TSMillis: 1, RunID: "r"}})
	wrongType := filepath.Join(dir, tracegen.SegmentName(1, 2, 0))
	segWriteRows(t, wrongType, []segStringCost{{TSMillis: 1, RunID: "r", CostMicroUSD: "12"}})
	garbage := filepath.Join(dir, tracegen.SegmentName(1, 3, 0))
	require.NoError(t, os.WriteFile(garbage, []byte("PAR1 this is not a parquet file at all PAR1"), 0o644))
	truncated := filepath.Join(dir, tracegen.SegmentName(1, 4, 0))
	good, err := os.ReadFile(filepath.Join(segFixtureDir("basic"), "calls-1a2b-187a0000-00000000.parquet"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(truncated, good[:len(good)/2], 0o644))
	corruptRG := filepath.Join(segFixtureDir("corrupt"), "calls-9-20-00000002.parquet")

	cases := []struct {
		name     string
		path     string
		sentinel error
		contains []string
	}{
		{"missing column", missing, ErrMissingColumn, []string{filepath.Base(missing), "row group 0", "column decision"}},
		{"wrong type", wrongType, ErrColumnType, []string{filepath.Base(wrongType), "row group 0", "column cost_microusd", "BYTE_ARRAY", "INT64"}},
		{"garbage bytes", garbage, ErrCorrupt, []string{filepath.Base(garbage)}},
		{"truncated", truncated, ErrCorrupt, []string{filepath.Base(truncated)}},
		{"corrupt row group", corruptRG, ErrCorrupt, []string{"calls-9-20-00000002.parquet", "row group 1", "column ts_millis"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := segReduceFile(t, tc.path)
			require.Error(t, err)
			require.ErrorIs(t, err, tc.sentinel)
			require.True(t, IsError(err))
			for _, s := range tc.contains {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestReadSegmentRoundTrip(t *testing.T) {
	for _, fx := range tracegen.Fixtures() {
		for _, s := range fx.Segments {
			if s.CorruptRowGroup >= 0 {
				continue
			}
			t.Run(fx.Name+"/"+s.Name, func(t *testing.T) {
				var have []calls.Call
				err := Read(filepath.Join(segFixtureDir(fx.Name), s.Name), func(c calls.Call) error {
					have = append(have, c)
					return nil
				})
				require.NoError(t, err)
				want := make([]calls.Call, len(s.Calls))
				for i, c := range s.Calls {
					switch s.Layout {
					case tracegen.Old8:
						c = calls.Call{TSMillis: c.TSMillis, RunID: c.RunID, HasRunID: true, Model: c.Model, Decision: c.Decision,
							InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CostMicroUSD: c.CostMicroUSD, Step: c.Step, HasStep: true}
					case tracegen.NoRunID:
						c.HasRunID, c.RunID = false, ""
					}
					want[i] = c
				}
				require.Equal(t, want, have)
			})
		}
	}
}

func TestReadSegmentStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Read(filepath.Join(segFixtureDir("basic"), "calls-1a2b-187a0000-00000000.parquet"), func(calls.Call) error {
		n++
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, n)
}

// TestSegmentCorruptionSweep flips bytes all through a multi-row-group
// segment: every read must end in a clean result or a *Error, never
// a panic or a hang.
func TestSegmentCorruptionSweep(t *testing.T) {
	src := filepath.Join(segFixtureDir("rowgroups"), "calls-7-10-00000001.parquet")
	orig, err := os.ReadFile(src)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "calls-1-1-00000001.parquet")
	bad := 0
	for off := 0; off < len(orig); off += 13 {
		data := append([]byte(nil), orig...)
		data[off] ^= 0xa5
		require.NoError(t, os.WriteFile(path, data, 0o644))
		if err := segReduceFile(t, path); err != nil {
			require.True(t, IsError(err), "offset %d: %v", off, err)
			require.Contains(t, err.Error(), "calls-1-1-00000001.parquet")
			bad++
		}
	}
	require.Positive(t, bad)
}

// segAllDict dictionary-encodes every column, integers included, as
// arrow-rs writers do by default.
type segAllDict struct {
	TSMillis     int64   `parquet:"ts_millis,dict"`
	RunID        string  `parquet:"run_id,dict"`
	Model        string  `parquet:"model,dict"`
	Decision     string  `parquet:"decision,dict"`
	InputTokens  uint64  `parquet:"input_tokens,dict"`
	OutputTokens uint64  `parquet:"output_tokens,dict"`
	CostMicroUSD int64   `parquet:"cost_microusd,dict"`
	Step         uint32  `parquet:"step,dict"`
	Outcome      string  `parquet:"outcome,dict"`
	ToolCalls    *uint32 `parquet:"tool_calls,optional,dict"`
}

func TestSegmentDictionaryEncodedIntegers(t *testing.T) {
	dir := t.TempDir()
	var rows []segAllDict
	var want []calls.Call
	for i := range 500 {
		run := []string{"d1", "d2"}[i%2]
		row := segAllDict{TSMillis: int64(1000 + i%7), RunID: run, Model: "m", Decision: "allow",
			InputTokens: uint64(i % 5), OutputTokens: 3, CostMicroUSD: int64(10 + i%3), Step: uint32(i / 2)}
		if i%4 == 1 {
			v := uint32(i % 3)
			row.ToolCalls = &v
		}
		if i >= 498 {
			row.Outcome = map[string]string{"d1": "case_resolved", "d2": "abandoned"}[run]
		}
		rows = append(rows, row)
		want = append(want, calls.Call{TSMillis: row.TSMillis, RunID: run, HasRunID: true, Model: "m", Decision: "allow",
			InputTokens: row.InputTokens, OutputTokens: 3, CostMicroUSD: row.CostMicroUSD, Step: row.Step, HasStep: true,
			Outcome: row.Outcome, ToolCalls: row.ToolCalls})
	}
	path := filepath.Join(dir, tracegen.SegmentName(1, 1, 0))
	segWriteRows(t, path, rows, parquet.PageBufferSize(256), parquet.MaxRowsPerRowGroup(150))
	var have []calls.Call
	require.NoError(t, Read(path, func(c calls.Call) error { have = append(have, c); return nil }))
	require.Equal(t, want, have)
}

func segFixtureDir(name string) string { return filepath.Join("..", "testdata", "traces", name) }

func TestTraceFixtureIgnoresOtherFiles(t *testing.T) {
	segs, ignored, err := List(segFixtureDir("rowgroups"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	// README.txt, two misnamed .parquet files and the two golden files.
	require.Equal(t, 5, ignored)
}

func TestTraceFixtureSegmentOrder(t *testing.T) {
	segs, _, err := List(segFixtureDir("split"))
	require.NoError(t, err)
	var names []string
	for _, s := range segs {
		names = append(names, filepath.Base(s.Path))
	}
	// nanos 0xff sorts before 0x100 although "100" < "ff" as text.
	require.Equal(t, []string{"calls-1-ff-00000001.parquet", "calls-1-100-00000000.parquet"}, names)
	require.True(t, strings.Compare(names[1], names[0]) < 0)
}

// TestListMixedNamings: a directory an earlier gateway wrote and a current
// one continued lists every segment of both namings, the earlier ones
// first by their counter (numerically, not as text), then the current ones
// by the time in their names; other files are ignored and counted.
func TestListMixedNamings(t *testing.T) {
	dir := t.TempDir()
	names := []string{
		"calls-00000010.parquet", "calls-2-100-00000000.parquet", "calls-00000002.parquet",
		"calls-1-ff-00000003.parquet", "calls-100000000.parquet", "calls-0000003.parquet", "notes.parquet",
	}
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644))
	}
	segs, ignored, err := List(dir)
	require.NoError(t, err)
	require.Equal(t, 2, ignored)
	var got []string
	for _, s := range segs {
		got = append(got, filepath.Base(s.Path))
		require.Equal(t, strings.Count(got[len(got)-1], "-") == 1, s.Legacy, got[len(got)-1])
		require.Equal(t, int64(len(got[len(got)-1])), s.Size)
	}
	require.Equal(t, []string{"calls-00000002.parquet", "calls-00000010.parquet", "calls-100000000.parquet",
		"calls-1-ff-00000003.parquet", "calls-2-100-00000000.parquet"}, got)
	for i := 1; i < len(segs); i++ {
		require.Negative(t, Compare(segs[i-1], segs[i]))
	}
	st, ok, err := Stat(filepath.Join(dir, "calls-00000010.parquet"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, segs[1], st)
	_, ok, err = Stat(filepath.Join(dir, "notes.parquet"))
	require.NoError(t, err)
	require.False(t, ok)
}

// TestScanRowGroupKeepsFileOpen: ScanRowGroup keeps a segment open for the
// next row group of the same path; reading the row groups of the fixtures
// in order, in reverse and alternating between files, with a failing row
// group in between, gives each row group's rows and error as a fresh
// Scanner does for that row group alone.
func TestScanRowGroupKeepsFileOpen(t *testing.T) {
	var paths []string
	for _, dir := range []string{"rowgroups", "corrupt", "split"} {
		segs, _, err := List(segFixtureDir(dir))
		require.NoError(t, err)
		for _, s := range segs {
			paths = append(paths, s.Path)
		}
	}
	type unit struct {
		path string
		gi   int
	}
	var units []unit
	for _, p := range paths {
		rows, err := RowGroups(p)
		require.NoError(t, err)
		for gi := range len(rows) + 1 { // and one past the end
			units = append(units, unit{p, gi})
		}
	}
	scan := func(sc *Scanner, runs, syms *calls.Symbols, u unit) string {
		var out strings.Builder
		err := sc.ScanRowGroup(u.path, u.gi, func(b *calls.Batch) error {
			for i := range b.Len {
				fmt.Fprintf(&out, "%s %d %d %s|", runs.Name(b.RunID[i]), b.TSMillis[i], b.CostMicroUSD[i], syms.Name(b.Outcome[i]))
			}
			return nil
		})
		fmt.Fprintf(&out, "err=%v", err)
		return out.String()
	}
	want := map[unit]string{}
	for _, u := range units {
		runs, syms := calls.NewSymbols(), calls.NewSymbols()
		sc := NewScanner(calls.AllFields, runs, syms)
		want[u] = scan(sc, runs, syms, u)
		require.NoError(t, sc.Close())
	}
	orders := map[string][]unit{"in order": units}
	rev := slices.Clone(units)
	slices.Reverse(rev)
	orders["reversed"] = rev
	var alt []unit
	for i := range units {
		alt = append(alt, units[i], units[len(units)-1-i])
	}
	orders["alternating"] = alt
	for name, order := range orders {
		runs, syms := calls.NewSymbols(), calls.NewSymbols()
		sc := NewScanner(calls.AllFields, runs, syms)
		for _, u := range order {
			require.Equal(t, want[u], scan(sc, runs, syms, u), "%s: %s row group %d", name, filepath.Base(u.path), u.gi)
		}
		require.NoError(t, sc.Close())
		require.NoError(t, sc.Close(), "closing twice")
	}
	require.Contains(t, fmt.Sprint(want), "corrupt segment", "the fixtures include a failing row group")
}

// TestUseHugePagesReachesEveryBuffer: UseHugePages, called on a fresh
// scanner, marks every column's cursor, intern cache and chunk decoder
// (made later, on the first dictionary chunk) to ask for huge pages, and
// a scanner without it marks none; either way the rows read are the same.
func TestUseHugePagesReachesEveryBuffer(t *testing.T) {
	segs, _, err := List(segFixtureDir("rowgroups"))
	require.NoError(t, err)
	read := func(huge bool) (string, *Scanner) {
		runs, syms := calls.NewSymbols(), calls.NewSymbols()
		sc := NewScanner(calls.AllFields, runs, syms)
		if huge {
			sc.UseHugePages()
		}
		var out strings.Builder
		for _, s := range segs {
			err := sc.ScanRowGroup(s.Path, 0, func(b *calls.Batch) error {
				for i := range b.Len {
					fmt.Fprintf(&out, "%s %d %s|", runs.Name(b.RunID[i]), b.CostMicroUSD[i], syms.Name(b.Outcome[i]))
				}
				return nil
			})
			require.NoError(t, err)
		}
		require.NoError(t, sc.Close())
		return out.String(), sc
	}
	plain, off := read(false)
	hinted, on := read(true)
	require.Equal(t, plain, hinted)
	chunks := 0
	for f := range calls.NumFields {
		for _, c := range []struct {
			sc   *Scanner
			want bool
		}{{off, false}, {on, true}} {
			cur := &c.sc.cols[f]
			if !c.sc.fields.Has(f) {
				continue
			}
			require.Equal(t, c.want, cur.huge, "cursor %s", f.Name())
			if cur.cache != nil {
				require.Equal(t, c.want, cur.cache.huge, "cache %s", f.Name())
			}
			if cur.chunk != nil {
				require.Equal(t, c.want, cur.chunk.huge, "chunk %s", f.Name())
				chunks++
			}
		}
	}
	require.Positive(t, chunks, "some chunk was read by the fast path (else the chunks went untested)")
}

// TestFooterLengthCheckedBeforeReading: a trailer declaring a footer
// longer than the file is refused from its 8 bytes (parquet-go would
// first allocate the declared length: 827 MB for "PAR1PAR1", 4 GiB at
// most), as are files too short or without the magic.
func TestFooterLengthCheckedBeforeReading(t *testing.T) {
	huge := append([]byte("PAR1xxxxxxxx"), 0xf0, 0xff, 0xff, 0xff, 'P', 'A', 'R', '1')
	for _, c := range []struct {
		data []byte
		want string
	}{
		{[]byte("PAR1PAR1"), "too short"},
		{[]byte("PAR1\x00\x00\x00\x00PAR1"), "metadata"}, // an empty footer: parquet-go refuses it
		{huge, "declared length 4294967280 bytes, but the file has 8 bytes before it"},
		{append([]byte("PAR1"), make([]byte, 12)...), "does not end in the Parquet magic"},
	} {
		_, err := OpenParquet(bytes.NewReader(c.data), int64(len(c.data)))
		require.ErrorContains(t, err, c.want, "%q", c.data)
		err = readBytes("calls-1-1-00000001.parquet", c.data, func(calls.Call) error { return nil })
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "calls-1-1-00000001.parquet")
	}
}

// TestSegmentCostOverMaximum: a row costing more than the per-call maximum
// fails its segment, naming the file, row group, column and row.
func TestSegmentCostOverMaximum(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "calls-00000000.parquet")
	cl := []calls.Call{
		{RunID: "r1", HasRunID: true, Decision: "allow", CostMicroUSD: calls.MaxCallMicroUSD, Step: 1, HasStep: true},
		{RunID: "r1", HasRunID: true, Decision: "allow", CostMicroUSD: calls.MaxCallMicroUSD + 1, Step: 2, HasStep: true},
	}
	require.NoError(t, tracegen.WriteFile(path, tracegen.Current, cl, tracegen.Options{}))
	err := segReduceFile(t, path)
	require.True(t, IsError(err), "%v", err)
	require.ErrorContains(t, err, "calls-00000000.parquet")
	require.ErrorContains(t, err, "column cost_microusd: row 1: field cost_microusd: 1000000000001 is over the per-call maximum")
	require.NoError(t, tracegen.WriteFile(path, tracegen.Current, cl[:1], tracegen.Options{}))
	require.NoError(t, segReduceFile(t, path))
}
