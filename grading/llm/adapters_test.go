package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/provider/openai"
)

// fakeProvider serves one canned answer and records what it was sent.
type fakeProvider struct {
	status  int
	body    string
	hang    bool // hold the request until the client gives up
	hits    atomic.Int32
	lastReq atomic.Value // map[string]any
	lastHdr atomic.Value // http.Header
}

func (f *fakeProvider) server(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		f.lastReq.Store(m)
		f.lastHdr.Store(r.Header.Clone())
		if f.hang {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv
}

const anthropicOK = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5",
 "content":[{"type":"text","text":"Looking it up."},{"type":"tool_use","id":"tu_1","name":"lookup_order","input":{"order_id":"4471"}},
            {"type":"tool_use","id":"tu_2","name":"issue_refund","input":{"order_id":"4471"}}],
 "stop_reason":"tool_use","usage":{"input_tokens":120,"output_tokens":30}}`

const openaiOK = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Looking it up.",
 "tool_calls":[{"id":"1","type":"function","function":{"name":"lookup_order","arguments":"{}"}},
               {"id":"2","type":"function","function":{"name":"issue_refund","arguments":"{}"}}]},"finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}`

type adapterCase struct {
	name  string
	okish string
	build func(t *testing.T, url string, timeout time.Duration) Model
	check func(t *testing.T, f *fakeProvider)
}

func adapters() []adapterCase {
	return []adapterCase{
		{
			name:  "anthropic",
			okish: anthropicOK,
			build: func(t *testing.T, url string, timeout time.Duration) Model {
				m, err := NewAnthropic(AnthropicOptions{Model: "claude-sonnet-4-5", APIKey: "test-key", BaseURL: url, Timeout: timeout})
				require.NoError(t, err)
				return m
			},
			check: func(t *testing.T, f *fakeProvider) {
				hdr := f.lastHdr.Load().(http.Header)
				// The SDK sends the key as a bearer token or x-api-key,
				// depending on its version.
				assert.True(t, hdr.Get("X-Api-Key") == "test-key" || hdr.Get("Authorization") == "Bearer test-key", "key sent: %v", hdr)
				req := f.lastReq.Load().(map[string]any)
				assert.Equal(t, "claude-sonnet-4-5", req["model"])
				tools := req["tools"].([]any)
				require.Len(t, tools, 1)
				assert.Equal(t, "lookup_order", tools[0].(map[string]any)["name"], "tools are sent verbatim")
				assert.Equal(t, "be terse", req["system"].([]any)[0].(map[string]any)["text"])
			},
		},
		{
			name:  "openai",
			okish: openaiOK,
			build: func(t *testing.T, url string, timeout time.Duration) Model {
				c, err := openai.New(openai.Options{APIKey: "test-key", BaseURL: url, Timeout: timeout})
				require.NoError(t, err)
				m, err := NewOpenAI(c, OpenAIOptions{Model: "gpt-4o-mini"})
				require.NoError(t, err)
				return m
			},
			check: func(t *testing.T, f *fakeProvider) {
				hdr := f.lastHdr.Load().(http.Header)
				assert.Equal(t, "Bearer test-key", hdr.Get("Authorization"))
				req := f.lastReq.Load().(map[string]any)
				assert.Equal(t, "gpt-4o-mini", req["model"])
				fn := req["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)
				assert.Equal(t, "lookup_order", fn["name"], "anthropic-shape tools become function tools")
				assert.NotNil(t, fn["parameters"])
				msgs := req["messages"].([]any)
				assert.Equal(t, "system", msgs[0].(map[string]any)["role"])
			},
		},
	}
}

func TestAdapters(t *testing.T) {
	tool := json.RawMessage(`{"name":"lookup_order","description":"Look up an order","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}}}}`)
	call := Call{System: "be terse", Prompt: "Order 4471 arrived damaged.", Tools: []json.RawMessage{tool}}
	for _, ad := range adapters() {
		t.Run(ad.name+"/success", func(t *testing.T) {
			f := &fakeProvider{status: 200, body: ad.okish}
			m := ad.build(t, f.server(t).URL, 5*time.Second)
			c, err := m.Complete(context.Background(), call)
			require.NoError(t, err)
			assert.Equal(t, "Looking it up.", c.Text)
			assert.Equal(t, []string{"lookup_order", "issue_refund"}, c.ToolCalls)
			assert.Equal(t, int64(120), c.InputTokens)
			assert.Equal(t, int64(30), c.OutputTokens)
			ad.check(t, f)
		})
		for _, status := range []int{400, 429, 500, 503} {
			t.Run(ad.name+"/error status "+http.StatusText(status), func(t *testing.T) {
				f := &fakeProvider{status: status, body: `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`}
				m := ad.build(t, f.server(t).URL, 5*time.Second)
				_, err := m.Complete(context.Background(), call)
				require.ErrorIs(t, err, ErrStatus)
				assert.EqualValues(t, 1, f.hits.Load(), "retries are off")
			})
		}
		for name, body := range map[string]string{"not json": "<html>oops</html>", "truncated": `{"id":"x","content":[`, "wrong types": `{"choices":"no","content":7}`} {
			t.Run(ad.name+"/malformed body "+name, func(t *testing.T) {
				f := &fakeProvider{status: 200, body: body}
				m := ad.build(t, f.server(t).URL, 5*time.Second)
				_, err := m.Complete(context.Background(), call)
				require.ErrorIs(t, err, ErrMalformed)
				assert.EqualValues(t, 1, f.hits.Load())
			})
		}
		t.Run(ad.name+"/empty answer object", func(t *testing.T) {
			f := &fakeProvider{status: 200, body: `{}`}
			m := ad.build(t, f.server(t).URL, 5*time.Second)
			_, err := m.Complete(context.Background(), call)
			require.ErrorIs(t, err, ErrMalformed)
		})
		t.Run(ad.name+"/timeout", func(t *testing.T) {
			f := &fakeProvider{hang: true}
			m := ad.build(t, f.server(t).URL, 150*time.Millisecond)
			start := time.Now()
			_, err := m.Complete(context.Background(), call)
			require.Error(t, err)
			assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.EqualValues(t, 1, f.hits.Load(), "a timeout is not retried")
		})
	}
}

func TestAdaptersFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	_, err := AnthropicFromEnv("claude-sonnet-4-5", "", time.Second, env(nil))
	assert.ErrorIs(t, err, ErrNoKey)
	a, err := AnthropicFromEnv("claude-sonnet-4-5", "", time.Second, env(map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://proxy.invalid"}))
	require.NoError(t, err)
	assert.Equal(t, "http://proxy.invalid", a.opts.BaseURL, "base URL from the environment")
	a, err = AnthropicFromEnv("claude-sonnet-4-5", "http://flag.invalid", time.Second, env(map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://proxy.invalid"}))
	require.NoError(t, err)
	assert.Equal(t, "http://flag.invalid", a.opts.BaseURL, "the flag wins")

	_, err = OpenAIFromEnv("gpt-4o-mini", "", time.Second, env(nil))
	assert.ErrorIs(t, err, ErrNoKey)
	o, err := OpenAIFromEnv("llama", "http://127.0.0.1:8080/v1", time.Second, env(nil))
	require.NoError(t, err, "a local OpenAI-compatible server needs no key")
	assert.Equal(t, "openai:llama", o.ID())
}
