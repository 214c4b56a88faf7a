package tracemsg

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
)

// keyCases are trace messages whose dedupe keys and partitions are pinned
// below: partition state stores keys, so the canonical bytes a digest is
// taken over may never change. They vary what the digest must tell apart
// (a key absent, null or present with a zero value; -0 and 0 as cost_usd;
// escaped and raw Unicode; invalid UTF-8) and what it must not (key order,
// spacing, case of a key, attributes in any order).
var keyCases = []struct{ line, msgID string }{
	{`{}`, ""},
	{`null`, ""},
	{`{"run_id":null,"model":null,"attributes":{}}`, ""},
	{`{"run_id":"r1"}`, ""},
	{`{"run_id":""}`, ""},
	{`{"RUN_ID":"r1"}`, ""},
	{`{"ts_millis":0,"run_id":"r","model":"","decision":"","input_tokens":0,"output_tokens":0,"cost_microusd":0,"step":0,` +
		`"agent_id":"","saved_microusd":0,"parent_run_id":"","on_behalf_of":"","outcome":"","key_id":"","unit":"","tool_calls":0,"cost_usd":0}`, ""},
	{`{"run_id":"r","cost_usd":0}`, ""},
	{`{"run_id":"r","cost_usd":-0.0}`, ""},
	{`{"run_id":"r","cost_usd":0.25,"cost_microusd":250000}`, ""},
	{`{"run_id":"r","tool_calls":null}`, ""},
	{`{"run_id":"r","tool_calls":0}`, ""},
	{`{"ts_millis":-9223372036854775808,"input_tokens":18446744073709551615,"output_tokens":7,"step":4294967295,"saved_microusd":-5}`, ""},
	{`{"ts_millis":1764565200000,"run_id":"run-42","model":"gpt-4o-mini","decision":"allow","input_tokens":900,"output_tokens":150,` +
		`"cost_microusd":123,"step":3,"agent_id":"agent://acme.example/bot-3","saved_microusd":10,"parent_run_id":"p","on_behalf_of":"u",` +
		`"outcome":"case_resolved","key_id":"k","unit":"u1","tool_calls":2}`, ""},
	{` { "outcome" : "case_resolved" , "run_id" : "run-42" , "step":3, "model":"gpt-4o-mini","decision":"allow","input_tokens":900,` +
		`"output_tokens":150,"cost_microusd":123,"ts_millis":1764565200000,"agent_id":"agent://acme.example/bot-3","saved_microusd":10,` +
		`"parent_run_id":"p","on_behalf_of":"u","key_id":"k","unit":"u1","tool_calls":2} `, ""},
	{`{"run_id":"r","model":"café","outcome":"中文😀"}`, ""},
	{`{"run_id":"r","model":"caf\u00e9","outcome":"\u4e2d\u6587\ud83d\ude00"}`, ""},
	{"{\"run_id\":\"r\",\"model\":\"a\xffb\"}", ""},
	{`{"run_id":"r","model":"a\ufffdb"}`, ""},
	{`{"outcome":"x","cost_usd":0.5}`, ""},
	{`{"attributes":{"b":1,"a":[1,2.0,"é"]}}`, ""},
	{` { "attributes" : { "a" : [ 1 , 2 , "\u00e9" ] , "b" : 1.0 } } `, ""},
	{`{"attributes":null}`, ""},
	{`{"attributes":"x","run_id":"r"}`, ""},
	{`{"run_id":"r","call_id":"c1"}`, ""},
	{`{"run_id":"r","call_id":"c1"}`, "m1"},
	{`{"call_id":"c1"}`, ""},
	{`{"run_id":"r\"q","call_id":"c:1"}`, ""},
	{`{"run_id":"r","call_id":""}`, ""},
	{`{"run_id":"r","call_id":"c1","call_id":null}`, ""},
	{`{"run_id":"r","CALL_ID":"c2"}`, ""},
	{`{"run_id":"r","call_id":null}`, ""},
	{`{"run_id":"r"}`, "m1"},
	{`{"decision":"allow"}`, "m2"},
	{`{"decision":"allow","call_id":"c9"}`, "m2"},
}

// TestRecordKeysArePinned: every record's dedupe key and partition is what
// it was when partition states were first written (the golden values were
// computed by the code before Record replaced CallRecord).
func TestRecordKeysArePinned(t *testing.T) {
	golden := []string{
		"sha256:8ceac006a66b98f0345ac21d0ce67615 2",
		"sha256:8ceac006a66b98f0345ac21d0ce67615 2",
		"sha256:d1b687f5484b6e2b865c8653358ac72b 1",
		"run:r1:45c261a9151ba9f1 4",
		"run::02dd71b4de3756ed 5",
		"run:r1:45c261a9151ba9f1 4",
		"run:r:a55ddbfc12a89af4 5",
		"run:r:9cdf7ea33707d9ec 5",
		"run:r:c3191b454207b48f 5",
		"run:r:f1a8e032ce4aeb72 5",
		"run:r:e5308d6295e9401a 5",
		"run:r:6165a35b2db9a189 5",
		"sha256:b36faabeb9e165c6983fd99192b3e21a 3",
		"run:run-42:a5f496bcbbb64442 3",
		"run:run-42:a5f496bcbbb64442 3",
		"run:r:316a3a6dca88b83f 5",
		"run:r:316a3a6dca88b83f 5",
		"run:r:3f21fd1edec12c9f 5",
		"run:r:3f21fd1edec12c9f 5",
		"sha256:36a4815a630a80d9dd6c348942fba8c1 6",
		"sha256:89d39a2ee7080551be38817aadf20c9c 5",
		"sha256:89d39a2ee7080551be38817aadf20c9c 5",
		"sha256:0ce9d3aa8978ef0a7c54c7df86b608cb 0",
		"run:r:18c4a0dde2977af2 5",
		"call:\"r\":c1 5",
		"call:\"r\":c1 5",
		"call:\"\":c1 5",
		"call:\"r\\\"q\":c:1 4",
		"run:r:e5308d6295e9401a 5",
		"call:\"r\":c1 5",
		"call:\"r\":c2 5",
		"run:r:e5308d6295e9401a 5",
		"msg:m1 5",
		"msg:m2 7",
		"call:\"\":c9 5",
	}
	var got []string
	for _, tc := range keyCases {
		key, part := keyOf(t, tc.line, tc.msgID)
		got = append(got, fmt.Sprintf("%s %d", key, part))
	}
	require.Equal(t, golden, got)
}

func keyOf(t *testing.T, line, msgID string) (string, int) {
	t.Helper()
	var rec calls.Record
	require.NoError(t, calls.DecodeRecord([]byte(line), &rec), line)
	key, err := RecordKey(&rec, msgID)
	require.NoError(t, err, line)
	p, err := RecordPartition(&rec, msgID, 8)
	require.NoError(t, err, line)
	return key, p
}
