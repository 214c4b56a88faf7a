package calls

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecordCall: the resolved value of a record: absent keys are zero,
// HasRunID and HasStep say whether run_id and step were there, tool_calls
// is a pointer only when present, and cost_usd is the cost only without
// cost_microusd.
func TestRecordCall(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Call
	}{
		{`{}`, Call{}},
		{`{"run_id":"","step":0,"tool_calls":0}`, Call{HasRunID: true, HasStep: true, ToolCalls: new(uint32)}},
		{`{"run_id":"r","step":2,"tool_calls":3,"ts_millis":-4,"model":"m","decision":"killed","input_tokens":5,` +
			`"output_tokens":6,"cost_microusd":7,"agent_id":"a","saved_microusd":8,"parent_run_id":"p","on_behalf_of":"o",` +
			`"outcome":"caf\u00e9","key_id":"k","unit":"u","call_id":"c","attributes":{"x":1}}`,
			Call{TSMillis: -4, RunID: "r", HasRunID: true, Model: "m", Decision: "killed", InputTokens: 5, OutputTokens: 6,
				CostMicroUSD: 7, Step: 2, HasStep: true, AgentID: "a", SavedMicroUSD: 8, ParentRunID: "p", OnBehalfOf: "o",
				Outcome: "café", KeyID: "k", Unit: "u", ToolCalls: ptr(uint32(3))}},
		{`{"outcome":"x","cost_usd":0.0000015}`, Call{Outcome: "x", CostMicroUSD: 2}},
		{`{"cost_usd":0.5,"cost_microusd":9}`, Call{CostMicroUSD: 9}},
		{`{"cost_usd":0.5,"cost_microusd":0}`, Call{}},
		{`{"run_id":"r","run_id":null,"step":1,"step":null}`, Call{}},
	} {
		var rec Record
		require.NoError(t, DecodeRecord([]byte(tc.line), &rec), tc.line)
		require.Equal(t, tc.want, rec.Call(), tc.line)
	}
}

func ptr[T any](v T) *T { return &v }

// TestDecodeRecordStringsOutliveTheNextCall: a record's strings stay valid
// while its bytes do, whatever is decoded after it (escaped strings live
// in a buffer of the call's own).
func TestDecodeRecordStringsOutliveTheNextCall(t *testing.T) {
	lines := []string{
		`{"run_id":"r\u0031","model":"caf\u00e9","call_id":"c\u0031","attributes":{"a":"\u00e9"}}`,
		`{"run_id":"s\u0032","model":"th\u00e9","call_id":"d\u0032","attributes":{"b":"\u00e8"}}`,
	}
	recs := make([]Record, len(lines))
	for i, l := range lines {
		require.NoError(t, DecodeRecord([]byte(l), &recs[i]))
	}
	require.Equal(t, "r1", string(recs[0].Strings[FieldRunID]))
	require.Equal(t, "café", string(recs[0].Strings[FieldModel]))
	require.Equal(t, "c1", string(recs[0].CallID))
	require.True(t, recs[0].hasCallID())
	require.Equal(t, `{"a":"\u00e9"}`, string(recs[0].Attributes))
	require.Equal(t, "s2", string(recs[1].Strings[FieldRunID]))
}

// TestCallIDIsAcceptedAndPlain: call_id is a string on every path; a null
// leaves it as it was, "" is present, any other type is refused naming the
// field, and its case need not match.
func TestCallIDIsAcceptedAndPlain(t *testing.T) {
	var rec Record
	require.NoError(t, DecodeRecord([]byte(`{"call_id":"a","call_id":null}`), &rec))
	require.True(t, rec.hasCallID())
	require.Equal(t, "a", string(rec.CallID))
	require.NoError(t, DecodeRecord([]byte(`{"Call_ID":""}`), &rec))
	require.True(t, rec.hasCallID())
	require.NoError(t, DecodeRecord([]byte(`{"call_id":null}`), &rec))
	require.False(t, rec.hasCallID())
	require.EqualError(t, DecodeRecord([]byte(`{"call_id":1}`), &rec), "field call_id: JSON number at byte 12: want a string")
	require.EqualError(t, DecodeRecord([]byte(`{"segment":"s"}`), &rec), `unknown field "segment"`)
	n := 0
	require.NoError(t, ScanNDJSON(strings.NewReader(`{"call_id":"x"}`), "f", func(r *Record) error {
		n++
		require.Equal(t, "x", string(r.CallID))
		return nil
	}))
	require.Equal(t, 1, n)
}

// TestScanCSV: a CSV row is a Record: an empty cell is absent, a run_id
// column makes every row part of a run, unknown columns (call_id among
// them) are ignored, and a bad cell or a bad cost is named by file, line
// and field.
func TestScanCSV(t *testing.T) {
	in := "\ufeffrun_id, step ,model,cost_usd,tool_calls,call_id,x\n" +
		"r,1,m,0.5,,c,y\n" +
		",,,,0,,\n"
	var got []Call
	require.NoError(t, ScanRecords(strings.NewReader(in), "f.csv", func(r *Record) error {
		got = append(got, r.Call())
		return nil
	}))
	require.Equal(t, []Call{
		{RunID: "r", HasRunID: true, Step: 1, HasStep: true, Model: "m", CostMicroUSD: 500_000},
		{HasRunID: true, ToolCalls: new(uint32)},
	}, got)
	for _, tc := range []struct{ in, want string }{
		{"step\n-1\n", `f.csv:2: field step: "-1": want a whole number from 0 to 4294967295`},
		{"ts_millis\n1\nx\n", `f.csv:3: field ts_millis: "x": want a whole number from -9223372036854775808 to 9223372036854775807`},
		{"cost_usd\nabc\n", `f.csv:2: field cost_usd: "abc" is not a number`},
		{"cost_usd\n-1\n", `f.csv:2: field cost_usd: -1 is not a non-negative number`},
		{"input_tokens\n18446744073709551616\n", `f.csv:2: field input_tokens: "18446744073709551616": want a whole number from 0 to 18446744073709551615`},
		{"", "f.csv: empty CSV, want a header row"},
	} {
		err := scanCSV(strings.NewReader(tc.in), "f.csv", func(*Record) error { return nil })
		require.EqualError(t, err, tc.want, tc.in)
	}
}
