package tracemsg

import (
	"testing"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/testkit/calltest"
)

// Fuzz targets for every decoder that takes outside bytes. Run one for a
// minute with, for example:
//
//	go test ./tracemsg -run '^$' -fuzz '^FuzzRecordKey$' -fuzztime 1m
//
// Crashers land in testdata/fuzz/<Target>/ and are replayed by go test.

// FuzzRecordKey: a trace message (and a tailed record line) never panics
// the decoder (calls.DecodeRecord), and an accepted record converts to a
// call and has a dedupe key and a partition.
func FuzzRecordKey(f *testing.F) {
	f.Add(calltest.RecordJSON(calls.Call{RunID: "r", HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: 5, AgentID: "agent://a.b/c"}))
	f.Add([]byte(`{"call_id":"c1","decision":"allow"}`))
	f.Add([]byte(`{"run_id":"r","cost_micro_usd":1}`))
	f.Add([]byte(`{"decision":"allow"} trailing`))
	f.Add([]byte(`{"attributes":{"b":[1,2.50,"\u00e9"],"a":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec calls.Record
		if err := calls.DecodeRecord(data, &rec); err != nil {
			return
		}
		_ = rec.Call()
		if _, err := RecordKey(&rec, ""); err != nil {
			t.Fatalf("%q: accepted, but no key: %v", data, err)
		}
		if _, err := RecordPartition(&rec, "", 8); err != nil {
			t.Fatalf("%q: accepted, but no partition: %v", data, err)
		}
	})
}
