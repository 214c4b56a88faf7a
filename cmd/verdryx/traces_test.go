package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/bench/traces"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/tracegen"
)

func tracesRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	code := report(err, &stderr)
	return stdout.String(), stderr.String(), code
}

func tracesFixture(name string) string { return filepath.Join("..", "..", "testdata", "traces", name) }

func TestCostPerCorrectTable(t *testing.T) {
	out, errOut, code := tracesRun(t, "cost-per-correct", "--traces", tracesFixture("basic"))
	require.Equal(t, 0, code, errOut)
	golden, err := os.ReadFile(filepath.Join(tracesFixture("basic"), "expected.txt"))
	require.NoError(t, err)
	// The table and summary lines are the golden report's.
	require.True(t, strings.HasPrefix(out, strings.SplitAfter(string(golden), "calls read: 9\n")[0]), out)
	require.Contains(t, out, "segments: 1 read, 0 skipped as bad, 2 other files ignored")
}

func TestCostPerCorrectJSONAndGrouping(t *testing.T) {
	out, errOut, code := tracesRun(t, "cost-per-correct", "--traces", tracesFixture("basic"), "--json", "--by", "model")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		By     string `json:"by"`
		Groups []struct {
			Key                string   `json:"key"`
			CostPerResolvedUSD *float64 `json:"cost_per_resolved_usd"`
			Overall            struct {
				Runs              int64 `json:"runs"`
				TotalCostMicroUSD int64 `json:"total_cost_microusd"`
			} `json:"overall"`
		} `json:"groups"`
		Traces struct {
			Segments int `json:"segments"`
		} `json:"traces"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, "model", rep.By)
	require.Len(t, rep.Groups, 2)
	require.Equal(t, "model-large", rep.Groups[0].Key)
	require.Equal(t, int64(0), rep.Groups[0].Overall.TotalCostMicroUSD) // r4's cache hit
	require.Equal(t, int64(1000), rep.Groups[1].Overall.TotalCostMicroUSD)
	require.Equal(t, 1, rep.Traces.Segments)
}

func TestCostPerCorrectWindow(t *testing.T) {
	// basic's calls are at minutes 0-8 of 2026-11-02: keep minutes 3-5.
	out, errOut, code := tracesRun(t, "cost-per-correct", "--traces", tracesFixture("basic"), "--json",
		"--from", "2026-11-02T00:03:00Z", "--to", "2026-11-02T00:06:00Z")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Stats struct {
			OutsideWindow int64 `json:"outside_window"`
		} `json:"stats"`
		Groups []struct {
			Overall struct {
				Calls int64 `json:"calls"`
			} `json:"overall"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, int64(3), rep.Groups[0].Overall.Calls)
	require.Equal(t, int64(6), rep.Stats.OutsideWindow)

	_, _, code = tracesRun(t, "cost-per-correct", "--traces", tracesFixture("basic"), "--to", "2026-11-01")
	require.Equal(t, 0, code)
	_, errOut, code = tracesRun(t, "cost-per-correct", "--traces", tracesFixture("basic"), "--from", "yesterday")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--from")
}

func TestCostPerCorrectInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "outcomes.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(`{"outcome":"case_resolved","cost_usd":0.00042}
{"outcome":"abandoned","cost_usd":0.00025}
`), 0o644))
	out, errOut, code := tracesRun(t, "cost-per-correct", "--input", path)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "cost per resolved outcome: $0.000670")

	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("outcome,cost_usd\nok,zero\n"), 0o644))
	_, errOut, code = tracesRun(t, "cost-per-correct", "--input", bad)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "bad.csv:2: field cost_usd")
}

func TestCostPerCorrectUsageAndBadSegments(t *testing.T) {
	_, errOut, code := tracesRun(t, "cost-per-correct")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "exactly one of --traces DIR, --input FILE or --nats URL")
	_, _, code = tracesRun(t, "cost-per-correct", "--traces", "x", "--input", "y")
	require.Equal(t, 2, code)
	_, errOut, code = tracesRun(t, "cost-per-correct", "--traces", tracesFixture("basic"), "--by", "decision")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "decision")
	_, _, code = tracesRun(t, "cost-per-correct", "--traces", filepath.Join(t.TempDir(), "absent"))
	require.Equal(t, 2, code)
	empty := t.TempDir()
	_, errOut, code = tracesRun(t, "cost-per-correct", "--traces", empty)
	require.Equal(t, 2, code, "an empty directory is an input error")
	require.Contains(t, errOut, "holds no TokenFuse segments")
	out, errOut, code := tracesRun(t, "cost-per-correct", "--traces", empty, "--allow-empty")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "no TokenFuse segments")
	require.Contains(t, out, "calls read: 0")
	emptyFile := filepath.Join(empty, "calls.ndjson")
	require.NoError(t, os.WriteFile(emptyFile, nil, 0o644))
	_, errOut, code = tracesRun(t, "cost-per-correct", "--input", emptyFile)
	require.Equal(t, 2, code, "an empty file is an input error")
	require.Contains(t, errOut, "holds no records")

	// The fixture's bad chunk is ts_millis, a column a cost report does
	// not decode but checks: the segment is skipped, as slo and the
	// worker (which read it) skip it.
	out, errOut, code = tracesRun(t, "cost-per-correct", "--traces", tracesFixture("corrupt"))
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "skipped segment calls-9-20-00000002.parquet: row group 1: column ts_millis")
	require.Contains(t, out, "1 skipped as bad")
	_, errOut, code = tracesRun(t, "cost-per-correct", "--traces", tracesFixture("corrupt"), "--strict")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "row group 1")

	// The same segments, whole, then with the cost_microusd chunk of the
	// same row group broken instead.
	dir := t.TempDir()
	for _, fx := range tracegen.Fixtures() {
		if fx.Name == "corrupt" {
			for i := range fx.Segments {
				fx.Segments[i].CorruptRowGroup = -1
			}
			require.NoError(t, tracegen.WriteFixture(dir, fx))
		}
	}
	out, errOut, code = tracesRun(t, "cost-per-correct", "--traces", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "calls read: 5", "the rewritten segment reads whole")
	require.NoError(t, tracegen.CorruptColumnChunk(filepath.Join(dir, "calls-9-20-00000002.parquet"), 1, "cost_microusd"))
	out, errOut, code = tracesRun(t, "cost-per-correct", "--traces", dir)
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "skipped segment calls-9-20-00000002.parquet: row group 1: column cost_microusd")
	require.Contains(t, out, "1 skipped as bad")
	_, errOut, code = tracesRun(t, "cost-per-correct", "--traces", dir, "--strict")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "row group 1")
}

func TestSLOCommand(t *testing.T) {
	out, errOut, code := tracesRun(t, "slo", "--traces", tracesFixture("slo"))
	require.Equal(t, 0, code, errOut)
	golden, err := os.ReadFile(filepath.Join(tracesFixture("slo"), "slo.txt"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, string(golden)))

	events := filepath.Join(t.TempDir(), "events.ndjson")
	out, errOut, code = tracesRun(t, "slo", "--traces", tracesFixture("slo"), "--json", "--events", events)
	require.Equal(t, 0, code, errOut)
	var rep struct {
		EventsWritten int `json:"events_written"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 2, rep.EventsWritten) // bad: task_success and containment exhausted
	vr, err := envelope.VerifyFile(events)
	require.NoError(t, err)
	require.Empty(t, vr.Breaks)
	f, err := os.Open(events)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	var slis []string
	for sc.Scan() {
		var ev envelope.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		require.Equal(t, "slo_burn", ev.Type)
		require.Equal(t, "agent://acme.example/support/bad", ev.AgentID)
		require.Equal(t, "high", ev.Severity)
		slis = append(slis, ev.Data["sli"].(string))
	}
	require.Equal(t, []string{"task_success", "containment"}, slis)

	_, errOut, code = tracesRun(t, "slo", "--traces", tracesFixture("slo"), "--target", "1")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "target")
	_, _, code = tracesRun(t, "slo")
	require.Equal(t, 2, code)
	_, errOut, code = tracesRun(t, "slo", "--traces", tracesFixture("slo"), "--scores-db", filepath.Join(t.TempDir(), "none.db"))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--scores-db")
}

func TestBenchTracesSmall(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := tracesRun(t, "bench", "traces", "--rows", "20000", "--row-group", "5000", "--rounds", "1", "--dir", dir, "--json")
	require.Equal(t, 0, code, errOut)
	var res traces.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Shapes, 2)
	require.Equal(t, int64(20000), res.Shapes[0].Rows)
	require.True(t, res.Shapes[0].Generated)
	require.Greater(t, res.Shapes[1].ReduceRowsPerSec, 0.0)
	require.Greater(t, res.Shapes[1].ScanRowsPerSec, 0.0)
	require.Greater(t, res.Shapes[1].Runs, int64(0))
	// A second run reuses the segments.
	out, _, code = tracesRun(t, "bench", "traces", "--rounds", "1", "--dir", dir)
	require.Equal(t, 0, code)
	require.Contains(t, out, "20000 rows")
	require.NotContains(t, out, "generated")
}

func TestSLOScoresDB(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "quality.db")
	st, err := store.Open(ctx, db, store.Options{})
	require.NoError(t, err)
	t0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	var scores []grading.Score
	for i := range 30 {
		v := 1.0
		if i%3 == 0 {
			v = 0.5 // 10 of 30 below the 0.8 floor
		}
		scores = append(scores, grading.Score{CaseID: fmt.Sprintf("case-%02d", i), Grader: "exact", Value: v})
	}
	require.NoError(t, st.SaveRun(ctx, grading.Run{ID: "eval-1", EvalSetID: "set", Model: "stub",
		AgentID: "agent://acme.example/support/good", StartedAt: t0, FinishedAt: t0.Add(time.Minute), Scores: scores}))
	require.NoError(t, st.Close())

	out, errOut, code := tracesRun(t, "slo", "--traces", tracesFixture("slo"), "--scores-db", db, "--json")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Subjects []struct {
			Subject    string `json:"subject"`
			Indicators []struct {
				SLI      string   `json:"sli"`
				Measured bool     `json:"measured"`
				Events   int64    `json:"events"`
				Good     int64    `json:"good"`
				Observed *float64 `json:"observed"`
			} `json:"indicators"`
		} `json:"subjects"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	found := false
	for _, s := range rep.Subjects {
		for _, ind := range s.Indicators {
			if ind.SLI != "quality_floor" {
				continue
			}
			switch s.Subject {
			case "agent://acme.example/support/good", "fleet":
				require.True(t, ind.Measured, s.Subject)
				require.Equal(t, int64(30), ind.Events)
				require.Equal(t, int64(20), ind.Good)
				found = true
			default:
				require.False(t, ind.Measured, s.Subject)
			}
		}
	}
	require.True(t, found)
}

// TestRecordsSample reads the documented per-call sample
// (testdata/records/calls.ndjson, docs/traces.md) the same way through
// every command that reads traces: cost-per-correct, slo and report take
// it as --input.
func TestRecordsSample(t *testing.T) {
	const sample = "../../testdata/records/calls.ndjson"
	out, errOut, code := tracesRun(t, "cost-per-correct", "--input", sample)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "cost per resolved outcome: $0.000460 (all spend $0.000460 / 1 resolved runs)")
	assert.Contains(t, out, "calls read: 4, flat records: 1")

	out, errOut, code = tracesRun(t, "slo", "--input", sample, "--min-events", "1", "--json")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Subjects []struct {
			Subject    string `json:"subject"`
			Indicators []struct {
				SLI    string `json:"sli"`
				Events int64  `json:"events"`
			} `json:"indicators"`
		} `json:"subjects"`
		Traces any `json:"traces"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.NotEmpty(t, rep.Subjects)
	assert.Nil(t, rep.Traces, "no trace directory was read")
	events := map[string]int64{}
	for _, ind := range rep.Subjects[0].Indicators {
		events[ind.SLI] = ind.Events
	}
	assert.Equal(t, int64(3), events["task_success"], "the three runs cost-per-correct counts, the flat record's included: %s", out)

	_, errOut, code = tracesRun(t, "slo", "--input", sample, "--traces", tracesFixture("slo"))
	assert.Equal(t, 2, code, "one source at a time")
	assert.Contains(t, errOut, "give exactly one of --traces DIR, --input FILE or --nats URL")

	cleanEvalEnv(t)
	db, _ := sampleStore(t)
	page := filepath.Join(t.TempDir(), "report.html")
	_, errOut, code = runCLI(t, "report", "--db", db, "--input", sample, "--out", page)
	require.Equal(t, exitOK, code, errOut)
	raw, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "$0.000460 per resolved outcome")
	assert.Contains(t, string(raw), "records "+sample)
	_, _, code = runCLI(t, "report", "--db", db, "--input", sample, "--traces", tracesFixture("slo"), "--out", page)
	assert.Equal(t, exitUsage, code)
}
