package calls

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/internal/strictjson"
)

// checkSame fails unless the fast decoder and strictjson.Decode agree on
// data: the same accept/reject and, when accepted, the same values (float
// bits included); and unless DecodeRecord (the fast path with its
// fallback and Record.Check) gives those values or strictjson.Decode's
// error word for word.
func checkSame(t testing.TB, data []byte) {
	t.Helper()
	var want refRecord
	refErr := strictjson.Decode(data, &want)
	var d RecordDecoder
	var r Record
	ok := d.Decode(data, &r)
	if ok != (refErr == nil) {
		t.Fatalf("%q: fast accepted=%v, encoding/json error %v", data, ok, refErr)
	}
	var via Record
	err := DecodeRecord(data, &via)
	if !ok {
		require.EqualError(t, err, refErr.Error())
		return
	}
	requireSameRecord(t, data, want, r.ref())
	// The fallback's conversion holds the same values.
	var back Record
	back.setFrom(&want)
	requireSameRecord(t, data, want, back.ref())
	if cerr := referenceCheck(&want); cerr != nil {
		require.EqualError(t, err, cerr.Error())
		return
	}
	require.NoError(t, err)
	requireSameRecord(t, data, want, via.ref())
	require.Equal(t, referenceCall(&want), via.Call(), "%q", data)
	require.Equal(t, referenceCall(&want), r.Call(), "%q", data)
}

func requireSameRecord(t testing.TB, data []byte, want, have refRecord) {
	t.Helper()
	wb, hb := want.CostUSD, have.CostUSD
	if (wb == nil) != (hb == nil) || wb != nil && math.Float64bits(*wb) != math.Float64bits(*hb) {
		t.Fatalf("%q: cost_usd %v, want %v", data, fmtPtr(hb), fmtPtr(wb))
	}
	want.CostUSD, have.CostUSD = nil, nil
	if (want.Attributes == nil) != (have.Attributes == nil) {
		t.Fatalf("%q: attributes %q, want %q", data, have.Attributes, want.Attributes)
	}
	require.Equal(t, want, have, "record %q", data)
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

// differentialCases are hand-picked edges of encoding/json's behaviour.
var differentialCases = []string{
	``, ` `, `null`, ` null `, `nul`, `nullx`, `{}`, ` {} `, `{`, `}`, `[]`, `"x"`, `1`, `true`,
	`{}x`, `{} {}`, `{}` + "\n\t\r ", "\ufeff{}", `{"run_id":"r"}`, `{"run_id":"r",}`, `{,}`,
	`{"run_id":"r" "model":"m"}`, `{"run_id" "r"}`, `{"run_id":}`, `{run_id:"r"}`, `{'run_id':'r'}`,
	`{"run_id":null}`, `{"run_id":"a","run_id":null}`, `{"run_id":null,"run_id":"b"}`, `{"run_id":"a","run_id":"b"}`,
	`{"RUN_ID":"r"}`, `{"Run_Id":"r"}`, `{"run_ID":"r","run_id":"s"}`, "{\"\u212aey_id\":\"k\"}", "{\"\u017ftep\":1}",
	`{"run\u005fid":"r"}`, `{"run\u005Fid":"r"}`, `{"run_id\u0000":"r"}`, `{"unknown":1}`, `{"cost_micro_usd":1}`,
	`{"run_id":1}`, `{"run_id":true}`, `{"run_id":{}}`, `{"run_id":[]}`, `{"step":"1"}`, `{"step":true}`,
	`{"step":{}}`, `{"step":[1]}`, `{"step":-1}`, `{"step":-0}`, `{"step":0}`, `{"step":4294967295}`,
	`{"step":4294967296}`, `{"step":1.0}`, `{"step":1e2}`, `{"step":01}`, `{"step":+1}`, `{"step":.5}`,
	`{"ts_millis":-9223372036854775808}`, `{"ts_millis":-9223372036854775809}`, `{"ts_millis":9223372036854775807}`,
	`{"ts_millis":9223372036854775808}`, `{"ts_millis":-0}`, `{"ts_millis":-}`, `{"ts_millis":1.}`, `{"ts_millis":1e}`,
	`{"input_tokens":18446744073709551615}`, `{"input_tokens":18446744073709551616}`, `{"input_tokens":99999999999999999999}`,
	`{"output_tokens":-0}`, `{"tool_calls":null}`, `{"tool_calls":0}`, `{"tool_calls":7}`,
	`{"cost_usd":1.5}`, `{"cost_usd":-0}`, `{"cost_usd":-0.0}`, `{"cost_usd":1e308}`, `{"cost_usd":1e309}`, `{"cost_usd":1e-400}`,
	`{"cost_usd":"1"}`, `{"cost_usd":0.1e1}`, `{"cost_usd":1E+2}`, `{"cost_usd":1e-2}`, `{"cost_usd":-}`, `{"cost_usd":1.2.3}`,
	`{"attributes":null}`, `{"attributes":1}`, `{"attributes":"x"}`, `{"attributes":{"a":[1,{"b":null}],"c":true}}`,
	`{"attributes":{"a":}}`, `{"attributes":[1,]}`, `{"attributes":{"a" 1}}`, `{"attributes":{1:2}}`, `{"attributes":[}`,
	`{"attributes": [ 1 , 2 ] , "run_id":"r"}`, `{"attributes":{},"attributes":[]}`, `{"attributes":tru}`,
	`{"attributes":"\x01"}`, `{"attributes":"\q"}`, `{"attributes":"\u12"}`, `{"attributes":"\u12G4"}`,
	`{"model":"a\"b\\c\/d\b\f\n\r\te"}`, `{"model":"\u00e9\u4e2d\uD83D\uDE00"}`, `{"model":"\ud800"}`, `{"model":"\ud800\u0041"}`,
	`{"model":"\udc00\ud800"}`, `{"model":"\ud800\udc00\udc00"}`, `{"model":"\ud800x"}`, "{\"model\":\"\xff\"}", "{\"model\":\"a\xc3\"}",
	"{\"model\":\"\xed\xa0\x80\"}", "{\"model\":\"\xef\xbf\xbd\"}", "{\"model\":\"\x7f\"}", "{\"model\":\"\x1f\"}", "{\"model\":\"\t\"}",
	"{\"model\":\"caf\xc3\xa9\"}", `{"model":"\u0000"}`, `{"model":"`, `{"model":"a`, `{"model":"a\`,
	`{"call_id":"c","segment":"s.parquet"}`, `{"call_id":null}`, `{"call_id":"c","call_id":null}`, `{"call_id":1}`,
	`{"CALL_ID":"c"}`, `{"segment":""}`, `{"decision":"allow","decision":"killed"}`,
	"{\"run_id\":\"r\",\n\"step\" :\t1 ,\r\"outcome\" : \"case_resolved\" }",
}

func TestRecordDecoderDifferentialCases(t *testing.T) {
	for _, c := range differentialCases {
		checkSame(t, []byte(c))
	}
}

// TestRecordDecoderDepth: attributes may nest to encoding/json's limit of
// 10000 (the record's object included) and no further.
func TestRecordDecoderDepth(t *testing.T) {
	for _, depth := range []int{1, 100, 9998, 9999, 10000, 10001} {
		for _, open := range []string{"[", `{"k":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			in := `{"attributes":` + strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth) + "}"
			checkSame(t, []byte(in))
			in = `{"attributes":` + strings.Repeat(open, depth-1) + strings.Repeat("[]", 1) + strings.Repeat(close, depth-1) + "}"
			checkSame(t, []byte(in))
		}
	}
}

// genRecord writes one random, usually valid record; mutate then damages
// some of them.
func genRecord(rng *rand.Rand) []byte {
	keys := []string{ColTSMillis, ColRunID, ColModel, ColDecision, ColInputTokens, ColOutputTokens,
		ColCostMicroUSD, ColStep, ColAgentID, ColSavedMicro, ColParentRunID, ColOnBehalfOf, ColOutcome,
		ColKeyID, ColUnit, ColToolCalls, "cost_usd", "attributes", "call_id", "segment"}
	strs := []string{"", "r-1", "gpt-4o-mini", "allow", "killed", "case_resolved", "agent://a.b/c", `quote"d`,
		`back\slash`, "tab\t", "é", "中文", "😀", "\x00", "\u2028", `\u00e9`}
	nums := []string{"0", "-0", "1", "-1", "42", "4294967295", "4294967296", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "18446744073709551615", "18446744073709551616",
		"1.5", "1e3", "0.0", "-0.0", "1E-7", "123456789012345678901234567890"}
	var b bytes.Buffer
	ws := func() {
		if rng.IntN(8) == 0 {
			b.WriteString([]string{" ", "\t", "\n", "\r", "  "}[rng.IntN(5)])
		}
	}
	ws()
	b.WriteByte('{')
	n := rng.IntN(12)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		ws()
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(20) {
		case 0:
			k = strings.ToUpper(k)
		case 1:
			k = strings.Replace(k, "_", `\u005f`, 1)
		case 2:
			k = "x" + k
		}
		b.WriteString(`"` + k + `"`)
		ws()
		b.WriteByte(':')
		ws()
		if rng.IntN(5) != 0 { // mostly a value of the key's own type
			switch k {
			case ColTSMillis, ColCostMicroUSD, ColSavedMicro, ColInputTokens, ColOutputTokens, ColStep, ColToolCalls, "cost_usd":
				fmt.Fprint(&b, rng.IntN(1_000_000))
			case "attributes":
				b.WriteString(`{"a":[1,"x",null]}`)
			default:
				s, _ := json.Marshal(strs[rng.IntN(len(strs))])
				b.Write(s)
			}
			ws()
			continue
		}
		switch r := rng.IntN(10); {
		case r == 0:
			b.WriteString("null")
		case r < 5:
			s, _ := json.Marshal(strs[rng.IntN(len(strs))])
			if rng.IntN(4) == 0 {
				s = []byte(`"` + strs[rng.IntN(len(strs))] + `"`) // raw, escapes and all
			}
			b.Write(s)
		case r < 9:
			b.WriteString(nums[rng.IntN(len(nums))])
		default:
			b.WriteString([]string{`{}`, `[]`, `{"a":[1,"x",null]}`, `true`, `false`}[rng.IntN(5)])
		}
		ws()
	}
	b.WriteByte('}')
	ws()
	return b.Bytes()
}

func mutate(rng *rand.Rand, in []byte) []byte {
	out := bytes.Clone(in)
	switch rng.IntN(6) {
	case 0: // flip a byte
		if len(out) > 0 {
			out[rng.IntN(len(out))] = byte(rng.IntN(256))
		}
	case 1: // truncate
		out = out[:rng.IntN(len(out)+1)]
	case 2: // insert a structural byte
		i := rng.IntN(len(out) + 1)
		set := []byte(`{}[],:"\ 0-e.`)
		c := set[rng.IntN(len(set))]
		out = append(out[:i], append([]byte{c}, out[i:]...)...)
	case 3: // trailing garbage
		out = append(out, []string{" x", "{}", "\x00", " \n", ","}[rng.IntN(5)]...)
	case 4: // delete a byte
		if len(out) > 0 {
			i := rng.IntN(len(out))
			out = append(out[:i], out[i+1:]...)
		}
	}
	return out
}

// TestRecordDecoderDifferentialGenerated runs generated and mutated records
// through both decoders.
func TestRecordDecoderDifferentialGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	accepted := 0
	for range n {
		rec := genRecord(rng)
		if rng.IntN(2) == 0 {
			rec = mutate(rng, rec)
		}
		checkSame(t, rec)
		if strictjson.Decode(rec, new(refRecord)) == nil {
			accepted++
		}
	}
	// The generator must exercise both outcomes.
	require.Greater(t, accepted, n/10)
	require.Less(t, accepted, n*9/10)
}

// FuzzRecordDecoder compares the fast decoder with strictjson.Decode. Its seed
// corpus (the hand-picked cases and generated records) runs in go test;
// run it longer with
//
//	go test ./calls -run '^$' -fuzz '^FuzzRecordDecoder$' -fuzztime 1m
func FuzzRecordDecoder(f *testing.F) {
	for _, c := range differentialCases {
		f.Add([]byte(c))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		f.Add(mutate(rng, genRecord(rng)))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSame(t, data) })
}

// referenceCheck is Record.Check written over the reference form.
func referenceCheck(rec *refRecord) error {
	switch {
	case rec.CostMicroUSD != nil && *rec.CostMicroUSD < 0:
		return fmt.Errorf("field cost_microusd: %d is negative", *rec.CostMicroUSD)
	case rec.CostMicroUSD != nil && *rec.CostMicroUSD > 1e12:
		return fmt.Errorf("field cost_microusd: %d is over the per-call maximum of 1000000000000 ($1,000,000)", *rec.CostMicroUSD)
	case rec.CostUSD != nil && (*rec.CostUSD < 0 || math.IsNaN(*rec.CostUSD) || math.IsInf(*rec.CostUSD, 0)):
		return fmt.Errorf("field cost_usd: %v is not a non-negative number", *rec.CostUSD)
	case rec.CostUSD != nil && *rec.CostUSD > 1e6:
		return fmt.Errorf("field cost_usd: %v is over the per-call maximum of $1,000,000", *rec.CostUSD)
	}
	return nil
}

// referenceReadNDJSON is readNDJSON as it was before the fast decoder:
// strictjson.Decode on every trimmed line.
func referenceReadNDJSON(src io.Reader, name string, fn func(*refRecord) error) error {
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(b) > MaxRecordBytes {
			return fmt.Errorf("%s:%d: record of %d bytes: over the %d-byte limit per record", name, line, len(b), MaxRecordBytes)
		}
		var rec refRecord
		if err := strictjson.Decode(b, &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if err := referenceCheck(&rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if err := fn(&rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%s:%d: a line longer than %d bytes, the longest read (a record is at most %d bytes)", name, line+1, 16<<20, MaxRecordBytes)
	} else if err != nil {
		return fmt.Errorf("%s: after line %d: %w", name, line, err)
	}
	return nil
}

// TestALineOverTheReadLimitIsNamed: a line longer than the scanner reads
// (50 MB on stdin, as the issue had it) is named by its number, with the
// limit, not "bufio.Scanner: token too long".
func TestALineOverTheReadLimitIsNamed(t *testing.T) {
	good := `{"run_id":"r","model":"m","cost_microusd":5}` + "\n"
	in := io.MultiReader(strings.NewReader(good+"\n"+good), bytes.NewReader(bytes.Repeat([]byte("x"), 50<<20)))
	n := 0
	err := ScanNDJSON(in, "-", func(*Record) error { n++; return nil })
	require.EqualError(t, err, "-:4: a line longer than 16777216 bytes, the longest read (a record is at most 262144 bytes)")
	require.Equal(t, 2, n)
}

// TestReadNDJSONSameAsReference: whole files, valid or not, give the same
// records and the same error (file, line and field) as the reference.
func TestReadNDJSONSameAsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for range 2000 {
		var file bytes.Buffer
		for range rng.IntN(20) {
			rec := genRecord(rng)
			if rng.IntN(8) == 0 {
				rec = mutate(rng, rec)
			}
			if rng.IntN(10) == 0 {
				file.WriteString(" \u00a0\n") // blank after Unicode trimming
			}
			file.Write(bytes.ReplaceAll(rec, []byte("\n"), []byte(" ")))
			file.WriteString([]string{"\n", "\r\n", " \n"}[rng.IntN(3)])
		}
		var want, have []refRecord
		wantErr := referenceReadNDJSON(bytes.NewReader(file.Bytes()), "f.ndjson", func(r *refRecord) error {
			want = append(want, *r)
			return nil
		})
		haveErr := readNDJSON(bytes.NewReader(file.Bytes()), "f.ndjson", func(r *refRecord) error {
			have = append(have, *r)
			return nil
		})
		require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(haveErr), "file %q", file.Bytes())
		require.Equal(t, len(want), len(have))
		for i := range want {
			requireSameRecord(t, file.Bytes(), want[i], have[i])
		}
	}
}

// TestScanNDJSONErrors: an error names the file, the line and the field.
func TestScanNDJSONErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{\"run_id\":\"r\"}\n\n{\"run_id\":\"r\",\"cost_micro_usd\":1}\n", `calls.ndjson:3: unknown field "cost_micro_usd"`},
		{`{"step":-1}`, "calls.ndjson:1: field step: JSON number -1 at byte 10: want a whole number from 0 to 4294967295"},
		{"{}\n{\"ts_millis\":\"x\"}", "calls.ndjson:2: field ts_millis: JSON string at byte 16: want a whole number from -9223372036854775808 to 9223372036854775807"},
		{"{\"run_id\":\"r\"} x", "calls.ndjson:1: trailing data after the JSON value at byte 14"},
		{"{\"run_id\":\"r\",}", "calls.ndjson:1: byte 15: invalid character '}' looking for beginning of object key string"},
		{`{"tool_calls":4294967296}`, "calls.ndjson:1: field tool_calls: JSON number 4294967296 at byte 24: want a whole number from 0 to 4294967295"},
	} {
		err := ScanNDJSON(strings.NewReader(tc.in), "calls.ndjson", func(*Record) error { return nil })
		require.EqualError(t, err, tc.want)
	}
	err := ScanNDJSON(strings.NewReader("{}\n{}"), "calls.ndjson", func(*Record) error { return fmt.Errorf("stop") })
	require.EqualError(t, err, "calls.ndjson:1: stop")
}

// TestScanNDJSONNoAllocs: the decode path allocates nothing per record
// once its buffers have grown (escaped strings included).
func TestScanNDJSONNoAllocs(t *testing.T) {
	line := []byte(`{"ts_millis":1700000000000,"run_id":"run-1","model":"gpt-4o-mini","decision":"allow","input_tokens":900,` +
		`"output_tokens":150,"cost_microusd":123,"step":3,"agent_id":"agent://acme.example/bot-3","outcome":"caf\u00e9",` +
		`"attributes":{"k":[1,2,{"x":null}]},"cost_usd":0.25,"call_id":"c\u002d1"}`)
	var d RecordDecoder
	var r Record
	require.True(t, d.Decode(line, &r))
	allocs := testing.AllocsPerRun(1000, func() {
		if !d.Decode(line, &r) {
			t.Fatal("refused")
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, "café", string(r.Strings[FieldOutcome]))
	require.Equal(t, "c-1", string(r.CallID))
}

// benchLines returns n generated per-call record lines of about 250 bytes.
func benchLines(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"ts_millis":%d,"run_id":"run-%08d","model":"claude-sonnet-4-5","decision":"allow",`+
			`"input_tokens":%d,"output_tokens":%d,"cost_microusd":%d,"step":%d,"agent_id":"agent://acme.example/bot-%d",`+
			`"key_id":"key-%d","tool_calls":%d}`, 1_764_565_200_000+i, i/10, 800+i%2400, 100+i%600, 2000+i%12000, i%10, i%7, 100+i%23, i%4)
	}
	return out
}

// BenchmarkRecordDecoder reports the record decoder's MB/s and
// allocations per record (one op = one record).
func BenchmarkRecordDecoder(b *testing.B) {
	lines := benchLines(1000)
	var d RecordDecoder
	var r Record
	b.SetBytes(int64(len(lines[0])))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !d.Decode(lines[i%len(lines)], &r) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkReferenceDecode is the same with encoding/json (strictjson.Decode), the
// reference.
func BenchmarkReferenceDecode(b *testing.B) {
	lines := benchLines(1000)
	b.SetBytes(int64(len(lines[0])))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var rec refRecord
		if err := strictjson.Decode(lines[i%len(lines)], &rec); err != nil {
			b.Fatal(err)
		}
	}
}
