package typryx_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/provider/typryx"
	"github.com/verdryx/verdryx/testkit/typryxtest"
)

const testKey = "tpx_live_9f8e7d6c5b4a3210"

func newClient(t *testing.T, url string, timeout time.Duration) *typryx.Client {
	t.Helper()
	c, err := typryx.New(typryx.Options{BaseURL: url, Key: testKey, Timeout: timeout})
	require.NoError(t, err)
	return c
}

func fake(t *testing.T, answer func(typryxtest.Ask) typryxtest.Reply) *typryxtest.Server {
	t.Helper()
	s := typryxtest.New(typryxtest.Options{Key: testKey, Answer: answer})
	t.Cleanup(s.Close)
	return s
}

func ask(template string) typryx.AskRequest {
	return typryx.AskRequest{Template: template, State: map[string]any{"task": "t", "final_answer": "a"}, RunID: "run-1"}
}

func TestAskAnsweredSendsTheDocumentedShape(t *testing.T) {
	s := fake(t, func(typryxtest.Ask) typryxtest.Reply {
		r := typryxtest.Noulp(0.8)
		r.CostUSD = 0.0002
		return r
	})
	c := newClient(t, s.URL, time.Second)
	a, err := c.Ask(context.Background(), ask(typryxtest.Noul))
	require.NoError(t, err)
	assert.False(t, a.Unanswered)
	assert.Equal(t, typryx.TypeNoul, a.Type)
	assert.Equal(t, typryxtest.AnswerID(1), a.AnswerID)
	assert.Equal(t, "3f9a1c2e", a.TemplateVersion)
	assert.InDelta(t, 0.8, a.Probabilities["true"], 1e-12)
	assert.InDelta(t, 0.0002, a.CostUSD, 1e-12)

	bodies, headers := s.Requests()
	require.Len(t, bodies, 1)
	assert.Equal(t, testKey, headers[0].Get(typryx.HeaderKey))
	var sent map[string]any
	require.NoError(t, json.Unmarshal(bodies[0], &sent))
	assert.Equal(t, map[string]any{"template": typryxtest.Noul, "run_id": "run-1",
		"state": map[string]any{"task": "t", "final_answer": "a"}}, sent)
	assert.NotContains(t, string(bodies[0]), testKey, "the key travels only in the header")
}

func TestAskScoreAnswer(t *testing.T) {
	s := fake(t, func(typryxtest.Ask) typryxtest.Reply {
		return typryxtest.Reply{Probabilities: map[string]float64{"0": 0, "1": 0.1, "2": 0.2, "3": 0.3, "4": 0.4}}
	})
	a, err := newClient(t, s.URL, time.Second).Ask(context.Background(), ask(typryxtest.Score))
	require.NoError(t, err)
	assert.Equal(t, typryx.TypeScore, a.Type)
	assert.Equal(t, "4", string(a.Answer))
	assert.Equal(t, "b71d04aa", a.TemplateVersion)
}

func TestAskUnansweredIsAnAnswerNotAnError(t *testing.T) {
	for _, reason := range []string{"backend_error", "timeout", "no_probabilities", "bad_probabilities"} {
		t.Run(reason, func(t *testing.T) {
			s := fake(t, func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Unanswered: reason} })
			a, err := newClient(t, s.URL, time.Second).Ask(context.Background(), ask(typryxtest.Noul))
			require.NoError(t, err)
			assert.True(t, a.Unanswered)
			assert.Equal(t, reason, a.Reason)
			assert.Equal(t, typryxtest.AnswerID(1), a.AnswerID)
			assert.Nil(t, a.Probabilities)
			assert.Nil(t, a.Answer)
		})
	}
}

func TestAskRefusalsNameStatusAndCode(t *testing.T) {
	cases := []struct {
		name   string
		key    string
		tmpl   string
		reply  typryxtest.Reply
		status int
		code   string
	}{
		{name: "wrong key", key: "not-the-key-at-all", tmpl: typryxtest.Noul, status: 401, code: "unauthorized"},
		{name: "unknown template", tmpl: "no.such", status: 404, code: "unknown_template"},
		{name: "bad state", tmpl: typryxtest.Noul, reply: typryxtest.Reply{Status: 400, Code: "bad_state"}, status: 400, code: "bad_state"},
		{name: "bad run id", tmpl: typryxtest.Noul, reply: typryxtest.Reply{Status: 400, Code: "bad_run_id"}, status: 400, code: "bad_run_id"},
		{name: "too large", tmpl: typryxtest.Noul, reply: typryxtest.Reply{Status: 413, Code: "state_too_large"}, status: 413, code: "state_too_large"},
		{name: "hourly cap", tmpl: typryxtest.Noul, reply: typryxtest.Reply{Status: 429, Code: "over_hourly_cap"}, status: 429, code: "over_hourly_cap"},
		{name: "daily spend cap", tmpl: typryxtest.Noul, reply: typryxtest.Reply{Status: 429, Code: "over_daily_spend_cap"}, status: 429, code: "over_daily_spend_cap"},
		{name: "server error without code", tmpl: typryxtest.Noul, reply: typryxtest.Reply{Status: 503}, status: 503, code: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fake(t, func(typryxtest.Ask) typryxtest.Reply { return tc.reply })
			key := testKey
			if tc.key != "" {
				key = tc.key
			}
			c, err := typryx.New(typryx.Options{BaseURL: s.URL, Key: key, Timeout: time.Second})
			require.NoError(t, err)
			_, err = c.Ask(context.Background(), ask(tc.tmpl))
			var ref *typryx.RefusalError
			require.ErrorAs(t, err, &ref)
			assert.Equal(t, tc.status, ref.Status)
			assert.Equal(t, tc.code, ref.Code)
			assert.Contains(t, err.Error(), fmt.Sprintf("HTTP %d %s", tc.status, tc.code))
			assert.Contains(t, err.Error(), "POST "+s.URL+"/v1/ask")
			assert.NotContains(t, err.Error(), key)
		})
	}
}

func TestRefusalEchoingTheKeyIsRedacted(t *testing.T) {
	// A misbehaving proxy that echoes the key as its error code.
	lowerKey := "tpxechoedkey_abcdef"
	srv := typryxtest.New(typryxtest.Options{Key: lowerKey, Answer: func(typryxtest.Ask) typryxtest.Reply {
		return typryxtest.Reply{Status: 400, Code: lowerKey}
	}})
	t.Cleanup(srv.Close)
	c, err := typryx.New(typryx.Options{BaseURL: srv.URL, Key: lowerKey, Timeout: time.Second})
	require.NoError(t, err)
	_, err = c.Ask(context.Background(), ask(typryxtest.Noul))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), lowerKey)
	assert.Contains(t, err.Error(), "[REDACTED]")
}

func TestAskTimesOutOnceWithoutRetry(t *testing.T) {
	s := fake(t, func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Hang: true} })
	c := newClient(t, s.URL, 100*time.Millisecond)
	// The caller's own deadline is far later: the call must end at the
	// client's per-call timeout, not at it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Ask(ctx, ask(typryxtest.Noul))
	require.ErrorIs(t, err, typryx.ErrUnreachable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second, "the per-call timeout ended the call")
	assert.Contains(t, err.Error(), "timeout 100ms")
	assert.Len(t, s.Asks(), 1, "asked exactly once: no retry")
}

func TestAskUnreachable(t *testing.T) {
	s := typryxtest.New(typryxtest.Options{Key: testKey})
	url := s.URL
	s.Close()
	_, err := newClient(t, url, time.Second).Ask(context.Background(), ask(typryxtest.Noul))
	require.ErrorIs(t, err, typryx.ErrUnreachable)
	assert.NotContains(t, err.Error(), testKey)
}

func TestAskMalformedAnswers(t *testing.T) {
	base := `"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":0`
	cases := map[string]string{
		"not json":                      `<html>oops</html>`,
		"unknown member":                `{` + base + `,"answer":0.5,"probabilities":{"true":0.5,"false":0.5},"extra":1}`,
		"trailing data":                 `{` + base + `,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}} {}`,
		"unanswered with probabilities": `{` + base + `,"unanswered":true,"reason":"timeout","probabilities":{"true":0.5,"false":0.5}}`,
		"unanswered with null answer":   `{` + base + `,"unanswered":true,"reason":"timeout","answer":null}`,
		"unanswered without reason":     `{` + base + `,"unanswered":true}`,
		"answered without answer":       `{` + base + `,"probabilities":{"true":0.5,"false":0.5}}`,
		"probabilities do not sum to 1": `{` + base + `,"answer":0.5,"probabilities":{"true":0.5,"false":0.6}}`,
		"probability out of range":      `{` + base + `,"answer":1.5,"probabilities":{"true":1.5,"false":-0.5}}`,
		"noul key missing":              `{` + base + `,"answer":1,"probabilities":{"true":1}}`,
		"noul answer is not p(true)":    `{` + base + `,"answer":0.9,"probabilities":{"true":0.5,"false":0.5}}`,
		"another template":              `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"other","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":0,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"no answer id":                  `{"answer_id":"","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":0,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"unknown type":                  `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"ranking","backend":"b","model":"m","latency_ms":1,"held_back_fields":0,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"held_back_fields as a list":    `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":["secret"],"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"held_back_fields missing":      `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"held_back_fields negative":     `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":-1,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"held_back_fields fractional":   `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":1.5,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"answer_id not 32 hex digits":   `{"answer_id":"ans-1","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":0,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"answer_id in upper case":       `{"answer_id":"0F1E2D3C4B5A69788796A5B4C3D2E1F0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":0,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"template_version a number":     `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":3,"type":"noul","backend":"b","model":"m","latency_ms":1,"held_back_fields":0,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"no latency_ms":                 `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","model":"m","held_back_fields":0,"answer":0.5,"probabilities":{"true":0.5,"false":0.5}}`,
		"unanswered without held_back":  `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"b","model":"m","latency_ms":1,"unanswered":true,"reason":"timeout"}`,
		"over 1 MiB":                    `{` + base + `,"answer":0.5,"probabilities":{"true":0.5,"false":0.5},"model":"` + strings.Repeat("x", typryx.MaxBody) + `"}`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			s := fake(t, func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Raw: raw} })
			_, err := newClient(t, s.URL, time.Second).Ask(context.Background(), ask(typryxtest.Noul))
			require.ErrorIs(t, err, typryx.ErrMalformed)
			assert.Less(t, len(err.Error()), 1000, "a malformed answer is not quoted whole")
		})
	}
}

// Answers as typryx sends them, byte for byte, written from its API
// (github.com/TAIPANBOX/typryx; docs/eval.md, "The typed grader"): members
// in typryx's order, held_back_fields an integer on both kinds of result,
// cost_usd present only when not 0.
const (
	recordedAnswer = `{"answer_id":"9b2f4c1de0a84f6b8c3e57a1d2f09e64","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","answer":0.87,"probabilities":{"true":0.87,"false":0.13},"backend":"openai","model":"gpt-4o-mini-2024-07-18","latency_ms":412,"cost_usd":0.000131,"held_back_fields":2}` + "\n"
	recordedScore  = `{"answer_id":"5e0c7a9b31d24f8e9a6b0c1d2e3f4a5b","template":"eval.quality","template_version":"b71d04aa","type":"score","answer":3,"probabilities":{"0":0.02,"1":0.08,"2":0.2,"3":0.5,"4":0.2},"backend":"anthropic","model":"claude-haiku-4-5","latency_ms":655,"cost_usd":0.00022,"held_back_fields":0}` + "\n"
	recordedUnans  = `{"answer_id":"c4d1e8f2a7b34c69b05e1f2a3b4c5d6e","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","latency_ms":30001,"held_back_fields":1,"unanswered":true,"reason":"timeout"}` + "\n"
	// typryx omits empty backend, model and cost_usd (omitempty): an
	// unanswered result that reached a backend names it, an answer from a
	// cached or rule backend may have none.
	recordedUnansBackend = `{"answer_id":"d4d1e8f2a7b34c69b05e1f2a3b4c5d6e","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","backend":"openai","model":"gpt-4o-mini-2024-07-18","latency_ms":30001,"held_back_fields":0,"unanswered":true,"reason":"backend_error"}` + "\n"
	recordedNoBackend    = `{"answer_id":"e4d1e8f2a7b34c69b05e1f2a3b4c5d6e","template":"eval.outcome_met","template_version":"3f9a1c2e","type":"noul","answer":0.25,"probabilities":{"true":0.25,"false":0.75},"latency_ms":2,"held_back_fields":0}` + "\n"
)

func TestAskDecodesRecordedAnswersVerbatim(t *testing.T) {
	cases := []struct {
		name, raw, template string
		want                typryx.Answer
	}{
		{"answered noul", recordedAnswer, typryxtest.Noul, typryx.Answer{
			AnswerID: "9b2f4c1de0a84f6b8c3e57a1d2f09e64", Template: "eval.outcome_met", TemplateVersion: "3f9a1c2e",
			Type: typryx.TypeNoul, Answer: json.RawMessage(`0.87`), Probabilities: map[string]float64{"true": 0.87, "false": 0.13},
			Backend: "openai", Model: "gpt-4o-mini-2024-07-18", LatencyMS: 412, CostUSD: 0.000131, HeldBackFields: 2}},
		{"answered score", recordedScore, typryxtest.Score, typryx.Answer{
			AnswerID: "5e0c7a9b31d24f8e9a6b0c1d2e3f4a5b", Template: "eval.quality", TemplateVersion: "b71d04aa",
			Type: typryx.TypeScore, Answer: json.RawMessage(`3`), Probabilities: map[string]float64{"0": 0.02, "1": 0.08, "2": 0.2, "3": 0.5, "4": 0.2},
			Backend: "anthropic", Model: "claude-haiku-4-5", LatencyMS: 655, CostUSD: 0.00022}},
		{"unanswered, no backend or model", recordedUnans, typryxtest.Noul, typryx.Answer{
			AnswerID: "c4d1e8f2a7b34c69b05e1f2a3b4c5d6e", Template: "eval.outcome_met", TemplateVersion: "3f9a1c2e",
			Type: typryx.TypeNoul, LatencyMS: 30001, HeldBackFields: 1,
			Unanswered: true, Reason: "timeout"}},
		{"unanswered with a backend", recordedUnansBackend, typryxtest.Noul, typryx.Answer{
			AnswerID: "d4d1e8f2a7b34c69b05e1f2a3b4c5d6e", Template: "eval.outcome_met", TemplateVersion: "3f9a1c2e",
			Type: typryx.TypeNoul, Backend: "openai", Model: "gpt-4o-mini-2024-07-18", LatencyMS: 30001,
			Unanswered: true, Reason: "backend_error"}},
		{"answered, no backend, model or cost", recordedNoBackend, typryxtest.Noul, typryx.Answer{
			AnswerID: "e4d1e8f2a7b34c69b05e1f2a3b4c5d6e", Template: "eval.outcome_met", TemplateVersion: "3f9a1c2e",
			Type: typryx.TypeNoul, Answer: json.RawMessage(`0.25`), Probabilities: map[string]float64{"true": 0.25, "false": 0.75}, LatencyMS: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fake(t, func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Raw: c.raw} })
			a, err := newClient(t, s.URL, time.Second).Ask(context.Background(), ask(c.template))
			require.NoError(t, err)
			assert.Equal(t, c.want, a)
		})
	}
}

// TestFakeSendsTheContractShape holds the fake to the same members and
// JSON types as the recorded answers, so a test passing against the fake
// passes against typryx.
func TestFakeSendsTheContractShape(t *testing.T) {
	kinds := func(raw string) map[string]string {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &m))
		out := map[string]string{}
		for k, v := range m {
			out[k] = fmt.Sprintf("%T", v)
		}
		return out
	}
	for _, c := range []struct {
		name, recorded string
		reply          typryxtest.Reply
	}{
		{"answered", recordedAnswer, typryxtest.Reply{Probabilities: map[string]float64{"true": 0.87, "false": 0.13}, CostUSD: 0.000131, HeldBack: 2}},
		{"unanswered", recordedUnans, typryxtest.Reply{Unanswered: "timeout", HeldBack: 1}},
		{"answered without backend", recordedNoBackend, typryxtest.Reply{Probabilities: map[string]float64{"true": 0.25, "false": 0.75}, OmitBackend: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fake(t, func(typryxtest.Ask) typryxtest.Reply { return c.reply })
			req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/ask", strings.NewReader(`{"template":"eval.outcome_met","state":{"task":"t","final_answer":"a"}}`))
			require.NoError(t, err)
			req.Header.Set(typryx.HeaderKey, testKey)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, kinds(c.recorded), kinds(string(body)))
			var m map[string]any
			require.NoError(t, json.Unmarshal(body, &m))
			assert.Regexp(t, `^[0-9a-f]{32}$`, m["answer_id"])
			assert.Equal(t, float64(c.reply.HeldBack), m["held_back_fields"])
		})
	}
}

func TestAskScoreKeysMustBeContiguous(t *testing.T) {
	raw := `{"answer_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","template":"eval.quality","template_version":"b71d04aa","type":"score","backend":"b","model":"m","latency_ms":1,"held_back_fields":0,"answer":0,"probabilities":{"0":0.5,"2":0.5}}`
	s := fake(t, func(typryxtest.Ask) typryxtest.Reply { return typryxtest.Reply{Raw: raw} })
	_, err := newClient(t, s.URL, time.Second).Ask(context.Background(), ask(typryxtest.Score))
	require.ErrorIs(t, err, typryx.ErrMalformed)
}

func TestAskRefusesABadRunIDBeforeSending(t *testing.T) {
	s := fake(t, nil)
	req := ask(typryxtest.Noul)
	req.RunID = strings.Repeat("r", typryx.MaxRunID+1)
	_, err := newClient(t, s.URL, time.Second).Ask(context.Background(), req)
	require.Error(t, err)
	assert.Empty(t, s.Asks())
}

func TestOutcomeAndTemplates(t *testing.T) {
	s := fake(t, nil)
	c := newClient(t, s.URL, time.Second)
	ctx := context.Background()
	a, err := c.Ask(ctx, ask(typryxtest.Noul))
	require.NoError(t, err)
	ack, err := c.Outcome(ctx, typryx.OutcomeRequest{AnswerID: a.AnswerID, Truth: true, Source: "verdryx:evalset"})
	require.NoError(t, err)
	assert.Equal(t, a.AnswerID, ack.AnswerID)
	out := s.Outcomes()
	require.Len(t, out, 1)
	assert.Equal(t, "true", string(out[0].Truth))
	assert.Equal(t, "verdryx:evalset", out[0].Source)

	_, err = c.Outcome(ctx, typryx.OutcomeRequest{AnswerID: "nope", Truth: true, Source: "verdryx:evalset"})
	var ref *typryx.RefusalError
	require.ErrorAs(t, err, &ref)
	assert.Equal(t, 404, ref.Status)

	tm, err := c.Template(ctx, typryxtest.Score)
	require.NoError(t, err)
	assert.Equal(t, typryx.TypeScore, tm.Type)
	assert.Len(t, tm.Levels, 5)
	_, err = c.Template(ctx, "no.such")
	require.ErrorAs(t, err, &ref)
	assert.Equal(t, "unknown_template", ref.Code)
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(p, []byte(testKey+"\n"), 0o600))
	k, err := typryx.ReadKeyFile(p)
	require.NoError(t, err)
	assert.Equal(t, testKey, k)

	require.NoError(t, os.WriteFile(p, []byte("  \n"), 0o600))
	_, err = typryx.ReadKeyFile(p)
	require.ErrorIs(t, err, typryx.ErrNoKey)

	require.NoError(t, os.WriteFile(p, []byte("line-one-secret\nline-two-secret\n"), 0o600))
	_, err = typryx.ReadKeyFile(p)
	require.ErrorIs(t, err, typryx.ErrNoKey)
	assert.NotContains(t, err.Error(), "line-one-secret")

	_, err = typryx.ReadKeyFile(filepath.Join(dir, "missing"))
	require.True(t, errors.Is(err, os.ErrNotExist))
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := typryx.New(typryx.Options{BaseURL: "ftp://x", Key: testKey})
	require.Error(t, err)
	_, err = typryx.New(typryx.Options{BaseURL: "http://127.0.0.1:1"})
	require.ErrorIs(t, err, typryx.ErrNoKey)
	_, err = typryx.New(typryx.Options{BaseURL: "http://127.0.0.1:1", Key: "abc12"})
	require.ErrorIs(t, err, typryx.ErrNoKey, "too short for the redactor to hide")
}
