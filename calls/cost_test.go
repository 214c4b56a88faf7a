package calls

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCostBounds: one rule on the cost of a call, whatever the form: a
// cost above the per-call maximum, negative, or not a number is refused
// naming the field; the maximum itself and a record without decision are
// accepted, and a cost_usd alone is the call's cost.
func TestCostBounds(t *testing.T) {
	for _, tc := range []struct{ line, err string }{
		{`{"outcome":"x","cost_usd":1e300}`, "field cost_usd: 1e+300 is over the per-call maximum of $1,000,000"},
		{`{"outcome":"x","cost_usd":9.3e12}`, "field cost_usd: 9.3e+12 is over the per-call maximum"},
		{`{"run_id":"r","cost_microusd":9223372036854775807}`, "field cost_microusd: 9223372036854775807 is over the per-call maximum"},
		{`{"run_id":"r","cost_microusd":1000000000001}`, "field cost_microusd: 1000000000001 is over"},
		{`{"run_id":"r","cost_microusd":-1}`, "field cost_microusd: -1 is negative"},
		{`{"run_id":"r","cost_microusd":1000000000000}`, ""},
		{`{"outcome":"x","cost_usd":1000000}`, ""},
		{`{"run_id":"r","step":1}`, ""},
	} {
		var rec Record
		err := DecodeRecord([]byte(tc.line), &rec)
		var n int
		serr := ScanNDJSON(strings.NewReader(tc.line), "x.ndjson", func(*Record) error { n++; return nil })
		aerr := ScanRecords(strings.NewReader("["+tc.line+"]"), "x.json", func(*Record) error { return nil })
		if tc.err == "" {
			require.NoError(t, err, tc.line)
			require.NoError(t, serr, tc.line)
			require.NoError(t, aerr, tc.line)
			continue
		}
		require.ErrorContains(t, err, tc.err, tc.line)
		require.ErrorContains(t, serr, "x.ndjson:1: "+tc.err)
		require.ErrorContains(t, aerr, "x.json: record 1 (byte 1): "+tc.err)
	}
	var rec Record
	require.NoError(t, DecodeRecord([]byte(`{"outcome":"x","cost_usd":0.25}`), &rec))
	require.Equal(t, int64(250_000), rec.Call().CostMicroUSD)
}
