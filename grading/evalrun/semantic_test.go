package evalrun_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/rag"
)

// padded is the invented sentence, appended to a right answer.
const padded = " The keepers also repaint the lantern gallery vermilion every Michaelmas."

// answerWith answers through the offline pipeline, then edits the answer.
type answerWith struct {
	inner grading.RAGAsker
	edit  func(rag.Record) string
}

func (a answerWith) Generation() string { return a.inner.Generation() }
func (a answerWith) Ask(ctx context.Context, q string) (rag.Record, error) {
	rec, err := a.inner.Ask(ctx, q)
	if err != nil {
		return rec, err
	}
	rec.Answer = a.edit(rec)
	return rec, nil
}

func editedDeps(edit func(rag.Record) string) evalrun.Deps {
	return evalrun.Deps{Version: "test", RAG: func(ctx context.Context, corpus string, m llm.Model) (grading.RAGAsker, error) {
		inner, err := grading.OfflineRAG(ctx, corpus, m)
		return answerWith{inner: inner, edit: edit}, err
	}}
}

func check(t *testing.T, s grading.Score, name string) grader.Check {
	t.Helper()
	for _, c := range s.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("case %s has no %s check: %+v", s.CaseID, name, s.Checks)
	return grader.Check{}
}

func TestSemanticStubPassesSourceAndFailsPadding(t *testing.T) {
	ctx := context.Background()
	// The offline pipeline answers with the source sentence: every case
	// passes its golden and semantic checks.
	res, err := evalrun.Execute(ctx, evalrun.Deps{Version: "test"}, evalrun.Request{EvalSetPath: grimoirePath(t), Semantic: true})
	require.NoError(t, err)
	require.Equal(t, 7, res.Run.GradedN)
	for _, s := range res.Run.Scores {
		assert.Equal(t, 1.0, s.Value, "case %s: %v", s.CaseID, s.Failing())
		f := check(t, s, grader.CheckFaithfulness)
		assert.True(t, f.OK, f.Detail)
		require.NotNil(t, f.Score)
		assert.Equal(t, 1.0, *f.Score)
		r := check(t, s, grader.CheckAnswerRelevance)
		assert.True(t, r.OK, "case %s: %s", s.CaseID, r.Detail)
	}
	assert.Contains(t, res.Run.Provenance.Graders[grading.GraderRAG], "semantic")

	// The same right answers padded with an unsupported sentence: every
	// golden check still passes, faithfulness fails, so does the case.
	res, err = evalrun.Execute(ctx, editedDeps(func(r rag.Record) string {
		if r.Answer == grader.Abstention {
			return r.Answer
		}
		return r.Answer + padded
	}), evalrun.Request{EvalSetPath: grimoirePath(t), Semantic: true})
	require.NoError(t, err)
	failed := 0
	for _, s := range res.Run.Scores {
		f := check(t, s, grader.CheckFaithfulness)
		if strings.HasSuffix(s.Output, padded) {
			failed++
			assert.Equal(t, []string{grader.CheckFaithfulness}, s.Failing(), "case %s", s.CaseID)
			assert.False(t, f.OK)
			assert.Equal(t, 0.0, s.Value)
			require.NotEmpty(t, f.Claims)
			last := f.Claims[len(f.Claims)-1]
			assert.Contains(t, last.Claim, "vermilion")
			assert.False(t, last.Supported)
		}
	}
	assert.Equal(t, 6, failed, "every answerable case was padded and failed")

	// Without --semantic the padded answers pass: the golden checks alone
	// cannot see the invented sentence.
	res, err = evalrun.Execute(ctx, editedDeps(func(r rag.Record) string { return r.Answer + padded }), evalrun.Request{EvalSetPath: grimoirePath(t)})
	require.NoError(t, err)
	passed := 0
	for _, s := range res.Run.Scores {
		if s.Value == 1 {
			passed++
		}
	}
	assert.Equal(t, 6, passed)
}

// judgeServer is a fake OpenAI-compatible judge answering each semantic
// call with reply(system prompt), counting the calls; each call reports
// 1,000 input tokens.
func judgeServer(t *testing.T, reply func(system string) string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		_ = jsonDecode(r, &req)
		system := ""
		if len(req.Messages) > 0 {
			system = req.Messages[0].Content
		}
		fmt.Fprintf(w, `{"choices":[{"message":{"content":%q}}],"usage":{"prompt_tokens":1000,"completion_tokens":0}}`, reply(system))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func semanticDeps(t *testing.T, url string) evalrun.Deps {
	t.Helper()
	models := llm.Models(llm.ModelsOptions{OpenAIBaseURL: url, Getenv: func(string) string { return "test-key-123456" }})
	j, err := models("openai:acme")
	require.NoError(t, err)
	return evalrun.Deps{Version: "test", Prices: twoCentBook(), Concurrency: 1,
		Semantic: &grader.Semantic{Model: j, Prices: twoCentBook()}}
}

func TestSemanticJudgeAnswers(t *testing.T) {
	ctx := context.Background()
	good := func(system string) string {
		if strings.Contains(system, `"claims"`) {
			return `{"claims":[{"claim":"the dose is as cited","supported":true}]}`
		}
		return `{"score":0.9,"reason":"answers the dose asked"}`
	}
	srv, _ := judgeServer(t, good)
	res, err := evalrun.Execute(ctx, semanticDeps(t, srv.URL), evalrun.Request{EvalSetPath: grimoirePath(t), Semantic: true})
	require.NoError(t, err)
	assert.Equal(t, 7, res.Run.GradedN)
	for _, s := range res.Run.Scores {
		assert.Equal(t, 1.0, s.Value, "case %s: %v", s.CaseID, s.Failing())
	}

	for name, bad := range map[string]string{
		"not json":           `The answer is faithful.`,
		"unknown member":     `{"claims":[{"claim":"x","supported":true}],"confidence":1}`,
		"no claims":          `{"claims":[]}`,
		"partial claim":      `{"claims":[{"claim":"x"}]}`,
		"verdict a string":   `{"claims":[{"claim":"x","supported":"yes"}]}`,
		"trailing data":      `{"claims":[{"claim":"x","supported":true}]} and more`,
		"truncated":          `{"claims":[{"claim":"x","supp`,
		"relevance too high": "",
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := judgeServer(t, func(system string) string {
				if name == "relevance too high" {
					if strings.Contains(system, `"claims"`) {
						return `{"claims":[{"claim":"x","supported":true}]}`
					}
					return `{"score":1.5,"reason":"r"}`
				}
				if strings.Contains(system, `"claims"`) {
					return bad
				}
				return `{"score":0.9,"reason":"r"}`
			})
			res, err := evalrun.Execute(ctx, semanticDeps(t, srv.URL), evalrun.Request{EvalSetPath: grimoirePath(t), Semantic: true})
			require.NoError(t, err)
			// The abstention case makes no claim and asks no judge; every
			// other case is unmeasured (counted apart), never 0.
			assert.Equal(t, 1, res.Run.GradedN)
			assert.Equal(t, 6, res.Run.Unanswered)
			assert.NotNil(t, res.Run.MeanScore)
			for _, s := range res.Run.Unmeasured() {
				assert.Contains(t, s.Unmeasured, "semantic judge answer does not follow the schema", s.CaseID)
			}
		})
	}
}

func TestSemanticJudgeCallsStopAtTheCap(t *testing.T) {
	srv, hits := judgeServer(t, func(system string) string {
		if strings.Contains(system, `"claims"`) {
			return `{"claims":[{"claim":"x","supported":true}]}`
		}
		return `{"score":0.9,"reason":"r"}`
	})
	deps := semanticDeps(t, srv.URL)
	res, err := evalrun.Execute(context.Background(), deps, evalrun.Request{EvalSetPath: grimoirePath(t), Semantic: true, MaxCostUSD: 0.05})
	require.NoError(t, err)
	// $0.02 a judge call, cap $0.05, one case at a time: the third call
	// reaches the cap and is the last.
	assert.Equal(t, int32(3), hits.Load())
	assert.Equal(t, 5, res.Run.CostLimited, "cases needing a judge call after the cap")
	require.NotNil(t, res.Run.Provenance.CostLimit)
	assert.InDelta(t, 0.06, res.Run.Provenance.CostLimit.SpentUSD, 1e-9)
	assert.NotEmpty(t, res.Run.StoppedAtCase)
}
