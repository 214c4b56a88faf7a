package evalrun_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
	"github.com/verdryx/verdryx/store"
)

const agent = "agent://acme.example/support/bot"

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "verdryx.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

type spanRec struct {
	name, runID, agentID string
	data                 map[string]any
}

type spanSink struct{ got []spanRec }

func (s *spanSink) Span(_ context.Context, name, runID, agentID string, _, _ time.Time, data map[string]any) {
	s.got = append(s.got, spanRec{name, runID, agentID, data})
}

func readEvents(t *testing.T, path string) []envelope.Event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []envelope.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev envelope.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		out = append(out, ev)
	}
	return out
}

func TestExecuteSavesEmitsAndChecksDrift(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	evPath := filepath.Join(t.TempDir(), "events.ndjson")
	w, err := envelope.OpenWriter(evPath, envelope.WriterOptions{})
	require.NoError(t, err)
	spans := &spanSink{}
	set := json.RawMessage(`{"id":"s","cases":[
		{"id":"a","prompt":"yes","expected":"yes"},
		{"id":"b","prompt":"no","expected":"yes"},
		{"id":"c","prompt":"case_resolved","grader":"outcome_tag"}]}`)
	deps := evalrun.Deps{Store: st, Events: producer.File{W: w}, Spans: spans, Version: "test"}

	first, err := evalrun.Execute(ctx, deps, evalrun.Request{RequestID: "req-1", EvalSet: set, AgentID: agent})
	require.NoError(t, err)
	require.True(t, first.Saved)
	require.NotNil(t, first.Run.MeanScore)
	assert.InDelta(t, 2.0/3, *first.Run.MeanScore, 1e-12)
	assert.Equal(t, 4, first.EventsWritten, "three quality_score and one eval_run")

	stored, err := st.Run(ctx, first.Run.ID)
	require.NoError(t, err)
	assert.Equal(t, "req-1", stored.RequestID)
	assert.Equal(t, first.Run.EvalSetDigest, stored.Provenance.EvalSetDigest)

	bl, err := st.CreateBaseline(ctx, first.Run.ID, "v1", time.Now())
	require.NoError(t, err)
	second, err := evalrun.Execute(ctx, deps, evalrun.Request{EvalSet: set, AgentID: agent, BaselineID: bl.ID, Window: 3})
	require.NoError(t, err)
	require.NotNil(t, second.Drift)
	assert.Equal(t, drift.VerdictOnTrack, second.Drift.Verdict)
	assert.Equal(t, []string{second.Run.ID}, second.Drift.WindowRunIDs, "the baseline's own run is not in its window")
	byLabel, err := evalrun.CheckDrift(ctx, st, evalrun.DriftRequest{BaselineID: "v1"})
	require.NoError(t, err, "a drift check takes a baseline label")
	assert.Equal(t, bl.ID, byLabel.BaselineID, "and reports the baseline's id")
	require.NoError(t, w.Close())

	// The result is JSON for the worker's reply.
	b, err := json.Marshal(second)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"verdict":"on-track"`)

	rep, err := envelope.VerifyFile(evPath)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep)
	evs := readEvents(t, evPath)
	require.Len(t, evs, 8, "on-track drift emits no event")
	last := evs[3]
	assert.Equal(t, "eval_run", last.Type)
	assert.Equal(t, first.Run.ID, last.RunID)
	for _, k := range []string{"model", "cases", "mean_score", "total_tokens", "total_cost_usd", "unanswered", "eval_set_digest", "verdryx_version", "graders"} {
		assert.Contains(t, last.Data, k)
	}
	assert.Equal(t, "quality_score", evs[0].Type)
	for _, k := range []string{"case_id", "value", "tokens", "cost_usd"} {
		assert.Contains(t, evs[0].Data, k)
	}
	assert.NotContains(t, evs[0].Data, "run_id", "run_id is on the envelope, not in data")

	require.Len(t, spans.got, 3, "eval, eval, drift")
	assert.Equal(t, "verdryx.drift", spans.got[2].name)
	assert.Equal(t, first.Run.ID, spans.got[2].runID, "the drift span joins the baseline run's trace")
	assert.Equal(t, "on-track", spans.got[2].data["verdict"])
}

func TestExecuteWithoutAgentSkipsEvents(t *testing.T) {
	evPath := filepath.Join(t.TempDir(), "events.ndjson")
	w, err := envelope.OpenWriter(evPath, envelope.WriterOptions{})
	require.NoError(t, err)
	defer w.Close()
	res, err := evalrun.Execute(context.Background(), evalrun.Deps{Events: producer.File{W: w}},
		evalrun.Request{EvalSet: json.RawMessage(`{"id":"s","cases":[{"id":"a","prompt":"x","expected":"x"}]}`)})
	require.NoError(t, err)
	assert.False(t, res.Saved, "no store, nothing saved")
	assert.Zero(t, res.EventsWritten)
	assert.Equal(t, 2, res.EventsSkipped, "no agent id: skipped and counted, never invented")
}

func TestExecuteBadRequests(t *testing.T) {
	ctx := context.Background()
	for name, req := range map[string]evalrun.Request{
		"no set":        {},
		"both sets":     {EvalSetPath: "x.json", EvalSet: json.RawMessage(`{}`)},
		"invalid set":   {EvalSet: json.RawMessage(`{"id":"s","cases":[{"id":"a","grader":"nope"}]}`)},
		"unknown model": {EvalSet: json.RawMessage(`{"id":"s","cases":[{"id":"a","prompt":"x","expected":"x"}]}`), Model: "gpt-9"},
		"missing file":  {EvalSetPath: filepath.Join(t.TempDir(), "absent.json")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := evalrun.Execute(ctx, evalrun.Deps{}, req)
			assert.ErrorIs(t, err, grading.ErrBadRequest)
		})
	}
	st := openStore(t)
	_, err := evalrun.Execute(ctx, evalrun.Deps{Store: st}, evalrun.Request{
		EvalSet: json.RawMessage(`{"id":"s","cases":[{"id":"a","prompt":"x","expected":"x"}]}`), BaselineID: "bl-missing"})
	assert.ErrorIs(t, err, grading.ErrBadRequest)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func grimoirePath(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "testdata", "grimoire", "evalset.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("committed grimoire fixture missing (renamed or deleted?): %v", err)
	}
	return p
}

func TestExecuteGrimoireThroughOfflinePipeline(t *testing.T) {
	res, err := evalrun.Execute(context.Background(), evalrun.Deps{Version: "test"}, evalrun.Request{EvalSetPath: grimoirePath(t)})
	require.NoError(t, err)
	assert.Equal(t, 7, res.Run.Cases)
	assert.Equal(t, 7, res.Run.GradedN, "every golden case is graded by the offline pipeline")
	assert.NotEmpty(t, res.Run.Provenance.CorpusDigest)
	assert.NotEmpty(t, res.Run.Provenance.IndexGeneration)
	for _, s := range res.Run.Scores {
		assert.Equal(t, grading.GraderRAG, s.Grader)
		assert.NotEmpty(t, s.Checks, "case %s", s.CaseID)
		failing := s.Failing()
		assert.Equal(t, len(failing) == 0, s.Value == 1, "case %s: strict 1/0 score follows the checks", s.CaseID)
	}
}

// mutatingAsker answers through the real pipeline, then swaps the
// answer for one naming a sibling source's number.
type mutatingAsker struct {
	inner grading.RAGAsker
	to    string
}

func (m mutatingAsker) Generation() string { return m.inner.Generation() }
func (m mutatingAsker) Ask(ctx context.Context, q string) (rag.Record, error) {
	rec, err := m.inner.Ask(ctx, q)
	if err != nil {
		return rec, err
	}
	rec.Answer = rec.Answer + " Some say " + m.to + "."
	return rec, nil
}

func TestRAGGraderNamesFailingChecks(t *testing.T) {
	path := grimoirePath(t)
	cases, err := golden.Load(filepath.Join(filepath.Dir(path), "golden.json"))
	require.NoError(t, err)
	var gc golden.Case
	for _, g := range cases {
		if len(g.ForbiddenValues) > 0 && !g.ExpectAbstention {
			gc = g
			break
		}
	}
	require.NotEmpty(t, gc.CaseID, "the golden set has a case with forbidden values")
	deps := evalrun.Deps{RAG: func(ctx context.Context, corpus string, m llm.Model) (grading.RAGAsker, error) {
		inner, err := grading.OfflineRAG(ctx, corpus, m)
		return mutatingAsker{inner: inner, to: gc.ForbiddenValues[0]}, err
	}}
	res, err := evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSetPath: path})
	require.NoError(t, err)
	for _, s := range res.Run.Scores {
		if s.CaseID != gc.CaseID {
			continue
		}
		assert.Equal(t, 0.0, s.Value, "a leaked sibling value fails the case")
		assert.Contains(t, s.Failing(), golden.CheckForbiddenAbsent)
		return
	}
	t.Fatalf("case %s not in the run", gc.CaseID)
}

func TestRAGAskFailureIsUnmeasured(t *testing.T) {
	deps := evalrun.Deps{RAG: func(context.Context, string, llm.Model) (grading.RAGAsker, error) {
		return failingAsker{}, nil
	}}
	res, err := evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSetPath: grimoirePath(t)})
	require.NoError(t, err)
	assert.Nil(t, res.Run.MeanScore)
	assert.Equal(t, 7, res.Run.Unanswered)
	assert.Contains(t, res.Run.Scores[0].Unmeasured, "rag ask: index offline")
}

type failingAsker struct{}

func (failingAsker) Generation() string { return "gen-x" }
func (failingAsker) Ask(context.Context, string) (rag.Record, error) {
	return rag.Record{}, errors.New("index offline")
}

// TestExecuteRefusesSetFailingItsEvidence sends the worker's eval request
// for a copy of the grimoire set whose case forbids a phrase its own
// expected chunk states: Execute must refuse it as a bad request naming
// the case and the check, before grading anything.
func TestExecuteRefusesSetFailingItsEvidence(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"corpus.json", "evalset.json", "golden.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "grimoire", f))
		require.NoError(t, err)
		if f == "golden.json" {
			var g map[string]any
			require.NoError(t, json.Unmarshal(b, &g))
			for _, c := range g["cases"].([]any) {
				if c := c.(map[string]any); c["case_id"] == "conditional-shadeglass-harvest" {
					c["forbidden"] = append(c["forbidden"].([]any), "entirely in shade")
				}
			}
			b, err = json.Marshal(g)
			require.NoError(t, err)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	_, err := evalrun.Execute(context.Background(), evalrun.Deps{Version: "test"}, evalrun.Request{EvalSetPath: filepath.Join(dir, "evalset.json")})
	require.ErrorIs(t, err, grading.ErrBadRequest)
	assert.Contains(t, err.Error(), `"conditional-shadeglass-harvest"`)
	assert.Contains(t, err.Error(), golden.CheckForbiddenAbsent)
	assert.Contains(t, err.Error(), "fail their own evidence")
}
