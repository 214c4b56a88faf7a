package segfold

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"github.com/verdryx/verdryx/calls"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/tracegen"
)

// segRecordOf renders a call as an NDJSON/CSV record: run_id and step only
// when present, tool_calls null when null.
func segRecordOf(c calls.Call) map[string]any {
	m := map[string]any{
		"ts_millis": c.TSMillis, "model": c.Model, "decision": c.Decision,
		"input_tokens": c.InputTokens, "output_tokens": c.OutputTokens, "cost_microusd": c.CostMicroUSD,
		"agent_id": c.AgentID, "saved_microusd": c.SavedMicroUSD, "parent_run_id": c.ParentRunID,
		"on_behalf_of": c.OnBehalfOf, "outcome": c.Outcome, "key_id": c.KeyID, "unit": c.Unit,
		"tool_calls": c.ToolCalls,
	}
	if c.HasRunID {
		m["run_id"] = c.RunID
	}
	if c.HasStep {
		m["step"] = c.Step
	}
	return m
}

// TestRecordsReduceLikeSegments exports every fixture's calls as NDJSON and
// as CSV and checks both reduce to the report the Parquet segments give.
func TestRecordsReduceLikeSegments(t *testing.T) {
	cols := []string{"ts_millis", "run_id", "model", "decision", "input_tokens", "output_tokens", "cost_microusd",
		"step", "agent_id", "saved_microusd", "parent_run_id", "on_behalf_of", "outcome", "key_id", "unit", "tool_calls"}
	for _, fx := range tracegen.Fixtures() {
		t.Run(fx.Name, func(t *testing.T) {
			dir := segFixtureDir(fx.Name)
			r, err := outcome.NewReducer(outcome.Options{})
			require.NoError(t, err)
			_, err = ReduceDir(context.Background(), dir, r, DirOptions{})
			require.NoError(t, err)
			want := r.Report()

			segs, _, err := segment.List(dir)
			require.NoError(t, err)
			var nd bytes.Buffer
			var csvFiles [][]byte
			for _, s := range segs {
				var rows [][]string
				var segND bytes.Buffer
				hasRun := true
				err := segment.Read(s.Path, func(c calls.Call) error {
					b, err := json.Marshal(segRecordOf(c))
					if err != nil {
						return err
					}
					segND.Write(append(b, '\n'))
					hasRun = c.HasRunID
					row := make([]string, len(cols))
					for i, col := range cols {
						v := segRecordOf(c)[col]
						switch x := v.(type) {
						case nil:
						case *uint32:
							if x != nil {
								row[i] = strconv.FormatUint(uint64(*x), 10)
							}
						case string:
							row[i] = x
						default:
							b, _ := json.Marshal(x)
							row[i] = string(b)
						}
					}
					rows = append(rows, row)
					return nil
				})
				if segment.IsError(err) {
					continue // the corrupt fixture's bad segment, skipped whole
				}
				require.NoError(t, err)
				nd.Write(segND.Bytes())
				header := cols
				if !hasRun {
					header = append([]string{}, cols...)
					header[1] = "no_run_id"
				}
				var buf bytes.Buffer
				w := csv.NewWriter(&buf)
				require.NoError(t, w.Write(header))
				require.NoError(t, w.WriteAll(rows))
				csvFiles = append(csvFiles, buf.Bytes())
			}

			viaND, err := outcome.NewReducer(outcome.Options{})
			require.NoError(t, err)
			require.NoError(t, outcome.ReadRecords(&nd, "calls.ndjson", viaND))
			require.Equal(t, want.Groups, viaND.Report().Groups)

			viaCSV, err := outcome.NewReducer(outcome.Options{})
			require.NoError(t, err)
			tmp := t.TempDir()
			for i, b := range csvFiles {
				p := filepath.Join(tmp, strconv.Itoa(i)+".csv")
				require.NoError(t, os.WriteFile(p, b, 0o644))
				require.NoError(t, outcome.ReadRecordsFile(p, viaCSV))
			}
			require.Equal(t, want.Groups, viaCSV.Report().Groups)
		})
	}
}
