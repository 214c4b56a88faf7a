package outcome

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdryx/verdryx/calls"

	"github.com/stretchr/testify/require"
)

func call(run string, step uint32, decision string, cost int64, tag string) calls.Call {
	return calls.Call{RunID: run, HasRunID: true, Step: step, HasStep: true, Decision: decision, CostMicroUSD: cost, Outcome: tag}
}

type row struct {
	tag                  string
	runs, calls, blocked int64
	cost                 int64
}

func rows(t *testing.T, r *Reducer) []row {
	t.Helper()
	rep := r.Report()
	require.Len(t, rep.Groups, 1)
	var out []row
	for _, o := range rep.Groups[0].Outcomes {
		out = append(out, row{o.Outcome, o.Runs, o.Calls, o.BlockedCalls, o.TotalCostMicroUSD})
	}
	return out
}

func newReducer(t *testing.T, opts Options) *Reducer {
	t.Helper()
	r, err := NewReducer(opts)
	require.NoError(t, err)
	return r
}

func TestReduceRules(t *testing.T) {
	cases := []struct {
		name  string
		calls []calls.Call
		want  []row
	}{
		{"blocked rows counted not costed", []calls.Call{
			call("a", 0, "allow", 10, ""), call("a", 1, "loop_detected", 1000, ""), call("a", 2, "identity_mismatch", 1000, "case_resolved"),
		}, []row{{"case_resolved", 1, 3, 2, 10}}},
		{"wardryx rows costed", []calls.Call{
			call("a", 0, "wardryx_deny", 10, ""), call("a", 1, "wardryx_hold", 20, "escalated"),
		}, []row{{"escalated", 1, 2, 0, 30}}},
		{"last tag by step wins in any order", []calls.Call{
			call("a", 5, "allow", 1, "abandoned"), call("a", 9, "allow", 1, "case_resolved"), call("a", 7, "allow", 1, "escalated"),
		}, []row{{"case_resolved", 1, 3, 0, 3}}},
		{"empty tag never overrides", []calls.Call{
			call("a", 1, "allow", 1, "escalated"), call("a", 2, "allow", 1, ""),
		}, []row{{"escalated", 1, 2, 0, 2}}},
		{"untagged runs kept last", []calls.Call{
			call("z", 0, "allow", 4, ""), call("a", 0, "allow", 1, "abandoned"), call("m", 0, "allow", 2, "case_resolved"),
		}, []row{{"abandoned", 1, 1, 0, 1}, {"case_resolved", 1, 1, 0, 2}, {Untagged, 1, 1, 0, 4}}},
		{"missing step falls back to encounter order", []calls.Call{
			{RunID: "a", HasRunID: true, Outcome: "case_resolved", CostMicroUSD: 1},
			{RunID: "a", HasRunID: true, Outcome: "abandoned", CostMicroUSD: 1},
		}, []row{{"abandoned", 1, 2, 0, 2}}},
		{"equal steps: later call wins", []calls.Call{
			call("a", 3, "allow", 1, "abandoned"), call("a", 3, "allow", 1, "escalated"),
		}, []row{{"escalated", 1, 2, 0, 2}}},
		{"independent calls: each a run, untagged dropped", []calls.Call{
			{Outcome: "case_resolved", CostMicroUSD: 5}, {Outcome: "", CostMicroUSD: 7}, {Outcome: "case_resolved", CostMicroUSD: 6, Decision: "killed"},
		}, []row{{"case_resolved", 2, 2, 1, 5}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReducer(t, Options{})
			for _, c := range tc.calls {
				r.Add(c)
			}
			require.Equal(t, tc.want, rows(t, r))
		})
	}
}

func TestReduceBatchMatchesAdd(t *testing.T) {
	cs := []calls.Call{
		call("a", 2, "allow", 10, "case_resolved"), call("b", 0, "budget_exceeded", 99, ""),
		call("a", 1, "wardryx_deny", 5, ""), call("b", 1, "allow", 3, "abandoned"), call("c", 0, "allow", 1, ""),
	}
	viaAdd := newReducer(t, Options{})
	for _, c := range cs {
		viaAdd.Add(c)
	}
	viaBatch := newReducer(t, Options{})
	b := calls.Batch{Len: len(cs), HasRunID: true}
	for _, c := range cs {
		b.TSMillis = append(b.TSMillis, c.TSMillis)
		b.RunID = append(b.RunID, viaBatch.RunSymbols().InternString(c.RunID))
		b.Decision = append(b.Decision, viaBatch.Symbols().InternString(c.Decision))
		b.CostMicroUSD = append(b.CostMicroUSD, c.CostMicroUSD)
		b.Step = append(b.Step, c.Step)
		b.AgentID = append(b.AgentID, 0)
		b.Outcome = append(b.Outcome, viaBatch.Symbols().InternString(c.Outcome))
	}
	viaBatch.AddBatch(&b)
	require.Equal(t, viaAdd.Report(), viaBatch.Report())
}

func TestGroupByModelSplitsCallsNotOutcome(t *testing.T) {
	r := newReducer(t, Options{By: calls.ColModel})
	for _, c := range []calls.Call{
		{RunID: "a", HasRunID: true, Step: 0, HasStep: true, Model: "small", CostMicroUSD: 10},
		{RunID: "a", HasRunID: true, Step: 1, HasStep: true, Model: "large", CostMicroUSD: 100, Outcome: "case_resolved"},
		{RunID: "b", HasRunID: true, Step: 0, HasStep: true, Model: "small", CostMicroUSD: 5, Outcome: "abandoned"},
	} {
		r.Add(c)
	}
	rep := r.Report()
	require.Len(t, rep.Groups, 2)
	require.Equal(t, "large", rep.Groups[0].Key)
	require.Equal(t, []OutcomeRow{{Outcome: "case_resolved", Runs: 1, Calls: 1, TotalCostMicroUSD: 100, TotalCostUSD: 0.0001, MeanCostPerRunUSD: 0.0001}}, rep.Groups[0].Outcomes)
	small := rep.Groups[1]
	require.Equal(t, "small", small.Key)
	// Run a's small-model call is under the run's outcome, case_resolved.
	require.Len(t, small.Outcomes, 2)
	require.Equal(t, "abandoned", small.Outcomes[0].Outcome)
	require.Equal(t, "case_resolved", small.Outcomes[1].Outcome)
	require.Equal(t, int64(10), small.Outcomes[1].TotalCostMicroUSD)
	require.InDelta(t, 15e-6, *small.CostPerResolvedUSD, 1e-12)
}

func TestTimeWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	r := newReducer(t, Options{From: t0, To: t0.Add(time.Hour)})
	for i, off := range []time.Duration{-time.Minute, 0, 30 * time.Minute, time.Hour} {
		c := call("a", uint32(i), "allow", 1, "case_resolved")
		c.TSMillis = t0.Add(off).UnixMilli()
		r.Add(c)
	}
	require.Equal(t, []row{{"case_resolved", 1, 2, 0, 2}}, rows(t, r))
	require.Equal(t, int64(2), r.Stats().OutsideWindow)

	_, err := NewReducer(Options{From: t0, To: t0})
	require.Error(t, err)
	_, err = NewReducer(Options{By: "decision"})
	require.ErrorContains(t, err, "decision")
}

func TestCostPerResolvedAbsent(t *testing.T) {
	r := newReducer(t, Options{})
	r.Add(call("a", 0, "allow", 5, "abandoned"))
	rep := r.Report()
	require.Nil(t, rep.Groups[0].CostPerResolvedUSD)
	var b strings.Builder
	require.NoError(t, rep.WriteTable(&b))
	require.Contains(t, b.String(), "not measured")
}

func TestReadNDJSONAndCSV(t *testing.T) {
	nd := `{"run_id":"a","step":1,"decision":"allow","cost_microusd":100,"outcome":"case_resolved"}
{"run_id":"a","step":0,"decision":"budget_exceeded","cost_microusd":900,"outcome":""}

{"outcome":"escalated","cost_usd":0.25}
{"cost_microusd":40,"outcome":""}
`
	r := newReducer(t, Options{})
	require.NoError(t, ReadRecords(strings.NewReader(nd), "x.ndjson", r))
	require.Equal(t, []row{{"case_resolved", 1, 2, 1, 100}, {"escalated", 1, 1, 0, 250000}}, rows(t, r))
	require.Equal(t, int64(1), r.Stats().DroppedUntagged)
	require.Equal(t, int64(1), r.Stats().Records)

	csvIn := "run_id,step,decision,cost_microusd,outcome,extra\nb,0,allow,7,,x\nb,1,allow,8,abandoned,y\n"
	r = newReducer(t, Options{})
	require.NoError(t, readCSV(t, csvIn, "x.csv", r))
	require.Equal(t, []row{{"abandoned", 1, 2, 0, 15}}, rows(t, r))

	flat := "outcome,cost_usd\ncase_resolved,0.000420\nabandoned,0.000250\n"
	r = newReducer(t, Options{})
	require.NoError(t, readCSV(t, flat, "flat.csv", r))
	require.Equal(t, []row{{"abandoned", 1, 1, 0, 250}, {"case_resolved", 1, 1, 0, 420}}, rows(t, r))
}

func TestReadRecordErrors(t *testing.T) {
	cases := []struct {
		name, in string
		csv      bool
		want     []string
	}{
		{"json type", "{\"outcome\":\"a\",\"cost_microusd\":1}\n{\"run_id\":\"a\",\"cost_microusd\":\"12\"}\n", false, []string{"in.ndjson:2", "cost_microusd"}},
		{"json syntax", "{\"outcome\":\n", false, []string{"in.ndjson:1"}},
		{"not a record", "{\"attributes\":{\"foo\":1}}\n", false, []string{"in.ndjson:1", "not an outcome record"}},
		{"unknown field", "{\"foo\":1}\n", false, []string{"in.ndjson:1", `unknown field "foo"`}},
		{"bad cost_usd", "{\"outcome\":\"a\",\"cost_usd\":1e300}\n", false, []string{"in.ndjson:1", "cost_usd"}},
		{"csv int", "run_id,step,cost_microusd\na,1,x\n", true, []string{"in.csv:2", "field cost_microusd"}},
		{"csv negative step", "run_id,step\na,-1\n", true, []string{"in.csv:2", "field step"}},
		{"csv empty", "", true, []string{"in.csv", "header"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReducer(t, Options{})
			var err error
			if tc.csv {
				err = readCSV(t, tc.in, "in.csv", r)
			} else {
				err = ReadRecords(strings.NewReader(tc.in), "in.ndjson", r)
			}
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestWilson(t *testing.T) {
	z := math.Sqrt2 * math.Erfinv(0.95)
	require.InDelta(t, 1.959964, z, 1e-6)
	lo, hi := wilson(20, 40, z)
	// Hand computation: centre 0.5, half-width 0.14801.
	require.InDelta(t, 0.35199, lo, 1e-4)
	require.InDelta(t, 0.64801, hi, 1e-4)
	lo, hi = wilson(40, 40, z)
	require.InDelta(t, 0.91240, lo, 1e-4)
	require.InDelta(t, 1.0, hi, 1e-12)
}

// readCSV folds the CSV outcome records in as ReadRecordsFile folds a file
// called name (a .csv).
func readCSV(t *testing.T, in, name string, r *Reducer) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(in), 0o644))
	return ReadRecordsFile(path, r)
}

// TestSLOCountsFlatRecords: an outcomes export ({outcome, cost_usd}
// records, no time, no agent) is read by slo as by cost-per-correct: each
// record a run of the fleet, in every ratio, and with nothing timed the
// whole input is the burn window.
func TestSLOCountsFlatRecords(t *testing.T) {
	r := newReducer(t, Options{})
	for i := range 25 {
		tag := "case_resolved"
		if i%5 == 0 {
			tag = "abandoned"
		}
		r.AddRecord(tag, int64(1000+i))
	}
	require.EqualValues(t, 25, r.Report().Groups[0].Overall.Runs, "cost-per-correct counts 25 runs")
	rep, err := r.SLO(DefaultSLOOptions(), nil)
	require.NoError(t, err)
	fleet := rep.Subjects[0]
	require.EqualValues(t, 25, fleet.Runs)
	require.EqualValues(t, 25, rep.UnattributedRuns)
	for _, ind := range fleet.Indicators {
		switch ind.SLI {
		case "task_success":
			require.True(t, ind.Measured, ind.Reason)
			require.EqualValues(t, 25, ind.Events)
			require.EqualValues(t, 20, ind.Good)
			require.NotNil(t, ind.BurnRate, "nothing is timed: the burn window is the whole input")
		case "containment", "cost_discipline":
			require.EqualValues(t, 25, ind.Events, ind.SLI)
		}
	}
	require.Empty(t, rep.Window, "no run has a time: no window")
}
