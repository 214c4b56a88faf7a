package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdryx/verdryx/testkit/otlptest"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/ragask"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/worker"
)

// jsonResults decodes the JSON values serve --once --json printed and
// returns the eval results among them (the objects with a "run").
func jsonResults(t *testing.T, out string) []evalrun.Result {
	t.Helper()
	var res []evalrun.Result
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var raw map[string]json.RawMessage
		require.NoError(t, dec.Decode(&raw), "stdout is a stream of JSON objects:\n%s", out)
		if _, ok := raw["run"]; !ok {
			continue
		}
		b, err := json.Marshal(raw)
		require.NoError(t, err)
		var r evalrun.Result
		require.NoError(t, json.Unmarshal(b, &r))
		res = append(res, r)
	}
	return res
}

// caseValues are a run's per-case scores: the value, or the unmeasured
// reason's first clause.
func caseValues(r evalrun.Result) map[string]string {
	out := map[string]string{}
	for _, s := range r.Run.Run.Scores {
		if s.Graded() {
			out[s.CaseID] = fmt.Sprintf("%.4f", s.Value)
		} else {
			out[s.CaseID] = "unmeasured: " + evalFirstClause(s.Unmeasured)
		}
	}
	return out
}

// writeRequest writes an eval-request file into dir.
func writeRequest(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// TestServeEvalRequestGradedByAllowedModel is issue 43's first criterion:
// an eval request naming an allowed OpenAI-compatible model is graded by
// it through the worker with the per-case scores eval --model gives for
// the same set and model; a model outside --allow-model is refused before
// anything runs (exit 2, naming the allowed ids).
func TestServeEvalRequestGradedByAllowedModel(t *testing.T) {
	cleanEvalEnv(t)
	fake := &fakeChat{}
	fake.lower("q-1", "q-3") // two cases answered wrong, so the scores differ
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); fake.ServeHTTP(w, r) }))
	defer srv.Close()
	root := t.TempDir()
	set := numberedSet(t, root, "set.json", 5, nil)
	model := []string{"--openai-base-url", srv.URL + "/v1"}

	out, errOut, code := runCLI(t, append([]string{"eval", "--db", filepath.Join(t.TempDir(), "e.db"), "--json", "--model", "openai:fake-chat", set}, model...)...)
	require.Equal(t, exitOK, code, errOut)
	var want evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(out), &want))
	require.Equal(t, int64(5), hits.Load())

	req := writeRequest(t, root, "req.json", `{"request_id":"r-allowed","eval_set_path":"set.json","model":"openai:fake-chat"}`)
	out, errOut, code = serveOnce(t, t.TempDir(), append([]string{"--root", root, "--eval-request", req, "--json", "--allow-model", "openai:fake-chat"}, model...)...)
	require.Equal(t, exitOK, code, errOut)
	have := jsonResults(t, out)
	require.Len(t, have, 1, out)
	assert.Equal(t, "openai:fake-chat", have[0].Run.Model)
	assert.Equal(t, caseValues(want), caseValues(have[0]))
	assert.Equal(t, map[string]string{"case-00": "1.0000", "case-01": "0.0000", "case-02": "1.0000", "case-03": "0.0000", "case-04": "1.0000"}, caseValues(have[0]))
	require.Equal(t, int64(10), hits.Load(), "the worker called the model once per case")

	other := writeRequest(t, root, "other.json", `{"request_id":"r-other","eval_set_path":"set.json","model":"openai:gpt-4o"}`)
	_, errOut, code = serveOnce(t, t.TempDir(), append([]string{"--root", root, "--eval-request", other, "--allow-model", "openai:fake-chat"}, model...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `field model: "openai:gpt-4o" is not allowed on this worker (allowed: stub, openai:fake-chat;`)
	judge := writeRequest(t, root, "judge.json", `{"request_id":"r-judge","eval_set_path":"set.json","judge":"claude-sonnet-4-5"}`)
	_, errOut, code = serveOnce(t, t.TempDir(), "--root", root, "--eval-request", judge)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `field judge: "claude-sonnet-4-5" is not allowed on this worker (allowed: stub;`)
	assert.Equal(t, int64(10), hits.Load(), "a refused request calls no model")
}

// TestServeModelFailuresAreNeverRetried: a model answering 429 or 503 to
// every call leaves every case unmeasured with the reason; the run is
// stored, the request is not delivered again (which would pay twice), and
// each case cost exactly one call.
func TestServeModelFailuresAreNeverRetried(t *testing.T) {
	cleanEvalEnv(t)
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
			}))
			defer srv.Close()
			root := t.TempDir()
			numberedSet(t, root, "set.json", 3, nil)
			req := writeRequest(t, root, "req.json", `{"request_id":"r-fail","eval_set_path":"set.json","model":"openai:fake-chat"}`)
			data := t.TempDir()
			args := []string{"--root", root, "--eval-request", req, "--json", "--allow-model", "openai:fake-chat", "--openai-base-url", srv.URL + "/v1"}
			out, errOut, code := serveOnce(t, data, args...)
			require.Equal(t, exitOK, code, errOut)
			have := jsonResults(t, out)
			require.Len(t, have, 1, out)
			assert.Nil(t, have[0].Run.MeanScore)
			for _, s := range have[0].Run.Run.Scores {
				assert.Contains(t, s.Unmeasured, fmt.Sprint(status), s.CaseID)
			}
			assert.True(t, have[0].Saved)
			assert.Equal(t, int64(3), hits.Load(), "one call per case, none retried, the request not redelivered")

			// Run again on the same data: the request is done, answered from
			// the store, and nothing is called.
			out, errOut, code = serveOnce(t, data, args...)
			require.Equal(t, exitOK, code, errOut)
			require.Len(t, jsonResults(t, out), 1, out)
			assert.Equal(t, int64(3), hits.Load())
		})
	}
}

// embedFake is an OpenAI-compatible embeddings server answering with the
// offline hashing embedder's vectors, recording every input it embeds.
type embedFake struct {
	mu     sync.Mutex
	inputs [][]string
	hash   *hashembed.Embedder
}

func (f *embedFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input []string `json:"input"`
	}
	if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	f.inputs = append(f.inputs, req.Input)
	f.mu.Unlock()
	vecs, _ := f.hash.Embed(r.Context(), req.Input)
	var data []map[string]any
	for i, v := range vecs {
		data = append(data, map[string]any{"index": i, "embedding": v})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

func (f *embedFake) calls() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.inputs...)
}

// runWorker runs serve's worker (flags args) against the NATS server at
// url until the test ends or stop is called.
func runWorker(t *testing.T, data, url string, args ...string) (stop func()) {
	t.Helper()
	opts, err := serveOptions(t, append([]string{"--nats", url, "--http", ""}, args...)...)
	require.NoError(t, err)
	opts.DataDir = data
	w, err := worker.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

// natsServer starts an embedded server for a test and connects to it.
func natsServer(t *testing.T) (string, *nats.Conn) {
	t.Helper()
	ns, err := embedded.Start(filepath.Join(t.TempDir(), "nats"), "127.0.0.1:0")
	require.NoError(t, err)
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(func() {
		nc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns.ClientURL(), nc
}

// askNATS asks over NATS until the worker answers.
func askNATS(t *testing.T, nc *nats.Conn, body string) ragask.Reply {
	t.Helper()
	var rep ragask.Reply
	jstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		m, err := nc.Request("verdryx.rag.ask", []byte(body), 5*time.Second)
		if err != nil {
			return err
		}
		return json.Unmarshal(m.Data, &rep)
	})
	return rep
}

// TestServeAskFromOpenAIGeneration is issue 43's ask criterion: on a
// generation built with --embedder openai, an ask over NATS retrieves what
// verdryx ask retrieves, from the generation's stored vectors, and only the
// question is embedded; top_k comes in the ask. Without the key the
// worker refuses asks, saying why.
func TestServeAskFromOpenAIGeneration(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv("OPENAI_API_KEY", "sk-fake")
	fake := &embedFake{hash: hashembed.New(256)}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	data := t.TempDir()
	base := []string{"--openai-base-url", srv.URL + "/v1"}
	_, errOut, code := ragRun(t, append([]string{"index", "build", "--data", data, "--corpus", ragCorpusPath, "--embedder", "openai", "--embed-model", "fake-embed"}, base...)...)
	require.Equal(t, exitOK, code, errOut)
	require.Len(t, fake.calls(), 1)

	const question = "What quantity of pearl salt and which vapor are specified for ground moonpetal?"
	out, errOut, code := ragRun(t, append([]string{"ask", "--json", "--data", data, question}, base...)...)
	require.Equal(t, exitOK, code, errOut)
	var want struct {
		RetrievedIDs    []string  `json:"retrieved_ids"`
		Similarities    []float64 `json:"similarities"`
		Embedder        string    `json:"embedder"`
		IndexGeneration string    `json:"index_generation"`
		Answer          string    `json:"answer"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &want))
	assert.Equal(t, "openai/fake-embed", want.Embedder, "ask uses the generation's embedder with no --embedder")
	require.Equal(t, [][]string{{question}}, fake.calls()[1:], "ask embeds only the question")

	url, nc := natsServer(t)
	runWorker(t, data, url, base...)
	rep := askNATS(t, nc, `{"question":"`+question+`"}`)
	require.Empty(t, rep.Error)
	assert.Equal(t, want.RetrievedIDs, rep.Record.RetrievedIDs)
	assert.InDeltaSlice(t, want.Similarities, rep.Record.Similarities, 1e-6)
	assert.Equal(t, want.IndexGeneration, rep.Record.IndexGeneration)
	assert.Equal(t, want.Embedder, rep.Record.Embedder)
	assert.Equal(t, want.Answer, rep.Record.Answer)
	calls := fake.calls()
	require.Len(t, calls, 3, "the worker embedded one text per ask, nothing at start")
	assert.Equal(t, []string{question}, calls[2])

	rep = askNATS(t, nc, `{"question":"`+question+`","top_k":4}`)
	require.Empty(t, rep.Error)
	assert.Len(t, rep.Record.RetrievedIDs, 4)
	assert.Equal(t, want.RetrievedIDs, rep.Record.RetrievedIDs[:2])

	// Without a key for the OpenAI API, asks are refused with the reason.
	t.Setenv("OPENAI_API_KEY", "")
	url2, nc2 := natsServer(t)
	data2 := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(data2, "index"), os.DirFS(filepath.Join(data, "index"))))
	runWorker(t, data2, url2, "--openai-base-url", "https://api.openai.com/v1")
	rep = askNATS(t, nc2, `{"question":"`+question+`"}`)
	assert.Nil(t, rep.Record)
	assert.Contains(t, rep.Error, "asks refused on this worker")
	assert.Contains(t, rep.Error, "OPENAI_API_KEY")
	assert.Len(t, fake.calls(), 4)
}

// TestServeEvalIndexGradesAgainstStoredGeneration: eval --index active and
// an eval request's "index" field grade the rag cases from the stored
// generation, with its embedder: the same scores, the generation named.
func TestServeEvalIndexGradesAgainstStoredGeneration(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv("OPENAI_API_KEY", "sk-fake")
	fake := &embedFake{hash: hashembed.New(0)}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	data := t.TempDir()
	base := []string{"--openai-base-url", srv.URL + "/v1"}
	_, errOut, code := ragRun(t, append([]string{"index", "build", "--data", data, "--corpus", ragCorpusPath, "--embedder", "openai", "--embed-model", "fake-embed"}, base...)...)
	require.Equal(t, exitOK, code, errOut)
	set, err := filepath.Abs("../../testdata/grimoire/evalset.json")
	require.NoError(t, err)
	out, errOut, code := runCLI(t, append([]string{"eval", "--data", data, "--json", "--index", "active", set}, base...)...)
	require.Contains(t, []int{exitOK, exitFailure}, code, errOut)
	var want evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(out), &want))
	ragCases := 0
	for _, s := range want.Run.Run.Scores {
		if s.Grader == "rag" {
			ragCases++
		}
	}
	require.Positive(t, ragCases)
	assert.Len(t, fake.calls(), 1+ragCases, "eval embedded only the rag cases' questions")
	m, _, err := index.NewStore(data, index.StoreOptions{}).Generation("active")
	require.NoError(t, err)
	assert.Equal(t, m.ID, want.Run.Provenance.IndexGeneration)

	_, errOut, code = runCLI(t, "eval", "--data", t.TempDir(), "--index", "active", set)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--index active")
	assert.Contains(t, errOut, "no active generation")

	req := writeRequest(t, t.TempDir(), "req.json", `{"request_id":"r-index","eval_set_path":"grimoire/evalset.json","index":"active"}`)
	out, errOut, code = runCLI(t, append([]string{"serve", "--once", "--data", data, "--nats-listen", "127.0.0.1:0", "--http", "", "--json",
		"--root", "../../testdata", "--eval-request", req}, base...)...)
	require.Equal(t, exitOK, code, errOut)
	have := jsonResults(t, out)
	require.Len(t, have, 1, out)
	assert.Equal(t, caseValues(want), caseValues(have[0]))
	assert.Equal(t, m.ID, have[0].Run.Provenance.IndexGeneration)
}

// natsExample is one `nats req|pub|sub SUBJECT ['BODY']` line of the docs.
type natsExample struct {
	file, line, verb, subject, body string
}

var natsLine = regexp.MustCompile(`^nats (req|pub|sub) ('[^']*'|\S+)(?: '(.*)')?\s*$`)

// docsNATSExamples extracts every nats CLI line in a fenced block of the
// README and docs/*.md.
func docsNATSExamples(t *testing.T) []natsExample {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	var out []natsExample
	for _, f := range append(files, "../../README.md") {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		fenced := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
				continue
			}
			if !fenced || !strings.HasPrefix(line, "nats ") {
				continue
			}
			m := natsLine.FindStringSubmatch(line)
			require.NotNil(t, m, "%s: a nats line the test cannot run: %s", f, line)
			out = append(out, natsExample{file: f, line: line, verb: m[1], subject: strings.Trim(m[2], "'"), body: m[3]})
		}
		fh.Close()
		require.NoError(t, sc.Err())
	}
	return out
}

// TestDocsNATSExamplesRun runs every nats CLI line of the docs against a
// worker set up as the docs say (an index built from the grimoire corpus,
// --root testdata): an ask is answered, an eval request with reply_to gets
// its result there, a subscription receives what the worker publishes.
// A doc change is tested as it is written.
func TestDocsNATSExamplesRun(t *testing.T) {
	cleanEvalEnv(t)
	examples := docsNATSExamples(t)
	require.NotEmpty(t, examples)
	data := t.TempDir()
	_, errOut, code := ragRun(t, "index", "build", "--data", data, "--corpus", ragCorpusPath)
	require.Equal(t, exitOK, code, errOut)
	url, nc := natsServer(t)
	runWorker(t, data, url, "--root", "../../testdata")
	askNATS(t, nc, `{"question":"warm-up"}`) // the worker is up

	// Subscriptions first, so they see what the requests make.
	subs := map[string]*nats.Subscription{}
	for _, ex := range examples {
		if ex.verb == "sub" {
			sub, err := nc.SubscribeSync(ex.subject)
			require.NoError(t, err)
			subs[ex.line] = sub
		}
	}
	for _, ex := range examples {
		t.Run(ex.line, func(t *testing.T) {
			switch ex.verb {
			case "req":
				m, err := nc.Request(ex.subject, []byte(ex.body), 30*time.Second)
				require.NoError(t, err, "%s: %s", ex.file, ex.line)
				var rep struct {
					Error string `json:"error"`
				}
				require.NoError(t, json.Unmarshal(m.Data, &rep))
				require.Empty(t, rep.Error, "%s: %s", ex.file, ex.line)
			case "pub":
				var req evalreq.Request
				require.NoError(t, json.Unmarshal([]byte(ex.body), &req), "%s: %s", ex.file, ex.line)
				require.NotEmpty(t, req.ReplyTo, "%s: an eval request example names a reply_to, or its requester hears nothing: %s", ex.file, ex.line)
				sub, err := nc.SubscribeSync(req.ReplyTo)
				require.NoError(t, err)
				defer sub.Unsubscribe()
				require.NoError(t, nc.Publish(ex.subject, []byte(ex.body)))
				m, err := sub.NextMsg(60 * time.Second)
				require.NoError(t, err, "%s: no reply on %s to: %s", ex.file, req.ReplyTo, ex.line)
				var rep evalreq.Reply
				require.NoError(t, json.Unmarshal(m.Data, &rep))
				require.True(t, rep.OK, "%s: %s: %s", ex.file, ex.line, rep.Error)
			}
		})
	}
	for line, sub := range subs {
		_, err := sub.NextMsg(30 * time.Second)
		require.NoError(t, err, "nothing arrived for: %s", line)
	}
}

// TestServeRefusedReplyIsDeadLettered: an eval request or an ask whose
// reply subject the worker refuses is not answered, and shows in dlq ls
// with the reason.
func TestServeRefusedReplyIsDeadLettered(t *testing.T) {
	cleanEvalEnv(t)
	data := t.TempDir()
	_, errOut, code := ragRun(t, "index", "build", "--data", data, "--corpus", ragCorpusPath)
	require.Equal(t, exitOK, code, errOut)
	url, nc := natsServer(t)
	runWorker(t, data, url, "--root", "../../testdata")
	askNATS(t, nc, `{"question":"warm-up"}`)
	require.NoError(t, nc.Publish("verdryx.eval.requests", []byte(`{"request_id":"r-dead","eval_set_path":"grimoire/evalset.json","reply_to":"my.inbox"}`)))
	require.NoError(t, nc.PublishRequest("verdryx.rag.ask", "my.inbox", []byte(`{"question":"anything?"}`)))
	var dls []struct {
		Subject string `json:"subject"`
		Reason  string `json:"reason"`
	}
	jstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		out, errOut, code := runCLI(t, "dlq", "ls", "--json", "--nats", url, "--filter", "my.inbox")
		if code != exitOK {
			return fmt.Errorf("dlq ls: %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &dls); err != nil {
			return err
		}
		if len(dls) < 2 {
			return fmt.Errorf("%d dead letters: %s", len(dls), out)
		}
		return nil
	})
	subjects := []string{}
	for _, d := range dls {
		assert.Contains(t, d.Reason, "reply_to refused")
		assert.Contains(t, d.Reason, `"my.inbox"`)
		subjects = append(subjects, d.Subject)
	}
	assert.ElementsMatch(t, []string{"verdryx.eval.requests", "verdryx.rag.ask"}, subjects)
}

// TestServeAskSpan: with --otlp each ask is a span verdryx.rag.ask, with
// what answered it, and the question's embedding call a GenAI span under
// it.
func TestServeAskSpan(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv("OPENAI_API_KEY", "sk-fake")
	fake := &embedFake{hash: hashembed.New(64)}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	col := &otlptest.Collector{}
	otlp := httptest.NewServer(col)
	defer otlp.Close()
	data := t.TempDir()
	base := []string{"--openai-base-url", srv.URL + "/v1"}
	_, errOut, code := ragRun(t, append([]string{"index", "build", "--data", data, "--corpus", ragCorpusPath, "--embedder", "openai", "--embed-model", "fake-embed"}, base...)...)
	require.Equal(t, exitOK, code, errOut)
	url, nc := natsServer(t)
	stop := runWorker(t, data, url, append([]string{"--otlp", otlp.URL}, base...)...)
	rep := askNATS(t, nc, `{"question":"How many grains of pearl salt for moonpetal?","top_k":3}`)
	require.Empty(t, rep.Error)
	stop() // flushes the spans

	spans := col.Spans()
	var ask *tracepb.Span
	for _, s := range spans {
		if s.Name == ragask.SpanAsk {
			require.Nil(t, ask, "one span per ask")
			ask = s
		}
	}
	require.NotNil(t, ask, "no %s span among %d", ragask.SpanAsk, len(spans))
	attrs := map[string]string{}
	for _, kv := range ask.Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	assert.Contains(t, attrs["verdryx.embedder"], "openai/fake-embed")
	assert.Contains(t, attrs["verdryx.retrieved_ids"], rep.Record.RetrievedIDs[0])
	assert.Contains(t, attrs["verdryx.top_k"], "3")
	require.NotEmpty(t, rep.IndexGeneration)
	assert.Contains(t, attrs["verdryx.index_generation"], rep.IndexGeneration, "the span names the generation that answered")
	children := 0
	for _, s := range spans {
		if string(s.ParentSpanId) == string(ask.SpanId) && strings.HasPrefix(s.Name, "embeddings") {
			children++
		}
	}
	assert.Equal(t, 1, children, "the question's embedding call is a GenAI span under the ask")
}

// TestServeCostCapBoundsRequests: with --prices and --max-cost-usd, a
// request asking a higher max_cost_usd (or none) runs under the worker's
// bound, one asking less under its own; paid calls stop once the priced
// spend reaches the cap, the rest of the cases unmeasured with reason
// cost_limit, the run stored and saying so. A bound over an unpriced
// model is refused at start.
func TestServeCostCapBoundsRequests(t *testing.T) {
	cleanEvalEnv(t)
	fake := &fakeChat{}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); fake.ServeHTTP(w, r) }))
	defer srv.Close()
	root := t.TempDir()
	numberedSet(t, root, "set.json", 12, nil)
	prices := filepath.Join(root, "prices.json")
	// fakeChat answers with 10 input and 2 output tokens: $0.01 a call.
	require.NoError(t, os.WriteFile(prices, []byte(`{"openai:fake-chat":{"input_usd_per_mtok":1000,"output_usd_per_mtok":0}}`), 0o644))
	more := writeRequest(t, root, "more.json", `{"request_id":"r-more","eval_set_path":"set.json","model":"openai:fake-chat","max_cost_usd":1}`)
	less := writeRequest(t, root, "less.json", `{"request_id":"r-less","eval_set_path":"set.json","model":"openai:fake-chat","max_cost_usd":0.02}`)
	args := []string{"--root", root, "--json", "--allow-model", "openai:fake-chat", "--openai-base-url", srv.URL + "/v1", "--prices", prices, "--max-cost-usd", "0.03"}
	for _, tc := range []struct {
		req string
		cap float64
	}{{more, 0.03}, {less, 0.02}} {
		before := hits.Load()
		out, errOut, code := serveOnce(t, t.TempDir(), append(args, "--eval-request", tc.req)...)
		require.Equal(t, exitOK, code, errOut)
		have := jsonResults(t, out)
		require.Len(t, have, 1, out)
		r := have[0].Run
		assert.InDelta(t, tc.cap, r.CostLimitUSD, 1e-12, "the cap the run ran under")
		calls := hits.Load() - before
		// At most the calls in flight when the cap was reached (4 cases at
		// once) past it.
		assert.LessOrEqual(t, r.TotalCostUSD, tc.cap+0.03+1e-9)
		assert.Less(t, calls, int64(12), "paid calls stopped at the cap")
		assert.Equal(t, 12-int(calls), r.CostLimited)
		limited := 0
		for _, s := range r.Run.Scores {
			if s.Unmeasured == "cost_limit" || strings.HasPrefix(s.Unmeasured, "cost_limit") {
				limited++
			}
		}
		assert.Equal(t, r.CostLimited, limited)
		assert.True(t, have[0].Saved)
	}

	_, errOut, code := serveOnce(t, t.TempDir(), "--root", root, "--allow-model", "openai:unpriced-chat", "--openai-base-url", srv.URL+"/v1", "--max-cost-usd", "0.03")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "model openai:unpriced-chat (--allow-model, --judge) has no price, so --max-cost-usd cannot bound its spend")
}
