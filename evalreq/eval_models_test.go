package evalreq

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// startModelWorker runs one eval consumer whose requests may name the
// models of models (against the fake servers) and allowed.
func startModelWorker(t *testing.T, e *env, models func(string) (llm.Model, error), allowed []string) {
	t.Helper()
	st := jstest.OpenStore(t, filepath.Join(e.Dir, "models.db"))
	h := NewHandler(st, evalrun.Deps{Store: st, Version: "test"}, e.NC, Options{Roots: testdataRoot(t), Logger: jstest.Logger(t),
		Models: models, Allowed: allowed})
	jstest.RunPuller(t, e.Eval, h, pull.Options{Name: "eval", Batch: 1, Logger: jstest.Logger(t),
		DeadLetter: deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})})
}

// TestEvalRequestModelFailuresOnTheWire: against fakes of the OpenAI and
// the Anthropic wire formats that answer every call 429 or 529, a request
// naming the allowed model is graded once, every case unmeasured with the
// status, the run stored, and the reply says no case could be graded; the
// request is not delivered again (the fake sees one call per case). A
// model outside the allowed list is refused in the reply, naming them.
func TestEvalRequestModelFailuresOnTheWire(t *testing.T) {
	var openaiHits, anthropicHits atomic.Int64
	openaiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		openaiHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests"}}`)
	}))
	defer openaiSrv.Close()
	anthropicSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anthropicHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}))
	defer anthropicSrv.Close()
	models := llm.Models(llm.ModelsOptions{OpenAIBaseURL: openaiSrv.URL + "/v1", AnthropicBaseURL: anthropicSrv.URL, Timeout: 5 * time.Second,
		Getenv: func(k string) string {
			return map[string]string{"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}[k]
		}})
	e := newEnv(t)
	allowed := []string{"openai:fake-chat", "anthropic:fake-claude"}
	startModelWorker(t, e, models, allowed)
	set := json.RawMessage(`{"id":"two","cases":[{"id":"a","prompt":"q-a","expected":"a"},{"id":"b","prompt":"q-b","expected":"b"}]}`)

	for _, tc := range []struct {
		model  string
		hits   *atomic.Int64
		status string
	}{{"openai:fake-chat", &openaiHits, "429"}, {"anthropic:fake-claude", &anthropicHits, "529"}} {
		rep := e.request(Request{RequestID: "r-" + tc.model, EvalSet: set, Model: tc.model})
		require.True(t, rep.OK, rep.Error)
		require.Contains(t, rep.Warning, "no case could be graded: every one of the 2 cases is unmeasured")
		var res evalrun.Result
		require.NoError(t, json.Unmarshal(rep.Result, &res))
		require.True(t, res.Saved)
		require.Nil(t, res.Run.MeanScore)
		for _, s := range res.Run.Run.Scores {
			require.Contains(t, s.Unmeasured, tc.status, tc.model)
		}
		// Drained: nothing pending or unacked, and one call per case.
		jstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			info, err := e.Eval.Info(context.Background())
			if err != nil {
				return err
			}
			if info.NumPending+uint64(info.NumAckPending) > 0 {
				return errPending
			}
			return nil
		})
		require.Equal(t, int64(2), tc.hits.Load(), "%s: calls never retried, the request never redelivered", tc.model)
	}

	rep := e.request(Request{RequestID: "r-other", EvalSet: set, Model: "openai:gpt-4o"})
	require.False(t, rep.OK)
	require.Contains(t, rep.Error, `field model: "openai:gpt-4o" is not allowed on this worker (allowed: stub, openai:fake-chat, anthropic:fake-claude;`)
	require.Equal(t, int64(2), openaiHits.Load())
}

var errPending = errorString("eval consumer still has pending messages")

type errorString string

func (e errorString) Error() string { return string(e) }
