package rowbatch

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
)

// randomCalls returns n calls with every kind of value a column can hold:
// nulls, zero and extreme integers, shared and distinct strings.
func randomCalls(r *rand.Rand, n int) []calls.Call {
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	ints := []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, 1_700_000_000_000}
	out := make([]calls.Call, n)
	for i := range out {
		c := &out[i]
		c.TSMillis = ints[r.IntN(len(ints))] + int64(r.IntN(3))
		c.RunID, c.HasRunID = fmt.Sprintf("run-%d", r.IntN(7)), true
		c.Model = pick("gpt-4o", "claude", "")
		c.Decision = pick("allow", "budget_exceeded", "wardryx_deny")
		c.InputTokens, c.OutputTokens = r.Uint64N(1<<40), uint64(r.IntN(2))
		c.CostMicroUSD, c.SavedMicroUSD = ints[r.IntN(len(ints))], -ints[r.IntN(len(ints))]
		c.Step, c.HasStep = uint32(r.IntN(5)), r.IntN(4) != 0
		if !c.HasStep {
			c.Step = 0
		}
		c.AgentID = pick("a", "b", "ünïcode ✓", "")
		c.ParentRunID, c.OnBehalfOf = pick("", "p"), pick("", "o")
		c.Outcome, c.KeyID, c.Unit = pick("", "resolved", "failed"), pick("", "k"), pick("", "usd")
		if r.IntN(3) != 0 {
			v := uint32(r.IntN(1 << 20))
			c.ToolCalls = &v
		}
	}
	return out
}

func encodeCalls(h Header, fields calls.FieldSet, rows []uint64, cs []calls.Call) []byte {
	var b Builder
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	for i := range cs {
		b.appendCall(&cs[i], rows[i], runs, syms)
	}
	return b.Encode(nil, h, fields, 0, b.Len(), runs, syms)
}

// masked returns c as it decodes when only fields were sent.
func masked(c calls.Call, fields calls.FieldSet) calls.Call {
	var z calls.Call
	if !fields.Has(calls.FieldRunID) {
		c.RunID, c.HasRunID = z.RunID, false
	}
	if !fields.Has(calls.FieldStep) {
		c.Step, c.HasStep = 0, false
	}
	if !fields.Has(calls.FieldToolCalls) {
		c.ToolCalls = nil
	}
	if !fields.Has(calls.FieldOutcome) {
		c.Outcome = ""
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + r.IntN(300)
		if trial%10 == 0 {
			n = 1
		}
		cs := randomCalls(r, n)
		if trial%7 == 0 { // every row the same: constant columns
			for i := range cs {
				cs[i] = cs[0]
			}
		}
		rows := make([]uint64, n)
		row := r.Uint64N(1000)
		for i := range rows {
			rows[i] = row
			row += 1 + r.Uint64N(5)
		}
		fields := calls.AllFields
		if trial%5 == 0 {
			fields &^= calls.Fields(calls.FieldRunID, calls.FieldStep, calls.FieldToolCalls, calls.FieldOutcome)
		}
		h := Header{Digest: sha256.Sum256([]byte{byte(trial)}), Segment: "1-2-3.parquet", Parts: 8, Part: trial % 8}
		enc := encodeCalls(h, fields, rows, cs)
		var got Batch
		require.NoError(t, Decode(enc, &got), "trial %d", trial)
		require.Equal(t, h, got.Header)
		require.Equal(t, fields, got.Fields)
		require.Equal(t, rows, got.Rows)
		for i := range cs {
			require.Equal(t, masked(cs[i], fields), got.Calls[i], "trial %d row %d", trial, i)
		}
		// Decoding into the same Batch again (reused slices) gives the same.
		require.NoError(t, Decode(enc, &got))
		require.Equal(t, rows, got.Rows)
	}
}

func TestSubRangesEncodeTheirOwnRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cs := randomCalls(r, 100)
	var b Builder
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	for i := range cs {
		b.appendCall(&cs[i], uint64(10+2*i), runs, syms)
	}
	h := Header{Segment: "s", Parts: 1}
	for _, rg := range [][2]int{{0, 100}, {0, 1}, {37, 64}, {99, 100}} {
		var got Batch
		require.NoError(t, Decode(b.Encode(nil, h, calls.AllFields, rg[0], rg[1], runs, syms), &got))
		require.Len(t, got.Calls, rg[1]-rg[0])
		require.Equal(t, uint64(10+2*rg[0]), got.Rows[0])
		require.Equal(t, cs[rg[0]:rg[1]], got.Calls)
	}
}

// A batch of a busy fleet's rows costs a few bytes per row: constant
// columns cost nothing per row, repeated strings an index.
func TestEncodingIsCompact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	n := 4096
	cs := make([]calls.Call, n)
	rows := make([]uint64, n)
	ts := int64(1_760_000_000_000)
	for i := range cs {
		ts += int64(r.IntN(50))
		cs[i] = calls.Call{TSMillis: ts, RunID: fmt.Sprintf("run-%06d", r.IntN(500)), HasRunID: true, Model: "gpt-4o-mini",
			Decision: "allow", InputTokens: uint64(200 + r.IntN(2000)), OutputTokens: uint64(50 + r.IntN(500)),
			CostMicroUSD: int64(r.IntN(3000)), Step: uint32(r.IntN(20)), HasStep: true, AgentID: "agent-7"}
		rows[i] = uint64(8 * i)
	}
	enc := encodeCalls(Header{Segment: "x", Parts: 8}, calls.AllFields, rows, cs)
	perRow := float64(len(enc)) / float64(n)
	t.Logf("%d rows in %d bytes: %.1f bytes per row", n, len(enc), perRow)
	require.Less(t, perRow, 16.0)
}

func TestDecodeRefusesMalformedBatches(t *testing.T) {
	good := encodeCalls(Header{Segment: "s", Parts: 4, Part: 1}, calls.AllFields, []uint64{3, 4}, randomCalls(rand.New(rand.NewPCG(7, 8)), 2))
	var b Batch
	require.NoError(t, Decode(good, &b))
	cases := map[string][]byte{
		"json":      []byte(`{"run_id":"r"}`),
		"version":   append([]byte(Magic+"\x02"), good[5:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
		"short":     good[:20],
	}
	z := Compress(nil, good)
	cases["compressed truncated"] = z[:len(z)-3]
	cases["compressed garbage"] = append([]byte(magicS2), 0xff, 0xff, 0xff, 0x7f, 1, 2, 3)
	cases["compressed bomb"] = Compress(nil, make([]byte, maxDecoded+1))
	cases["compressed twice"] = Compress(nil, z)
	cases["compressed json"] = Compress(nil, []byte(`{"run_id":"r"}`))
	for name, in := range cases {
		err := Decode(in, &b)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, ErrFormat), "%s: %v", name, err)
	}
}

// TestCompressedBatchesDecodeTheSame: a compressed batch decodes to what
// its encoding does, with a reused Batch (whose buffer the next batch
// overwrites: nothing decoded before may alias it), and is smaller.
func TestCompressedBatchesDecodeTheSame(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	var reused Batch
	var kept []calls.Call
	var want []calls.Call
	for trial := range 20 {
		n := 1 + r.IntN(3000)
		rows := make([]uint64, n)
		for i := range rows {
			rows[i] = uint64(trial*10000 + i*2)
		}
		enc := encodeCalls(Header{Segment: "seg", Parts: 8, Part: 3}, calls.AllFields, rows, randomCalls(r, n))
		var plain Batch
		require.NoError(t, Decode(enc, &plain))
		z := Compress([]byte("prefix"), enc)
		require.Equal(t, "prefix", string(z[:6]))
		require.True(t, IsBatch(z[6:]))
		require.NoError(t, Decode(z[6:], &reused), "trial %d", trial)
		require.Equal(t, plain.Header, reused.Header)
		require.Equal(t, plain.Rows, reused.Rows)
		require.Equal(t, plain.Calls, reused.Calls)
		if n > 500 {
			assert.Less(t, len(z), len(enc), "trial %d: compressed is smaller", trial)
		}
		kept = append(kept, reused.Calls[0])
		want = append(want, plain.Calls[0])
	}
	require.Equal(t, want, kept, "calls decoded from earlier compressed batches are intact")
}

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 3, 50} {
		rows := make([]uint64, n)
		for i := range rows {
			rows[i] = uint64(i * 3)
		}
		f.Add(encodeCalls(Header{Segment: "seg", Parts: 8, Part: 2}, calls.AllFields, rows, randomCalls(r, n)))
	}
	f.Add([]byte(Magic + "\x01"))
	f.Add(Compress(nil, encodeCalls(Header{Segment: "z", Parts: 2, Part: 1}, calls.AllFields, []uint64{1, 2}, randomCalls(r, 2))))
	f.Fuzz(func(t *testing.T, in []byte) {
		var b Batch
		if err := Decode(in, &b); err != nil {
			return
		}
		// What decodes encodes back to a batch that decodes the same.
		again := encodeCalls(b.Header, b.Fields, b.Rows, b.Calls)
		var b2 Batch
		if err := Decode(again, &b2); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if len(b2.Calls) != len(b.Calls) {
			t.Fatalf("%d calls, re-decoded %d", len(b.Calls), len(b2.Calls))
		}
		for i := range b.Calls {
			if fmt.Sprint(b.Calls[i]) != fmt.Sprint(b2.Calls[i]) && !toolEqual(b.Calls[i], b2.Calls[i]) {
				t.Fatalf("row %d: %+v re-decoded as %+v", i, b.Calls[i], b2.Calls[i])
			}
		}
	})
}

func toolEqual(a, b calls.Call) bool {
	if (a.ToolCalls == nil) != (b.ToolCalls == nil) || a.ToolCalls != nil && *a.ToolCalls != *b.ToolCalls {
		return false
	}
	a.ToolCalls, b.ToolCalls = nil, nil
	return a == b
}

// TestReusedBatchDecodesLikeAFreshOne: one Batch decoding batches of
// varying columns, sizes and nulls in turn (its calls zeroed only when an
// earlier batch wrote another column) gives what a fresh Batch gives; with
// Intern set, the strings but run ids are its answers, asked once per
// distinct string.
func TestReusedBatchDecodesLikeAFreshOne(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 7))
	var reused Batch
	for trial := range 300 {
		n := 1 + r.IntN(200)
		cs := randomCalls(r, n)
		rows := make([]uint64, n)
		for i := range rows {
			rows[i] = uint64(i)
		}
		fields := calls.AllFields
		if r.IntN(2) == 0 {
			fields &^= calls.Fields(calls.FieldModel, calls.FieldKeyID, calls.FieldUnit, calls.FieldInputTokens)
		}
		if r.IntN(3) == 0 {
			fields &^= calls.Fields(calls.FieldRunID, calls.FieldStep, calls.FieldToolCalls, calls.FieldOutcome)
		}
		enc := encodeCalls(Header{Segment: "s", Parts: 1}, fields, rows, cs)
		var fresh Batch
		require.NoError(t, Decode(enc, &fresh))
		asked := map[string]int{}
		reused.Intern = nil
		if trial%2 == 0 {
			reused.Intern = func(s string) string { asked[s]++; return "i:" + s }
		}
		require.NoError(t, Decode(enc, &reused), "trial %d", trial)
		for i := range fresh.Calls {
			want := fresh.Calls[i]
			if reused.Intern != nil {
				for _, p := range []*string{&want.Model, &want.Decision, &want.AgentID, &want.ParentRunID, &want.OnBehalfOf, &want.Outcome, &want.KeyID, &want.Unit} {
					if *p != "" {
						*p = "i:" + *p
					}
				}
			}
			require.Equal(t, want, reused.Calls[i], "trial %d row %d", trial, i)
		}
		for s, k := range asked {
			require.Equal(t, 1, k, "trial %d: %q interned %d times", trial, s, k)
		}
	}
}

// TestAppendRowsIsAppendOfEachRow: a builder fed rows a column at a time
// (AppendRows, some of the batch's rows, columns absent or with nulls)
// encodes what one fed the same rows one by one (Append) does.
func TestAppendRowsIsAppendOfEachRow(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 9))
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	for trial := range 100 {
		n := 1 + r.IntN(50)
		src := &calls.Batch{Len: n, HasRunID: true}
		ids := func() []int32 {
			v := make([]int32, n)
			for i := range v {
				v[i] = syms.InternString(fmt.Sprint("s", r.IntN(5)))
			}
			return v
		}
		src.TSMillis, src.CostMicroUSD = make([]int64, n), make([]int64, n)
		src.RunID, src.Decision, src.AgentID = make([]int32, n), ids(), ids()
		src.Step, src.StepNull = make([]uint32, n), make([]bool, n)
		for i := range n {
			src.TSMillis[i], src.CostMicroUSD[i] = r.Int64N(1e6), r.Int64N(100)
			src.RunID[i] = runs.InternString(fmt.Sprint("run", r.IntN(9)))
			src.Step[i], src.StepNull[i] = uint32(r.IntN(4)), r.IntN(3) == 0
		}
		if trial%3 == 0 {
			src.StepNull = nil
		}
		if trial%4 == 0 {
			src.Outcome, src.ToolCalls = ids(), make([]uint32, n)
		}
		var idx []int32
		var rows []uint64
		var one Builder
		for i := range n {
			if r.IntN(3) > 0 {
				idx, rows = append(idx, int32(i)), append(rows, uint64(10*i))
				one.appendRow(src, i, uint64(10*i))
			}
		}
		if len(idx) == 0 {
			continue
		}
		var cols Builder
		cols.AppendRows(src, idx, rows)
		h := Header{Segment: "s", Parts: 1}
		require.Equal(t, one.Encode(nil, h, calls.AllFields, 0, one.Len(), runs, syms),
			cols.Encode(nil, h, calls.AllFields, 0, cols.Len(), runs, syms), "trial %d", trial)
	}
}

// BenchmarkDecode decodes compressed batches of 4,096 rows of the shape a
// replay of `bench traces`' every-run-in-flight directory sends (every row
// a different run, the worker's columns), with interning as the worker
// asks for it.
func BenchmarkDecode(b *testing.B) {
	const n = 4096
	var bl Builder
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	decisions := []string{"allow", "allow", "allow", "budget_exceeded", "wardryx_deny"}
	for i := range n {
		c := calls.Call{TSMillis: 1_780_000_000_000 + int64(i)*977, RunID: fmt.Sprintf("run-%08d-%x", i*13, i*7919), HasRunID: true,
			Decision: decisions[i%len(decisions)], CostMicroUSD: int64(100 + i%977), Step: uint32(i % 100), HasStep: true,
			AgentID: fmt.Sprintf("agent-%d", i%7)}
		if i%97 == 0 {
			c.Outcome = "case_resolved"
		}
		bl.appendCall(&c, uint64(i*16), runs, syms)
	}
	fields := calls.Fields(calls.FieldTSMillis, calls.FieldRunID, calls.FieldDecision, calls.FieldCostMicroUSD,
		calls.FieldStep, calls.FieldAgentID, calls.FieldOutcome)
	data := Compress(nil, bl.Encode(nil, Header{Segment: "s.parquet", Parts: 16, Part: 3}, fields, 0, n, runs, syms))
	interned := map[string]string{}
	into := Batch{Intern: func(s string) string {
		if v, ok := interned[s]; ok {
			return v
		}
		interned[s] = s
		return s
	}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(data, &into); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/row")
}

// TestDecodeRefusesOtherMagicsAndVersions: a batch under any other magic
// (each byte of "VXRB" changed in turn) or of any version but Version,
// plain or inside "VXRZ", is refused with an error naming what it found
// and what this build reads.
func TestDecodeRefusesOtherMagicsAndVersions(t *testing.T) {
	good := encodeCalls(Header{Segment: "s", Parts: 4, Part: 1}, calls.AllFields, []uint64{3, 4}, randomCalls(rand.New(rand.NewPCG(11, 12)), 2))
	var b Batch
	require.NoError(t, Decode(good, &b))
	require.NoError(t, Decode(Compress(nil, good), &b))
	for i := range len(Magic) {
		for _, c := range []byte{'A', 'S', 'x', 0, 0xff} {
			bad := append([]byte(nil), good...)
			if bad[i] == c {
				continue
			}
			bad[i] = c
			err := Decode(bad, &b)
			require.ErrorIs(t, err, ErrFormat)
			require.ErrorContains(t, err, fmt.Sprintf(`format %q, this build reads "VXRB" or "VXRZ"`, bad[:len(Magic)]))
			err = Decode(Compress(nil, bad), &b)
			require.ErrorIs(t, err, ErrFormat)
			require.ErrorContains(t, err, fmt.Sprintf(`compressed: format %q inside, this build reads "VXRB"`, bad[:len(Magic)]))
		}
	}
	for v := range 256 {
		if v == Version {
			continue
		}
		bad := append([]byte(nil), good...)
		bad[len(Magic)] = byte(v)
		want := fmt.Sprintf("version %d, this build reads %d", v, Version)
		for _, in := range [][]byte{bad, Compress(nil, bad)} {
			err := Decode(in, &b)
			require.ErrorIs(t, err, ErrFormat)
			require.ErrorContains(t, err, want)
		}
	}
	err := Decode([]byte(Magic), &b)
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, "no version byte")
}

// TestLayoutIsAsDocumented: a batch written byte by byte as
// docs/formats.md lays it out decodes to its calls, and the encoder
// writes exactly those bytes.
func TestLayoutIsAsDocumented(t *testing.T) {
	uv := binary.AppendUvarint
	str := func(b []byte, s string) []byte { return append(uv(b, uint64(len(s))), s...) }
	var digest [32]byte
	for i := range digest {
		digest[i] = byte(i * 7)
	}
	fields := calls.Fields(calls.FieldTSMillis, calls.FieldRunID, calls.FieldModel, calls.FieldInputTokens,
		calls.FieldStep, calls.FieldToolCalls)
	two := uint32(2)
	want := []calls.Call{
		{TSMillis: 1000, RunID: "r1", HasRunID: true, Model: "m", InputTokens: 7, Step: 3, HasStep: true},
		{TSMillis: 990, RunID: "r2", HasRunID: true, Model: "m", InputTokens: 7, ToolCalls: &two},
	}
	b := append([]byte("VXRB"), 1)
	b = append(b, digest[:]...)
	b = str(b, "seg-a")
	b = uv(b, 4)              // parts
	b = uv(b, 2)              // part
	b = uv(b, 2)              // n
	b = uv(uv(b, 5), 4)       // rows 5 and 9
	b = uv(b, uint64(fields)) // fields
	b = uv(b, 3)              // dictionary: first use, column by column
	b = str(str(str(b, "r1"), "r2"), "m")
	b = uv(uv(append(b, modePlain), 2000), 19) // ts_millis: zig-zag 1000, then 990-1000
	b = uv(uv(append(b, modePlain), 0), 1)     // run_id: dictionary indexes
	b = uv(append(b, modeConst), 2)            // model: one value, "m"
	b = uv(append(b, modeConst), 7)            // input_tokens
	b = uv(append(b, modeSome, 0b01), 3)       // step: row 0 only
	b = uv(append(b, modeSome, 0b10), 2)       // tool_calls: row 1 only

	var got Batch
	require.NoError(t, Decode(b, &got))
	require.Equal(t, Header{Digest: digest, Segment: "seg-a", Parts: 4, Part: 2}, got.Header)
	require.Equal(t, []uint64{5, 9}, got.Rows)
	require.Equal(t, fields, got.Fields)
	require.Equal(t, want, got.Calls)
	require.Equal(t, b, encodeCalls(Header{Digest: digest, Segment: "seg-a", Parts: 4, Part: 2}, fields, []uint64{5, 9}, want))
}
