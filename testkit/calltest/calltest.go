// Package calltest generates calls, puts them in the forms the worker
// receives them (records, row batches) and reduces them, for tests of the
// packages that fold calls (partstate, fleet): what a partition state or
// a fleet reports is compared with the direct reduction of the same calls.
package calltest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/outcome"
)

// Day0 is the midnight the days of generated calls start at.
var Day0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// dayMillis is a day in milliseconds.
const dayMillis = 24 * 60 * 60 * 1000

// RandomDayCalls draws n calls of runs (and untagged and tagged
// independent calls) spread over days days from Day0, some runs spanning
// several. Steps are unique (the call's index, shuffled): "the last
// outcome by step" needs no tie-break by the records' order, which a
// reducer fed in slice order and a partition applying records by ts see
// differently.
func RandomDayCalls(rng *rand.Rand, n, days int) []calls.Call {
	outcomes := []string{"", "", "", "case_resolved", "escalated", "abandoned"}
	agents := []string{"", "agent://t/a", "agent://t/b"}
	decisions := []string{"allow", "allow", "allow", "budget_exceeded", "wardryx_deny", "cache_hit"}
	out := make([]calls.Call, n)
	steps := rng.Perm(n)
	for i := range out {
		c := calls.Call{TSMillis: Day0.UnixMilli() + rng.Int64N(int64(days)*dayMillis), Decision: decisions[rng.IntN(len(decisions))],
			CostMicroUSD: rng.Int64N(5000), Step: uint32(steps[i]), HasStep: true,
			Outcome: outcomes[rng.IntN(len(outcomes))], AgentID: agents[rng.IntN(len(agents))], Model: "m"}
		if rng.IntN(10) != 0 {
			c.RunID, c.HasRunID = fmt.Sprintf("run-%03d", rng.IntN(60)), true
		}
		out[i] = c
	}
	return out
}

// Direct reduces cs with opts and returns ReportJSON of the reducer.
func Direct(t testing.TB, cs []calls.Call, opts outcome.Options) []byte {
	t.Helper()
	r, err := outcome.NewReducer(opts)
	require.NoError(t, err)
	for _, c := range cs {
		r.Add(c)
	}
	return ReportJSON(t, r)
}

// ReportJSON is the cost report and the SLO report (every subject
// canonical) of r, indented: what tests compare byte for byte.
func ReportJSON(t testing.TB, r *outcome.Reducer) []byte {
	t.Helper()
	rep, err := r.CheckedReport()
	require.NoError(t, err)
	slo, err := r.SLO(outcome.DefaultSLOOptions(), func(string) bool { return true })
	require.NoError(t, err)
	b, err := json.MarshalIndent(struct {
		Cost *outcome.Report    `json:"cost"`
		SLO  *outcome.SLOReport `json:"slo"`
	}{rep, slo}, "", " ")
	require.NoError(t, err)
	return b
}

// RecordJSON returns the record message of c, one JSON object (no
// newline) that decodes back to c (calls.DecodeRecord, then Record.Call):
// every column present, run_id and step only when c has them, tool_calls
// null when c has none.
func RecordJSON(c calls.Call) []byte { return RecordJSONWithID(c, "") }

// RecordJSONWithID is RecordJSON with a call_id key when callID is not "".
func RecordJSONWithID(c calls.Call, callID string) []byte {
	b := []byte{'{'}
	add := func(key string, v any) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		val, err := json.Marshal(v)
		if err != nil {
			panic(err) // strings and numbers always marshal
		}
		b = append(append(strconv.AppendQuote(b, key), ':'), val...)
	}
	add(calls.ColTSMillis, c.TSMillis)
	if c.HasRunID {
		add(calls.ColRunID, c.RunID)
	}
	add(calls.ColModel, c.Model)
	add(calls.ColDecision, c.Decision)
	add(calls.ColInputTokens, c.InputTokens)
	add(calls.ColOutputTokens, c.OutputTokens)
	add(calls.ColCostMicroUSD, c.CostMicroUSD)
	if c.HasStep {
		add(calls.ColStep, c.Step)
	}
	add(calls.ColAgentID, c.AgentID)
	add(calls.ColSavedMicro, c.SavedMicroUSD)
	add(calls.ColParentRunID, c.ParentRunID)
	add(calls.ColOnBehalfOf, c.OnBehalfOf)
	add(calls.ColOutcome, c.Outcome)
	add(calls.ColKeyID, c.KeyID)
	add(calls.ColUnit, c.Unit)
	add(calls.ColToolCalls, c.ToolCalls)
	if callID != "" {
		add(calls.ColCallID, callID)
	}
	return append(b, '}')
}

// Record decodes a record message (RecordJSON) as the worker does
// (calls.DecodeRecord), failing t on an error.
func Record(t testing.TB, line []byte) calls.Record {
	t.Helper()
	var rec calls.Record
	require.NoError(t, calls.DecodeRecord(line, &rec), "%s", line)
	return rec
}

// AppendCalls adds cs to b as segment rows first, first+1, ... the way a
// segment scan does (calls.Batch columns, then Builder.AppendRows), their
// strings interned into runs (run_id) and syms (every other string): pass
// the same tables to Encode.
func AppendCalls(b *rowbatch.Builder, cs []calls.Call, first uint64, runs, syms *calls.Symbols) {
	n := len(cs)
	src := &calls.Batch{Len: n, HasRunID: true,
		TSMillis: make([]int64, n), RunID: make([]int32, n), Model: make([]int32, n), Decision: make([]int32, n),
		InputTokens: make([]uint64, n), OutputTokens: make([]uint64, n), CostMicroUSD: make([]int64, n),
		Step: make([]uint32, n), StepNull: make([]bool, n), AgentID: make([]int32, n), SavedMicroUSD: make([]int64, n),
		ParentRunID: make([]int32, n), OnBehalfOf: make([]int32, n), Outcome: make([]int32, n), KeyID: make([]int32, n),
		Unit: make([]int32, n), ToolCalls: make([]uint32, n), ToolNull: make([]bool, n)}
	idx, rows := make([]int32, n), make([]uint64, n)
	for i := range cs {
		c := &cs[i]
		idx[i], rows[i] = int32(i), first+uint64(i)
		src.TSMillis[i], src.InputTokens[i], src.OutputTokens[i] = c.TSMillis, c.InputTokens, c.OutputTokens
		src.CostMicroUSD[i], src.SavedMicroUSD[i] = c.CostMicroUSD, c.SavedMicroUSD
		src.Step[i], src.StepNull[i] = c.Step, !c.HasStep
		if c.ToolCalls != nil {
			src.ToolCalls[i] = *c.ToolCalls
		} else {
			src.ToolNull[i] = true
		}
		src.RunID[i] = runs.InternString(c.RunID)
		for _, s := range []struct {
			col []int32
			v   string
		}{{src.Model, c.Model}, {src.Decision, c.Decision}, {src.AgentID, c.AgentID}, {src.ParentRunID, c.ParentRunID},
			{src.OnBehalfOf, c.OnBehalfOf}, {src.Outcome, c.Outcome}, {src.KeyID, c.KeyID}, {src.Unit, c.Unit}} {
			s.col[i] = syms.InternString(s.v)
		}
	}
	b.AppendRows(src, idx, rows)
}
