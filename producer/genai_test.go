package producer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/provider/openai"
	"github.com/verdryx/verdryx/provider/typryx"
	"github.com/verdryx/verdryx/testkit/typryxtest"
)

var _ grading.RunTracer = (*Spans)(nil)

// evalTrace runs set through evalrun.Execute with spans to an in-process
// OTLP receiver and returns the result and every span received.
func evalTrace(t *testing.T, deps evalrun.Deps, set string, model string) (evalrun.Result, []*tracepb.Span) {
	t.Helper()
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx := context.Background()
	sp, err := NewSpans(ctx, SpanOptions{Endpoint: srv.URL})
	require.NoError(t, err)
	deps.Spans = sp
	res, err := evalrun.Execute(ctx, deps, evalrun.Request{EvalSet: json.RawMessage(set), Model: model, AgentID: "agent://acme.example/bot"})
	require.NoError(t, err)
	require.NoError(t, sp.Shutdown(ctx))
	var out []*tracepb.Span
	for _, g := range rcv.spans() {
		out = append(out, g.span)
	}
	return res, out
}

func attrValue(kvs []*commonpb.KeyValue, key string) any {
	for _, kv := range kvs {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return v.IntValue
			case *commonpb.AnyValue_DoubleValue:
				return v.DoubleValue
			case *commonpb.AnyValue_BoolValue:
				return v.BoolValue
			}
			return kv.Value.String()
		}
	}
	return nil
}

// tree indexes spans by name and by parent.
type tree struct {
	byName   map[string][]*tracepb.Span
	children map[string][]*tracepb.Span
}

func index(spans []*tracepb.Span) tree {
	tr := tree{byName: map[string][]*tracepb.Span{}, children: map[string][]*tracepb.Span{}}
	for _, s := range spans {
		tr.byName[s.Name] = append(tr.byName[s.Name], s)
		tr.children[string(s.ParentSpanId)] = append(tr.children[string(s.ParentSpanId)], s)
	}
	return tr
}

const genaiSet = `{"id":"genai","cases":[
	{"id":"exact-ok","prompt":"yes","expected":"yes"},
	{"id":"exact-bad","prompt":"no","expected":"yes"},
	{"id":"judged","prompt":"Describe the moonpetal vapor","grader":"llm_judge","rubric":"mentions moonpetal vapor silver"},
	{"id":"tagged","prompt":"case_resolved","grader":"outcome_tag"}]}`

func TestEvalTraceGenAIStub(t *testing.T) {
	res, spans := evalTrace(t, evalrun.Deps{}, genaiSet, "")
	tr := index(spans)

	require.Len(t, tr.byName[grading.SpanEval], 1, "one run span")
	run := tr.byName[grading.SpanEval][0]
	want := TraceIDFor(res.Run.ID)
	assert.Equal(t, want[:], run.TraceId, "the run span's trace derives from the stored run id")
	assert.Empty(t, run.ParentSpanId)
	assert.Equal(t, res.Run.ID, attrValue(run.Attributes, "verdryx.run_id"))
	assert.Equal(t, int64(4), attrValue(run.Attributes, "verdryx.cases"), "the run's data is set when it ends")

	cases := tr.children[string(run.SpanId)]
	require.Len(t, cases, 4, "one child span per case")
	byCase := map[string]*tracepb.Span{}
	for _, c := range cases {
		assert.Equal(t, grading.SpanCase, c.Name)
		assert.Equal(t, want[:], c.TraceId)
		byCase[attrValue(c.Attributes, "verdryx.case_id").(string)] = c
	}
	// Evaluation events: name = grader, value, label.
	for id, wantEv := range map[string]struct {
		grader string
		value  float64
		label  string
	}{
		"exact-ok":  {"exact", 1, "pass"},
		"exact-bad": {"exact", 0, "fail"},
		"tagged":    {"outcome_tag", 1, "pass"},
	} {
		c := byCase[id]
		require.NotNil(t, c, id)
		require.Len(t, c.Events, 1, id)
		ev := c.Events[0]
		assert.Equal(t, "gen_ai.evaluation.result", ev.Name, id)
		assert.Equal(t, wantEv.grader, attrValue(ev.Attributes, "gen_ai.evaluation.name"), id)
		assert.Equal(t, wantEv.value, attrValue(ev.Attributes, "gen_ai.evaluation.score.value"), id)
		assert.Equal(t, wantEv.label, attrValue(ev.Attributes, "gen_ai.evaluation.score.label"), id)
	}
	judged := byCase["judged"]
	ev := judged.Events[0]
	assert.Equal(t, "llm_judge", attrValue(ev.Attributes, "gen_ai.evaluation.name"))
	assert.Equal(t, res.Run.Scores[2].Value, attrValue(ev.Attributes, "gen_ai.evaluation.score.value"))

	// Model-call grandchildren: none for the outcome tag, one model call
	// per exact case, a model and a judge call for the judged case.
	assert.Empty(t, tr.children[string(byCase["tagged"].SpanId)], "outcome_tag calls no model")
	assert.Len(t, tr.children[string(byCase["exact-ok"].SpanId)], 1)
	calls := tr.children[string(judged.SpanId)]
	require.Len(t, calls, 2, "the model call and the judge call")
	roles := map[any]*tracepb.Span{}
	for _, c := range calls {
		roles[attrValue(c.Attributes, "verdryx.call.role")] = c
		assert.Equal(t, "chat stub", c.Name)
		assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, c.Kind)
		assert.Equal(t, "chat", attrValue(c.Attributes, "gen_ai.operation.name"))
		assert.Equal(t, "verdryx.stub", attrValue(c.Attributes, "gen_ai.provider.name"))
		assert.Equal(t, "verdryx.stub", attrValue(c.Attributes, "gen_ai.system"))
		assert.Equal(t, "stub", attrValue(c.Attributes, "gen_ai.request.model"))
		assert.Equal(t, "stub", attrValue(c.Attributes, "gen_ai.response.model"))
		assert.Equal(t, int64(0), attrValue(c.Attributes, "gen_ai.usage.input_tokens"), "the stub reports no usage")
		assert.Equal(t, int64(0), attrValue(c.Attributes, "gen_ai.usage.output_tokens"))
	}
	assert.Contains(t, roles, "model")
	assert.Contains(t, roles, "judge")
	assert.Len(t, spans, 1+4+4, "run, cases, model calls: nothing else")
}

func TestEvalTraceGenAIProvider(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"llama3:8b-q4","choices":[{"index":0,"message":{"role":"assistant","content":"yes"}}],"usage":{"prompt_tokens":12,"completion_tokens":3}}`)
	}))
	defer srv.Close()
	deps := evalrun.Deps{Models: func(id string) (llm.Model, error) {
		c, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		return llm.NewOpenAI(c, llm.OpenAIOptions{Model: "llama3"})
	}}
	res, spans := evalTrace(t, deps, `{"id":"p","cases":[{"id":"a","prompt":"q","expected":"yes"}]}`, "openai:llama3")
	tr := index(spans)
	require.Len(t, tr.byName["chat llama3"], 1)
	call := tr.byName["chat llama3"][0]
	kase := tr.byName[grading.SpanCase][0]
	run := tr.byName[grading.SpanEval][0]
	assert.Equal(t, kase.SpanId, call.ParentSpanId, "the call is a child of its case")
	assert.Equal(t, run.SpanId, kase.ParentSpanId, "the case is a child of the run")
	assert.Equal(t, "openai", attrValue(call.Attributes, "gen_ai.provider.name"))
	assert.Equal(t, "llama3", attrValue(call.Attributes, "gen_ai.request.model"))
	assert.Equal(t, "llama3:8b-q4", attrValue(call.Attributes, "gen_ai.response.model"))
	assert.Equal(t, int64(12), attrValue(call.Attributes, "gen_ai.usage.input_tokens"))
	assert.Equal(t, int64(3), attrValue(call.Attributes, "gen_ai.usage.output_tokens"))
	assert.Equal(t, int64(15), res.Run.Scores[0].Tokens, "the tokens of the span are the tokens stored")
	assert.Equal(t, int64(15), attrValue(kase.Attributes, "verdryx.tokens"))
}

func TestEvalTraceTypedCaseSpans(t *testing.T) {
	const key = "tpx_span_key_0a1b2c3d4e"
	fake := typryxtest.New(typryxtest.Options{Key: key, Answer: func(a typryxtest.Ask) typryxtest.Reply {
		if a.State["task"] == "answered" {
			return typryxtest.Noulp(0.75)
		}
		return typryxtest.Reply{Unanswered: "bad_probabilities"}
	}})
	defer fake.Close()
	c, err := typryx.New(typryx.Options{BaseURL: fake.URL, Key: key, Timeout: time.Second})
	require.NoError(t, err)
	set := `{"id":"typed","cases":[{"id":"yes","grader":"typed","prompt":"answered"},{"id":"none","grader":"typed","prompt":"left"}]}`
	res, spans := evalTrace(t, evalrun.Deps{Typed: &grading.Typed{Client: c}}, set, "")
	tr := index(spans)
	run := tr.byName[grading.SpanEval][0]
	assert.Equal(t, int64(1), attrValue(run.Attributes, "verdryx.unanswered"))
	byCase := map[string]*tracepb.Span{}
	for _, s := range tr.children[string(run.SpanId)] {
		byCase[attrValue(s.Attributes, "verdryx.case_id").(string)] = s
	}
	yes, none := byCase["yes"], byCase["none"]
	require.NotNil(t, yes)
	require.NotNil(t, none)
	assert.Equal(t, res.Run.Scores[0].Typed.AnswerID, attrValue(yes.Attributes, "verdryx.typed.answer_id"))
	assert.Equal(t, 0.75, attrValue(yes.Events[0].Attributes, "gen_ai.evaluation.score.value"))
	assert.Equal(t, "partial", attrValue(yes.Events[0].Attributes, "gen_ai.evaluation.score.label"))

	assert.Equal(t, res.Run.Scores[1].Typed.AnswerID, attrValue(none.Attributes, "verdryx.typed.answer_id"))
	assert.Equal(t, "bad_probabilities", attrValue(none.Attributes, "verdryx.typed.reason"))
	assert.Equal(t, grading.LabelUnanswered, attrValue(none.Events[0].Attributes, "gen_ai.evaluation.score.label"))
	assert.Nil(t, attrValue(none.Events[0].Attributes, "gen_ai.evaluation.score.value"), "unanswered has no score")
	assert.NotEqual(t, tracepb.Status_STATUS_CODE_ERROR, none.Status.GetCode(), "unanswered is not a failure")

	asks := tr.children[string(yes.SpanId)]
	require.Len(t, asks, 2, "the model call and the typryx ask")
	var ask *tracepb.Span
	for _, s := range asks {
		if attrValue(s.Attributes, "gen_ai.provider.name") == typryx.ProviderName {
			ask = s
		}
	}
	require.NotNil(t, ask)
	assert.Equal(t, "ask "+typryx.DefaultTemplate, ask.Name)
	assert.Equal(t, "typed", attrValue(ask.Attributes, "verdryx.call.role"))
	for _, s := range spans {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		assert.NotContains(t, string(b), key)
	}
}
