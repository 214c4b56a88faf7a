package calls

import (
	"bytes"
	"io"
)

// Test-only forms of the zero-copy decoder, kept here so the package
// exports only what production reads with.

// ref returns the reference form of r: what strictjson.Decode decodes
// from the same line into a refRecord.
func (r *Record) ref() refRecord {
	var rec refRecord
	str := func(f Field) *string {
		if !r.HasField(f) {
			return nil
		}
		s := string(r.Strings[f])
		return &s
	}
	num := func(f Field, v uint64) *uint64 {
		if !r.HasField(f) {
			return nil
		}
		return &v
	}
	i64 := func(f Field, v int64) *int64 {
		if !r.HasField(f) {
			return nil
		}
		return &v
	}
	u32 := func(f Field, v uint32) *uint32 {
		if !r.HasField(f) {
			return nil
		}
		return &v
	}
	rec.TSMillis = i64(FieldTSMillis, r.TSMillis)
	rec.RunID = str(FieldRunID)
	rec.Model = str(FieldModel)
	rec.Decision = str(FieldDecision)
	rec.InputTokens = num(FieldInputTokens, r.InputTokens)
	rec.OutputTokens = num(FieldOutputTokens, r.OutputTokens)
	rec.CostMicroUSD = i64(FieldCostMicroUSD, r.CostMicroUSD)
	rec.Step = u32(FieldStep, r.Step)
	rec.AgentID = str(FieldAgentID)
	rec.SavedMicroUSD = i64(FieldSavedMicroUSD, r.SavedMicroUSD)
	rec.ParentRunID = str(FieldParentRunID)
	rec.OnBehalfOf = str(FieldOnBehalfOf)
	rec.Outcome = str(FieldOutcome)
	rec.KeyID = str(FieldKeyID)
	rec.Unit = str(FieldUnit)
	rec.ToolCalls = u32(FieldToolCalls, r.ToolCalls)
	if r.HasCostUSD() {
		v := r.CostUSD
		rec.CostUSD = &v
	}
	if r.hasAttributes() {
		rec.Attributes = bytes.Clone(r.Attributes)
	}
	rec.CallID = string(r.CallID)
	return rec
}

// readNDJSON is ScanNDJSON with each record in its reference form.
func readNDJSON(src io.Reader, name string, fn func(*refRecord) error) error {
	return ScanNDJSON(src, name, func(r *Record) error {
		rec := r.ref()
		return fn(&rec)
	})
}

// referenceCall is the call a reference record resolves to, as
// Record.Call resolves a Record.
func referenceCall(rec *refRecord) Call {
	cost := deref(rec.CostMicroUSD)
	if rec.CostMicroUSD == nil && rec.CostUSD != nil {
		cost = MicroUSD(*rec.CostUSD)
	}
	return Call{
		TSMillis: deref(rec.TSMillis), RunID: deref(rec.RunID), HasRunID: rec.RunID != nil,
		Model: deref(rec.Model), Decision: deref(rec.Decision), InputTokens: deref(rec.InputTokens),
		OutputTokens: deref(rec.OutputTokens), CostMicroUSD: cost, Step: deref(rec.Step), HasStep: rec.Step != nil,
		AgentID: deref(rec.AgentID), SavedMicroUSD: deref(rec.SavedMicroUSD), ParentRunID: deref(rec.ParentRunID),
		OnBehalfOf: deref(rec.OnBehalfOf), Outcome: deref(rec.Outcome), KeyID: deref(rec.KeyID), Unit: deref(rec.Unit),
		ToolCalls: rec.ToolCalls,
	}
}

// hasAttributes reports whether attributes is present (null included, as
// json.RawMessage holds "null").
func (r *Record) hasAttributes() bool { return r.Has&(1<<bitAttributes) != 0 }

// hasCallID reports whether call_id was set to a string.
func (r *Record) hasCallID() bool { return r.Has&(1<<bitCallID) != 0 }
