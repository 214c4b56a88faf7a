package evalreq

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/provider/typryx"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/testkit/typryxtest"
)

const workerTypedKey = "tpx_worker_key_3f2e1d0c9b"

// startTypedEvalWorker runs one eval consumer whose deps grade typed cases
// with typed (nil: typryx not enabled, as serve without --typed-url).
func startTypedEvalWorker(t *testing.T, e *env, instance string, typed *grading.Typed) *store.Store {
	t.Helper()
	st := jstest.OpenStore(t, filepath.Join(e.Dir, instance+".db"))
	h := NewHandler(st, evalrun.Deps{Store: st, Version: "test", Typed: typed}, e.NC, Options{Roots: testdataRoot(t), Logger: jstest.Logger(t)})
	jstest.RunPuller(t, e.Eval, h, pull.Options{Name: "eval", Batch: 1, Logger: jstest.Logger(t),
		DeadLetter: deadletter.ForPull(&producer.DeadLetterPublisher{JS: e.JS, Subject: e.Subjects.DeadLetter})})
	return st
}

func typedClient(t *testing.T, url string) *grading.Typed {
	t.Helper()
	c, err := typryx.New(typryx.Options{BaseURL: url, Key: workerTypedKey, Timeout: 2 * time.Second})
	require.NoError(t, err)
	return &grading.Typed{Client: c}
}

func TestEvalRequestTypedNeedsTypryx(t *testing.T) {
	e := newEnv(t)
	startTypedEvalWorker(t, e, "plain", nil)
	rep := e.request(Request{RequestID: "typed-1", EvalSetPath: "typed/evalset.json"})
	require.False(t, rep.OK)
	assert.Contains(t, rep.Error, "typryx is not enabled")
	assert.Contains(t, rep.Error, "--typed-url")
}

func TestEvalRequestTypedGradedAndRefusals(t *testing.T) {
	e := newEnv(t)
	fake := typryxtest.New(typryxtest.Options{Key: workerTypedKey, Answer: func(a typryxtest.Ask) typryxtest.Reply {
		switch {
		case strings.Contains(a.State["task"], "password"):
			return typryxtest.Reply{Unanswered: "timeout"}
		case strings.Contains(a.State["task"], "refuse me"):
			return typryxtest.Reply{Status: 429, Code: "over_hourly_cap"}
		}
		return typryxtest.Noulp(0.7)
	}})
	defer fake.Close()
	st := startTypedEvalWorker(t, e, "typed", typedClient(t, fake.URL))

	rep := e.request(Request{RequestID: "typed-ok", EvalSetPath: "typed/evalset.json"})
	require.True(t, rep.OK, rep.Error)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal(rep.Result, &res))
	require.NotNil(t, res.Run.Typed)
	assert.Equal(t, 5, res.Run.Typed.Asked)
	assert.Equal(t, 1, res.Run.Typed.Unanswered)
	assert.Equal(t, 4, res.Run.Typed.LabelsPosted)
	stored, err := st.Run(context.Background(), res.Run.ID)
	require.NoError(t, err)
	assert.Equal(t, res.Run.Typed, grading.Summarize(stored).Typed)

	// typryx refusing fails the request with its status and code; nothing
	// is stored, and the reply says why.
	set := json.RawMessage(`{"id":"refused","cases":[{"id":"a","grader":"typed","prompt":"refuse me"}]}`)
	bad := e.request(Request{RequestID: "typed-refused", EvalSet: set})
	require.False(t, bad.OK)
	assert.Contains(t, bad.Error, "HTTP 429 over_hourly_cap")
	assert.NotContains(t, bad.Error, workerTypedKey)
	runs, err := st.Runs(context.Background())
	require.NoError(t, err)
	assert.Len(t, runs, 1, "only the graded request's run")
}
