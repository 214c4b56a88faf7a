package calltest

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
)

// TestRecordJSONRoundTrips: a call's record message decodes back to the
// call, every field and presence bit included, with call_id when given.
func TestRecordJSONRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	tools := uint32(3)
	cs := append(RandomDayCalls(rng, 200, 3),
		calls.Call{},
		calls.Call{TSMillis: -1, RunID: "", HasRunID: true, Model: "caf\u00e9 \"q\"", Decision: "killed", InputTokens: 1 << 63,
			OutputTokens: 2, CostMicroUSD: 3, Step: 0, HasStep: true, AgentID: "a", SavedMicroUSD: -4, ParentRunID: "p",
			OnBehalfOf: "o", Outcome: "中文", KeyID: "k", Unit: "u", ToolCalls: &tools})
	for _, c := range cs {
		rec := Record(t, RecordJSON(c))
		require.Equal(t, c, rec.Call())
		require.Empty(t, rec.CallID)
		rec = Record(t, RecordJSONWithID(c, "c-1"))
		require.Equal(t, c, rec.Call())
		require.Equal(t, "c-1", string(rec.CallID))
	}
}
