package outcome

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
)

// referenceFold is the NDJSON fold as it was before the record folder:
// each record converted to a Call (or a flat outcome and cost), then Add
// or AddRecord.
func referenceFold(src []byte, name string, r *Reducer) error {
	return calls.ScanNDJSON(bytes.NewReader(src), name, func(rec *calls.Record) error {
		str := func(f calls.Field) string { return string(rec.Strings[f]) }
		if rec.HasCostUSD() && !rec.HasField(calls.FieldCostMicroUSD) {
			r.AddRecord(str(calls.FieldOutcome), int64(math.Round(rec.CostUSD*1e6))) // checked by the decoder
			return r.Err()
		}
		if !rec.HasField(calls.FieldRunID) && !rec.HasField(calls.FieldOutcome) && !rec.HasField(calls.FieldCostMicroUSD) {
			return errors.New("not an outcome record: needs run_id, outcome, cost_microusd or cost_usd")
		}
		c := calls.Call{
			TSMillis: rec.TSMillis, RunID: str(calls.FieldRunID), HasRunID: rec.HasField(calls.FieldRunID),
			Model: str(calls.FieldModel), Decision: str(calls.FieldDecision), InputTokens: rec.InputTokens,
			OutputTokens: rec.OutputTokens, CostMicroUSD: rec.CostMicroUSD, Step: rec.Step, HasStep: rec.HasField(calls.FieldStep),
			AgentID: str(calls.FieldAgentID), SavedMicroUSD: rec.SavedMicroUSD, ParentRunID: str(calls.FieldParentRunID),
			OnBehalfOf: str(calls.FieldOnBehalfOf), Outcome: str(calls.FieldOutcome), KeyID: str(calls.FieldKeyID), Unit: str(calls.FieldUnit),
		}
		if rec.HasField(calls.FieldToolCalls) {
			v := rec.ToolCalls
			c.ToolCalls = &v
		}
		r.Add(c)
		return r.Err()
	})
}

// genFile writes n random per-call and flat records, with absent, null and
// empty fields, a few runs, agents, models and keys.
func genFile(rng *rand.Rand, n int, big bool) []byte {
	var b bytes.Buffer
	for i := range n {
		m := map[string]any{}
		pick := func(k string, vals ...any) {
			switch rng.IntN(6) {
			case 0: // absent
			case 1:
				m[k] = nil
			default:
				m[k] = vals[rng.IntN(len(vals))]
			}
		}
		if rng.IntN(15) == 0 {
			pick("outcome", "case_resolved", "escalated", "")
			m["cost_usd"] = rng.Float64()
			if rng.IntN(3) == 0 {
				m["cost_usd"] = nil
			}
		} else {
			pick("run_id", "r1", "r2", "r3", "run-é", "")
			pick("step", 0, 1, 2, 3)
			pick("decision", "allow", "killed", "wardryx_deny", "budget_exceeded")
			pick("cost_microusd", 0, 7, 100, -3)
			if big {
				pick("cost_microusd", int64(math.MaxInt64/3), 5)
			}
			pick("outcome", "case_resolved", "escalated", "abandoned", "")
			pick("agent_id", "agent://a.b/c", "agent://a.b/d", "weird agent", "")
			pick("model", "m1", "m2")
			pick("key_id", "k1", "k2")
			pick("ts_millis", 1_700_000_000_000+int64(i), 1_700_000_000_000+int64(i)*1000)
			pick("attributes", map[string]any{"x": []int{1}}, "s")
		}
		line, _ := json.Marshal(m)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestReadNDJSONSameReport: the record folder gives the same reports
// (cost per outcome and SLOs) and the same first error as the reference
// fold, for every grouping and with a time window.
func TestReadNDJSONSameReport(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	from := time.UnixMilli(1_700_000_000_000 + 20)
	optsList := []Options{{}, {By: "agent_id"}, {By: "key_id"}, {By: "model"}, {From: from}, {By: "model", From: from, To: from.Add(time.Hour)}}
	for i := range 300 {
		file := genFile(rng, 1+rng.IntN(80), i%10 == 0)
		if i%7 == 0 {
			file = append(file, `{"run_id":"r1","step":"x"}`+"\n"...)
		}
		for _, opts := range optsList {
			want, have := newReducer(t, opts), newReducer(t, opts)
			wantErr := referenceFold(file, "f.ndjson", want)
			haveErr := ReadRecords(bytes.NewReader(file), "f.ndjson", have)
			require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(haveErr), "file %s", file)
			wr, hr := want.Report(), have.Report()
			if wr.overflow != nil {
				// An overflowing report is refused (CheckedReport); which
				// addend overflows first, and so the saturated totals,
				// follow map order: not deterministic even between two
				// reference runs.
				require.Error(t, hr.overflow)
				continue
			}
			require.Equal(t, wr, hr, "file %s", file)
			ws, err1 := want.SLO(DefaultSLOOptions(), nil)
			hs, err2 := have.SLO(DefaultSLOOptions(), nil)
			require.Equal(t, err1, err2)
			require.Equal(t, ws, hs)
		}
	}
}

// TestReadNDJSONAllocs: once the runs and strings are interned, folding a
// record allocates nothing.
func TestReadNDJSONAllocs(t *testing.T) {
	var b bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&b, `{"ts_millis":%d,"run_id":"run-%d","model":"m","decision":"allow","cost_microusd":%d,"step":%d,"agent_id":"agent://a.b/c","outcome":"case_resolved"}`+"\n",
			1_700_000_000_000+i, i/10, i%37, i%10)
	}
	b.WriteString(`{"outcome":"escalated","cost_usd":0.5}` + "\n")
	file := b.Bytes()
	r := newReducer(t, Options{})
	require.NoError(t, ReadRecords(bytes.NewReader(file), "f.ndjson", r))
	reader := bytes.NewReader(file)
	allocs := testing.AllocsPerRun(5, func() {
		reader.Reset(file)
		if err := ReadRecords(reader, "f.ndjson", r); err != nil {
			t.Fatal(err)
		}
	})
	// The reader's buffer, the decoder and the one-row batch: a handful per
	// file, none per record (the flat records append to a growing list).
	require.Less(t, allocs, 40.0, "allocations per file of 2000 records")
}

// BenchmarkReadNDJSON folds a file of 10,000 per-call records (1,000 runs
// in flight) into a reducer, as cost-per-correct --input does; one op is
// the whole file, and allocs/record is reported beside allocs/op. After
// the first pass the runs and strings are interned: 0 per record.
func BenchmarkReadNDJSON(b *testing.B) {
	var buf bytes.Buffer
	const n = 10_000
	for i := range n {
		fmt.Fprintf(&buf, `{"ts_millis":%d,"run_id":"run-%08d","model":"claude-sonnet-4-5","decision":"allow",`+
			`"input_tokens":900,"output_tokens":150,"cost_microusd":%d,"step":%d,"agent_id":"agent://acme.example/bot-%d",`+
			`"key_id":"key-%d","tool_calls":1,"outcome":"case_resolved"}`+"\n", 1_764_565_200_000+i, i%1000, 2000+i%12000, i/1000, i%7, i%23)
	}
	file := buf.Bytes()
	r, err := NewReducer(Options{})
	if err != nil {
		b.Fatal(err)
	}
	rd := bytes.NewReader(file)
	b.SetBytes(int64(len(file)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		rd.Reset(file)
		if err := ReadRecords(rd, "b.ndjson", r); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*n), "allocs/record")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}
