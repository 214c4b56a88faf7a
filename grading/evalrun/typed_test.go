package evalrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/provider/typryx"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/testkit/typryxtest"
)

const typedKey = "tpx_grading_key_5e4d3c2b1a"

// typedSet has three labelled noul cases, one unlabelled one and an exact
// case beside them.
const typedSet = `{"id":"typed-set","cases":[
	{"id":"a","grader":"typed","prompt":"task a","expected":"true"},
	{"id":"b","grader":"typed","prompt":"task b","expected":"false"},
	{"id":"c","grader":"typed","prompt":"task c","expected":"true"},
	{"id":"d","grader":"typed","prompt":"task d"},
	{"id":"e","prompt":"same","expected":"same"}]}`

// byTask answers each ask with replies[task] (Noulp(0.5) when absent).
func byTask(replies map[string]typryxtest.Reply) func(typryxtest.Ask) typryxtest.Reply {
	return func(a typryxtest.Ask) typryxtest.Reply {
		if r, ok := replies[a.State["task"]]; ok {
			return r
		}
		return typryxtest.Noulp(0.5)
	}
}

func typedFake(t *testing.T, opts typryxtest.Options) *typryxtest.Server {
	t.Helper()
	if opts.Key == "" {
		opts.Key = typedKey
	}
	s := typryxtest.New(opts)
	t.Cleanup(s.Close)
	return s
}

func typedGrader(t *testing.T, url, template string, timeout time.Duration) *grading.Typed {
	t.Helper()
	c, err := typryx.New(typryx.Options{BaseURL: url, Key: typedKey, Timeout: timeout})
	require.NoError(t, err)
	return &grading.Typed{Client: c, Template: template}
}

func TestTypedGradesCountsUnansweredApartAndPostsLabels(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	evPath := filepath.Join(t.TempDir(), "events.ndjson")
	w, err := envelope.OpenWriter(evPath, envelope.WriterOptions{})
	require.NoError(t, err)
	spans := &spanSink{}
	fake := typedFake(t, typryxtest.Options{Answer: byTask(map[string]typryxtest.Reply{
		"task a": typryxtest.Noulp(0.9),
		"task b": typryxtest.Noulp(0.2),
		"task c": {Unanswered: "backend_error"},
		"task d": {Unanswered: "timeout"},
	})})
	deps := evalrun.Deps{Store: st, Events: producer.File{W: w}, Spans: spans, Version: "test",
		Typed: typedGrader(t, fake.URL, "", time.Second)}

	res, err := evalrun.Execute(ctx, deps, evalrun.Request{EvalSet: json.RawMessage(typedSet), AgentID: agent})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	run := res.Run
	require.True(t, res.Saved)

	// Scores: p(true) for the answered, unmeasured (not 0) for the unanswered.
	byID := map[string]grading.Score{}
	for _, s := range run.Scores {
		byID[s.CaseID] = s
	}
	assert.InDelta(t, 0.9, byID["a"].Value, 1e-12)
	assert.InDelta(t, 0.2, byID["b"].Value, 1e-12)
	for id, reason := range map[string]string{"c": "backend_error", "d": "timeout"} {
		s := byID[id]
		assert.False(t, s.Graded(), id)
		assert.True(t, s.Unanswered(), id)
		assert.Equal(t, "typryx unanswered: "+reason, s.Unmeasured)
		require.NotNil(t, s.Typed)
		assert.Equal(t, reason, s.Typed.Reason)
		assert.NotEmpty(t, s.Typed.AnswerID)
	}
	require.NotNil(t, run.MeanScore)
	assert.InDelta(t, (0.9+0.2+1)/3, *run.MeanScore, 1e-12, "the mean is over the answered and the exact case only")
	require.NotNil(t, run.Typed)
	assert.Equal(t, 4, run.Typed.Asked)
	assert.Equal(t, 2, run.Typed.Answered)
	assert.Equal(t, 2, run.Typed.Unanswered)
	assert.Equal(t, map[string]int{"backend_error": 1, "timeout": 1}, run.Typed.Reasons)
	assert.Equal(t, "backend_error: 1, timeout: 1", run.Typed.ReasonsText())
	assert.Equal(t, []grading.TypedUnanswered{
		{CaseID: "c", AnswerID: byID["c"].Typed.AnswerID, Reason: "backend_error"},
		{CaseID: "d", AnswerID: byID["d"].Typed.AnswerID, Reason: "timeout"},
	}, run.Typed.UnansweredCases)
	assert.Equal(t, 2, run.Typed.LabelsPosted)

	// What was asked: the task and the output, the run id, the template.
	asks := fake.Asks()
	require.Len(t, asks, 4)
	for _, a := range asks {
		assert.Equal(t, typryx.DefaultTemplate, a.Template)
		assert.Equal(t, run.ID, a.RunID)
		assert.Equal(t, a.State["task"], a.State["final_answer"], "the stub echoes the prompt")
		assert.Len(t, a.State, 2, "no rubric, no case id")
	}
	// Labels: the answered, labelled cases only, for their exact answers.
	outs := fake.Outcomes()
	require.Len(t, outs, 2)
	assert.Equal(t, byID["a"].Typed.AnswerID, outs[0].AnswerID)
	assert.Equal(t, "true", string(outs[0].Truth))
	assert.Equal(t, byID["b"].Typed.AnswerID, outs[1].AnswerID)
	assert.Equal(t, "false", string(outs[1].Truth))
	for _, o := range outs {
		assert.Equal(t, grading.TypedLabelSource, o.Source)
	}

	// The store keeps the verdicts, the unanswered with their answer ids.
	stored, err := st.Run(ctx, run.ID)
	require.NoError(t, err)
	assert.Equal(t, run.Scores, stored.Scores)
	assert.Equal(t, run.Typed, grading.Summarize(stored).Typed)
	assert.Equal(t, "eval.outcome_met", stored.Provenance.Graders["typed"]["template"])

	// The eval_run event counts them.
	evs := readEvents(t, evPath)
	var evalRun *envelope.Event
	for i := range evs {
		if evs[i].Type == "eval_run" {
			evalRun = &evs[i]
		}
	}
	require.NotNil(t, evalRun)
	assert.Equal(t, "2", fmt.Sprint(evalRun.Data["unanswered"]))
	typedData, ok := evalRun.Data["typed"].(map[string]any)
	require.True(t, ok, "%v", evalRun.Data["typed"])
	assert.Equal(t, "2", fmt.Sprint(typedData["unanswered"]))
	assert.Equal(t, "4", fmt.Sprint(typedData["asked"]))
	assert.Len(t, evs, 4, "a quality_score per graded case (a, b, e) and the eval_run: none for the unanswered")

	require.Len(t, spans.got, 1)
	assert.EqualValues(t, 2, spans.got[0].data["unanswered"])
	assert.NotNil(t, spans.got[0].data["typed"])

	// No byte of the key in the store, the events or the result.
	require.NoError(t, st.Close())
	for _, p := range []string{st.Path(), st.Path() + "-wal", evPath} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		assert.False(t, bytes.Contains(b, []byte(typedKey)), "key in %s", p)
	}
	b, err := json.Marshal(res)
	require.NoError(t, err)
	assert.NotContains(t, string(b), typedKey)
}

func TestTypedScoreTemplateIsTheMeanLevelOverTheTop(t *testing.T) {
	fake := typedFake(t, typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply {
		return typryxtest.Reply{Probabilities: map[string]float64{"0": 0.1, "1": 0.1, "2": 0.2, "3": 0.2, "4": 0.4}}
	}})
	set := `{"id":"s","cases":[{"id":"q","grader":"typed","prompt":"p","expected":"3"}]}`
	res, err := evalrun.Execute(context.Background(), evalrun.Deps{Typed: typedGrader(t, fake.URL, typryxtest.Score, time.Second)},
		evalrun.Request{EvalSet: json.RawMessage(set)})
	require.NoError(t, err)
	want := (0*0.1 + 1*0.1 + 2*0.2 + 3*0.2 + 4*0.4) / 4
	assert.InDelta(t, want, res.Run.Scores[0].Value, 1e-12)
	outs := fake.Outcomes()
	require.Len(t, outs, 1)
	assert.Equal(t, "3", string(outs[0].Truth), "a score label is posted as its level")
}

func TestTypedRefusalsFailTheRunWithNothingSaved(t *testing.T) {
	cases := []struct {
		name     string
		template string
		key      string
		reply    typryxtest.Reply
		status   int
		code     string
	}{
		{name: "401", key: "some-other-key-value", status: 401, code: "unauthorized"},
		{name: "404 unknown template", template: "no.such", status: 404, code: "unknown_template"},
		{name: "404 on ask", reply: typryxtest.Reply{Status: 404, Code: "unknown_template"}, status: 404, code: "unknown_template"},
		{name: "400", reply: typryxtest.Reply{Status: 400, Code: "bad_state"}, status: 400, code: "bad_state"},
		{name: "413", reply: typryxtest.Reply{Status: 413, Code: "state_too_large"}, status: 413, code: "state_too_large"},
		{name: "429", reply: typryxtest.Reply{Status: 429, Code: "over_hourly_cap"}, status: 429, code: "over_hourly_cap"},
		{name: "500", reply: typryxtest.Reply{Status: 500, Code: "internal"}, status: 500, code: "internal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t)
			evPath := filepath.Join(t.TempDir(), "events.ndjson")
			w, err := envelope.OpenWriter(evPath, envelope.WriterOptions{})
			require.NoError(t, err)
			defer w.Close()
			// Case "b" is refused; the others are answered, and labelled.
			fake := typedFake(t, typryxtest.Options{Key: tc.key, Answer: byTask(map[string]typryxtest.Reply{
				"task a": typryxtest.Noulp(0.9), "task b": tc.reply, "task c": typryxtest.Noulp(0.9), "task d": typryxtest.Noulp(0.9),
			})})
			deps := evalrun.Deps{Store: st, Events: producer.File{W: w}, Typed: typedGrader(t, fake.URL, tc.template, time.Second)}
			_, err = evalrun.Execute(ctx, deps, evalrun.Request{EvalSet: json.RawMessage(typedSet), AgentID: agent})
			require.ErrorIs(t, err, grading.ErrTypedService)
			assert.NotErrorIs(t, err, grading.ErrBadRequest)
			var ref *typryx.RefusalError
			require.ErrorAs(t, err, &ref)
			assert.Equal(t, tc.status, ref.Status)
			assert.Equal(t, tc.code, ref.Code)
			assert.Contains(t, err.Error(), ref.Error())
			assert.NotContains(t, err.Error(), typedKey)
			runs, err := st.Runs(ctx)
			require.NoError(t, err)
			assert.Empty(t, runs, "nothing saved")
			assert.Empty(t, fake.Outcomes(), "no label posted for a run that failed")
			b, _ := os.ReadFile(evPath)
			assert.Empty(t, b, "no event")
		})
	}
}

func TestTypedSlowOrMalformedTypryxFailsTheRun(t *testing.T) {
	for name, rep := range map[string]typryxtest.Reply{
		"slow":      {Hang: true},
		"malformed": {Raw: `{"answer_id":"x","surprise":true}`},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			fake := typedFake(t, typryxtest.Options{Answer: byTask(map[string]typryxtest.Reply{"task c": rep})})
			_, err := evalrun.Execute(context.Background(), evalrun.Deps{Store: st, Typed: typedGrader(t, fake.URL, "", 200*time.Millisecond)},
				evalrun.Request{EvalSet: json.RawMessage(typedSet)})
			require.ErrorIs(t, err, grading.ErrTypedService)
			if name == "slow" {
				require.ErrorIs(t, err, typryx.ErrUnreachable)
			} else {
				require.ErrorIs(t, err, typryx.ErrMalformed)
			}
			runs, err := st.Runs(context.Background())
			require.NoError(t, err)
			assert.Empty(t, runs)
		})
	}
}

func TestTypedLabelsAreCheckedBeforeAnythingIsAsked(t *testing.T) {
	for name, tc := range map[string]struct{ template, label string }{
		"level on a noul":          {typryxtest.Noul, "3"},
		"true on a score":          {typryxtest.Score, "true"},
		"level above the top":      {typryxtest.Score, "5"},
		"choice has no order":      {typryxtest.Choice, "1"},
		"choice refused unlabeled": {typryxtest.Choice, ""},
	} {
		t.Run(name, func(t *testing.T) {
			fake := typedFake(t, typryxtest.Options{})
			c := `{"id":"q","grader":"typed","prompt":"p"}`
			if tc.label != "" {
				c = `{"id":"q","grader":"typed","prompt":"p","expected":"` + tc.label + `"}`
			}
			_, err := evalrun.Execute(context.Background(), evalrun.Deps{Typed: typedGrader(t, fake.URL, tc.template, time.Second)},
				evalrun.Request{EvalSet: json.RawMessage(`{"id":"s","cases":[` + c + `]}`)})
			require.ErrorIs(t, err, grading.ErrBadRequest)
			assert.Empty(t, fake.Asks(), "nothing asked")
		})
	}
	_, err := grading.ParseEvalSet([]byte(`{"id":"s","cases":[{"id":"q","grader":"typed","prompt":"p","expected":"maybe"}]}`), "")
	require.ErrorContains(t, err, `field "expected": a typed label`)
	_, err = grading.ParseEvalSet([]byte(`{"id":"s","cases":[{"id":"q","grader":"typed"}]}`), "")
	require.ErrorContains(t, err, `field "prompt"`)
}

func TestTypedCasesNeedTypryxEnabled(t *testing.T) {
	_, err := evalrun.Execute(context.Background(), evalrun.Deps{}, evalrun.Request{EvalSet: json.RawMessage(typedSet)})
	require.ErrorIs(t, err, grading.ErrBadRequest)
	assert.ErrorContains(t, err, "--typed-url")
}

func TestTypedFailedLabelPostKeepsTheScore(t *testing.T) {
	answers := byTask(map[string]typryxtest.Reply{"task a": typryxtest.Noulp(0.9), "task b": typryxtest.Noulp(0.2)})
	ok := typedFake(t, typryxtest.Options{Answer: answers})
	bad := typedFake(t, typryxtest.Options{Answer: answers, OutcomeStatus: 503})
	var means []float64
	var sums []*grading.TypedSummary
	for _, f := range []*typryxtest.Server{ok, bad} {
		st := openStore(t)
		res, err := evalrun.Execute(context.Background(), evalrun.Deps{Store: st, Typed: typedGrader(t, f.URL, "", time.Second)},
			evalrun.Request{EvalSet: json.RawMessage(typedSet)})
		require.NoError(t, err)
		require.True(t, res.Saved)
		means = append(means, *res.Run.MeanScore)
		sums = append(sums, res.Run.Typed)
	}
	assert.Equal(t, means[0], means[1], "a failed post does not change the score")
	assert.Equal(t, 3, sums[0].LabelsPosted)
	assert.Equal(t, 0, sums[1].LabelsPosted)
	assert.Equal(t, 3, sums[1].LabelsFailed)
}

// TestTypedOppositeLabelsMoveTheScore is the typed grader's mutation
// check: a typryx that answers every labelled case against its label must
// score each one on the other side of 0.5 and regress the run against a
// baseline of the agreeing typryx.
func TestTypedOppositeLabelsMoveTheScore(t *testing.T) {
	ctx := context.Background()
	set, err := grading.LoadEvalSet(filepath.Join("..", "..", "testdata", "typed", "evalset.json"))
	require.NoError(t, err)
	labels := map[string]string{}
	for _, c := range set.Cases {
		if c.Kind() == grading.GraderTyped && c.Expected != nil {
			labels[c.Prompt] = *c.Expected
		}
	}
	require.GreaterOrEqual(t, len(labels), 3)
	answering := func(agree bool) func(typryxtest.Ask) typryxtest.Reply {
		return func(a typryxtest.Ask) typryxtest.Reply {
			l, ok := labels[a.State["task"]]
			if !ok {
				return typryxtest.Noulp(0.5)
			}
			if (l == "true") == agree {
				return typryxtest.Noulp(0.95)
			}
			return typryxtest.Noulp(0.05)
		}
	}
	st := openStore(t)
	run := func(agree bool) evalrun.Result {
		f := typedFake(t, typryxtest.Options{Answer: answering(agree)})
		res, err := evalrun.Execute(ctx, evalrun.Deps{Store: st, Typed: typedGrader(t, f.URL, "", time.Second)},
			evalrun.Request{Set: set})
		require.NoError(t, err)
		return res
	}
	good := run(true)
	bl, err := st.CreateBaseline(ctx, good.Run.ID, "typed-agree", time.Now())
	require.NoError(t, err)
	bad := run(false)
	for i, s := range good.Run.Scores {
		if s.Typed == nil || s.Typed.Label == "" {
			continue
		}
		yes := s.Typed.Label == "true"
		assert.Equal(t, yes, s.Value > 0.5, "agreeing typryx: %s", s.CaseID)
		assert.Equal(t, !yes, bad.Run.Scores[i].Value > 0.5, "opposite typryx must move %s across 0.5", s.CaseID)
	}
	assert.Less(t, *bad.Run.MeanScore, *good.Run.MeanScore-0.25)
	rep, err := evalrun.CheckDrift(ctx, st, evalrun.DriftRequest{BaselineID: bl.ID})
	require.NoError(t, err)
	assert.Equal(t, drift.VerdictRegressed, rep.Verdict, "typed scores take part in drift")
}

func TestTypedAllUnansweredHasNoMeanAndNoBaseline(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	fake := typedFake(t, typryxtest.Options{Answer: func(typryxtest.Ask) typryxtest.Reply {
		return typryxtest.Reply{Unanswered: "no_probabilities"}
	}})
	set := `{"id":"s","cases":[{"id":"a","grader":"typed","prompt":"x"},{"id":"b","grader":"typed","prompt":"y","expected":"true"}]}`
	res, err := evalrun.Execute(ctx, evalrun.Deps{Store: st, Typed: typedGrader(t, fake.URL, "", time.Second)},
		evalrun.Request{EvalSet: json.RawMessage(set)})
	require.NoError(t, err)
	assert.True(t, res.Saved, "an unanswered run completes and is saved")
	assert.Nil(t, res.Run.MeanScore)
	assert.Equal(t, 2, res.Run.Typed.Unanswered)
	assert.Empty(t, fake.Outcomes(), "an unanswered case posts no label")
	_, err = st.CreateBaseline(ctx, res.Run.ID, "", time.Now())
	require.ErrorIs(t, err, store.ErrUnmeasured)
}
