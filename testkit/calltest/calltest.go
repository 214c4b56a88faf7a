// Package calltest generates calls and reduces them for tests of the
// packages that fold calls (partstate, fleet): what a partition state or
// a fleet reports is compared with the direct reduction of the same calls.
package calltest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
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
