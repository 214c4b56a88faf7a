package calls

// Column names of a TokenFuse call-trace segment, in schema order
// (docs/traces.md, "TokenFuse segments"), and the keys of a per-call record.
const (
	ColTSMillis     = "ts_millis"
	ColRunID        = "run_id"
	ColModel        = "model"
	ColDecision     = "decision"
	ColInputTokens  = "input_tokens"
	ColOutputTokens = "output_tokens"
	ColCostMicroUSD = "cost_microusd"
	ColStep         = "step"
	ColAgentID      = "agent_id"
	ColSavedMicro   = "saved_microusd"
	ColParentRunID  = "parent_run_id"
	ColOnBehalfOf   = "on_behalf_of"
	ColOutcome      = "outcome"
	ColKeyID        = "key_id"
	ColUnit         = "unit"
	ColToolCalls    = "tool_calls"
)

// Call is one TokenFuse call, resolved: a row of a segment's Batch
// (Batch.Call) or a per-call Record (Record.Call); it has no encoding of
// its own. Absent or null string columns are "", absent or
// null integer columns 0. HasRunID is false when the record came from a
// segment with no run_id column (or a JSON record without a run_id key):
// such a call is an independent record, not part of a run. HasStep is false
// when the step is missing; ordering then falls back to encounter order.
// ToolCalls is nil when null (unparsed or blocked); a pointer to 0 is a real
// zero.
type Call struct {
	TSMillis      int64
	RunID         string
	HasRunID      bool
	Model         string
	Decision      string
	InputTokens   uint64
	OutputTokens  uint64
	CostMicroUSD  int64
	Step          uint32
	HasStep       bool
	AgentID       string
	SavedMicroUSD int64
	ParentRunID   string
	OnBehalfOf    string
	Outcome       string
	KeyID         string
	Unit          string
	ToolCalls     *uint32
}

// Class is the class of a call's decision. A blocked call is counted but
// its cost_microusd (an avoided estimate) is never added to spend; a call
// of any class but ClassAllowed is refused for the containment SLI.
type Class uint8

// Decision classes. Do not reorder.
const (
	ClassAllowed Class = iota
	ClassBlocked       // one of the nine breaker block reasons: counted, never costed
	ClassWardryx       // wardryx_deny / wardryx_hold: costed, but refused for containment
)

// Classify returns the class of decision.
func Classify(decision string) Class {
	switch decision {
	case "budget_exceeded", "policy_violation", "loop_detected", "killed", "wasm_policy",
		"taint_blocked", "dlp_blocked", "unit_budget_exceeded", "identity_mismatch":
		return ClassBlocked
	case "wardryx_deny", "wardryx_hold":
		return ClassWardryx
	}
	return ClassAllowed
}
