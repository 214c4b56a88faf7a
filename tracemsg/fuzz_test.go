package tracemsg

import (
	"encoding/json"
	"testing"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/testkit/calltest"
)

// Fuzz targets for every decoder that takes outside bytes. Run one for a
// minute with, for example:
//
//	go test ./tracemsg -run '^$' -fuzz '^FuzzDecodeCallRecord$' -fuzztime 1m
//
// Crashers land in testdata/fuzz/<Target>/ and are replayed by go test.

// FuzzDecodeCallRecord: a trace message (and a tailed record line) never
// panics the decoder, and an accepted record has a valid agent_id and
// converts to a call.
func FuzzDecodeCallRecord(f *testing.F) {
	b, _ := json.Marshal(calltest.RecordOf(calls.Call{RunID: "r", HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: 5, AgentID: "agent://a.b/c"}))
	f.Add(b)
	f.Add([]byte(`{"call_id":"c1","decision":"allow"}`))
	f.Add([]byte(`{"run_id":"r","cost_micro_usd":1}`))
	f.Add([]byte(`{"decision":"allow"} trailing`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := DecodeCallRecord(data)
		if err != nil {
			return
		}
		_ = rec.Call()
	})
}
