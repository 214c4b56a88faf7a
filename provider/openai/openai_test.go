package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/verdryx/verdryx/provider"
)

// server answers every request with status and body (after optional
// hanging) and records the last request.
type server struct {
	status int
	body   string
	ctype  string
	hang   bool
	hits   atomic.Int32
	req    atomic.Value // map[string]any
	hdr    atomic.Value // http.Header
	path   atomic.Value // string
}

func (s *server) start(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		s.req.Store(m)
		s.hdr.Store(r.Header.Clone())
		s.path.Store(r.URL.Path)
		if s.hang {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		ct := s.ctype
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(s.status)
		_, _ = io.WriteString(w, s.body)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL + "/v1"
}

const chatOK = `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Looking it up.",
 "tool_calls":[{"id":"1","type":"function","function":{"name":"lookup_order","arguments":"{}"}}]},"finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}`

func newClient(t *testing.T, url, key string, timeout time.Duration) *Client {
	t.Helper()
	c, err := New(Options{BaseURL: url, APIKey: key, Timeout: timeout})
	require.NoError(t, err)
	return c
}

// traced returns a context under a recording root span and the exporter
// that sees the spans once they end.
func traced(t *testing.T) (context.Context, *tracetest.InMemoryExporter, func()) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, root := tp.Tracer("test").Start(context.Background(), "case")
	return ctx, exp, func() { root.End() }
}

func TestChat(t *testing.T) {
	s := &server{status: 200, body: chatOK}
	c := newClient(t, s.start(t), "sk-test-123456", 5*time.Second)
	zero := 0.0
	tool := json.RawMessage(`{"type":"function","function":{"name":"lookup_order"}}`)
	ctx, exp, end := traced(t)
	resp, err := c.Chat(ctx, ChatRequest{Model: "gpt-4o-mini", Temperature: &zero, MaxTokens: 64, Tools: []json.RawMessage{tool},
		Messages: []Message{{Role: "system", Content: "be terse"}, {Role: "user", Content: "hi"}}})
	end()
	require.NoError(t, err)
	assert.Equal(t, "Looking it up.", resp.Text)
	assert.True(t, resp.HasText)
	assert.Equal(t, []string{"lookup_order"}, resp.ToolCalls)
	assert.Equal(t, provider.Usage{InputTokens: 120, OutputTokens: 30, ResponseModel: "gpt-4o-mini-2024-07-18"}, resp.Usage)

	assert.Equal(t, "/v1/chat/completions", s.path.Load())
	assert.Equal(t, "Bearer sk-test-123456", s.hdr.Load().(http.Header).Get("Authorization"))
	req := s.req.Load().(map[string]any)
	assert.Equal(t, "gpt-4o-mini", req["model"])
	assert.Equal(t, 0.0, req["temperature"], "temperature 0 is sent, not omitted")
	assert.Equal(t, 64.0, req["max_tokens"])
	assert.Equal(t, "lookup_order", req["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)["name"])
	msgs := req["messages"].([]any)
	assert.Equal(t, "system", msgs[0].(map[string]any)["role"])
	assert.Equal(t, "hi", msgs[1].(map[string]any)["content"])

	spans := exp.GetSpans()
	require.Len(t, spans, 2, "the call span and its parent")
	call := spans[0]
	assert.Equal(t, "chat gpt-4o-mini", call.Name)
	assert.Equal(t, spans[1].SpanContext.SpanID(), call.Parent.SpanID(), "a child of the span in the context")
	attrs := map[string]any{}
	for _, kv := range call.Attributes {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	assert.Equal(t, "chat", attrs["gen_ai.operation.name"])
	assert.Equal(t, "openai", attrs["gen_ai.provider.name"])
	assert.Equal(t, "openai", attrs["gen_ai.system"])
	assert.Equal(t, "gpt-4o-mini", attrs["gen_ai.request.model"])
	assert.Equal(t, "gpt-4o-mini-2024-07-18", attrs["gen_ai.response.model"])
	assert.Equal(t, int64(120), attrs["gen_ai.usage.input_tokens"])
	assert.Equal(t, int64(30), attrs["gen_ai.usage.output_tokens"])
}

func TestChatFailures(t *testing.T) {
	for _, tc := range []struct {
		name, body, ctype string
		status            int
		want              string
		is                error
	}{
		{name: "error json", status: 429, body: `{"error":{"message":"Rate limit reached","type":"requests"}}`, want: "HTTP 429: Rate limit reached (requests)"},
		{name: "plain error", status: 502, body: "upstream down", ctype: "text/plain", want: "HTTP 502: upstream down"},
		{name: "empty error", status: 500, want: "HTTP 500: empty body"},
		{name: "string error", status: 503, body: `{"error":"down"}`, want: "HTTP 503: down"},
		{name: "not json", status: 200, body: "<html>oops</html>", is: ErrMalformed},
		{name: "truncated", status: 200, body: `{"id":"x","choices":[`, is: ErrMalformed},
		{name: "wrong types", status: 200, body: `{"choices":"no"}`, is: ErrMalformed},
		{name: "no choices", status: 200, body: `{}`, is: ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{status: tc.status, body: tc.body, ctype: tc.ctype}
			url := s.start(t)
			c := newClient(t, url, "", 5*time.Second)
			ctx, exp, end := traced(t)
			_, err := c.Chat(ctx, ChatRequest{Model: "llama3", Messages: []Message{{Role: "user", Content: "hi"}}})
			end()
			require.Error(t, err)
			assert.EqualValues(t, 1, s.hits.Load(), "exactly one attempt: retries are off")
			assert.Contains(t, err.Error(), "openai chat llama3 (POST "+url+"/chat/completions)")
			if tc.want != "" {
				assert.Contains(t, err.Error(), tc.want)
				var se *StatusError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tc.status, se.Code)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.Equal(t, "Error", exp.GetSpans()[0].Status.Code.String(), "a failed call's span says so")
			_, hasAuth := s.hdr.Load().(http.Header)["Authorization"]
			assert.False(t, hasAuth, "no key, no Authorization header")
		})
	}
}

func TestChatTimeout(t *testing.T) {
	s := &server{hang: true}
	c := newClient(t, s.start(t), "", 100*time.Millisecond)
	start := time.Now()
	_, err := c.Chat(context.Background(), ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.EqualValues(t, 1, s.hits.Load(), "a timeout is not retried")
}

func TestEmbedFailures(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		hang       bool
		want       string
		is         error
	}{
		{name: "error json", status: 401, body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`, want: "HTTP 401: Incorrect API key provided"},
		{name: "plain error", status: 502, body: "upstream down", want: "HTTP 502: upstream down"},
		{name: "not json", status: 200, body: "<html>oops</html>", is: ErrMalformed},
		{name: "truncated", status: 200, body: `{"data":[{"embedding":[1,`, is: ErrMalformed},
		{name: "wrong types", status: 200, body: `{"data":"no"}`, is: ErrMalformed},
		{name: "timeout", hang: true, is: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{status: tc.status, body: tc.body, hang: tc.hang}
			url := s.start(t)
			c := newClient(t, url, "", 200*time.Millisecond)
			start := time.Now()
			_, err := c.Embed(context.Background(), "m", []string{"a"})
			require.Error(t, err)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.EqualValues(t, 1, s.hits.Load(), "exactly one attempt: retries are off")
			assert.Contains(t, err.Error(), "openai embeddings m (POST "+url+"/embeddings)")
			if tc.want != "" {
				assert.Contains(t, err.Error(), tc.want)
				var se *StatusError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tc.status, se.Code)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}

// TestBodyLimit: an answer is read up to Options.MaxResponseBytes and no
// further; over it, a 2xx answer is malformed and an error answer keeps
// its status, both marked ErrTooLarge.
func TestBodyLimit(t *testing.T) {
	const embedOK = `{"data":[{"index":0,"embedding":[1,0]}],"model":"m"}`
	pad := func(body string, n int) string {
		return body[:len(body)-1] + `,"pad":"` + strings.Repeat("x", n) + `"}`
	}
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		limit   int64
		status2 int // the StatusError code wanted, 0 for none
		tooBig  bool
	}{
		{name: "at the limit", status: 200, body: embedOK, limit: int64(len(embedOK))},
		{name: "one byte over", status: 200, body: embedOK, limit: int64(len(embedOK)) - 1, tooBig: true},
		{name: "far over", status: 200, body: pad(embedOK, 1<<20), limit: 1 << 10, tooBig: true},
		{name: "error body over", status: 500, body: pad(`{"error":{"message":"boom"}}`, 1<<20), limit: 1 << 10, status2: 500, tooBig: true},
		{name: "error body within", status: 500, body: `{"error":{"message":"boom"}}`, limit: 1 << 10, status2: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{status: tc.status, body: tc.body}
			c, err := New(Options{BaseURL: s.start(t), Timeout: 5 * time.Second, MaxResponseBytes: tc.limit})
			require.NoError(t, err)
			resp, err := c.Embed(context.Background(), "m", []string{"a"})
			if !tc.tooBig && tc.status2 == 0 {
				require.NoError(t, err)
				assert.Len(t, resp.Data, 1)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.tooBig, errors.Is(err, ErrTooLarge), "ErrTooLarge: %v", err)
			var se *StatusError
			if tc.status2 != 0 {
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tc.status2, se.Code)
			} else {
				assert.ErrorIs(t, err, ErrMalformed)
				assert.False(t, errors.As(err, &se), "a 2xx answer is no status error")
			}
		})
	}
	_, err := New(Options{BaseURL: "http://localhost:1/v1", MaxResponseBytes: -1})
	assert.ErrorContains(t, err, "must not be negative")
}

func TestSecretsNotEchoed(t *testing.T) {
	// A server that quotes the request's Authorization header back.
	const key = "sk-very-secret-key-0001"
	s := &server{status: 401, body: `{"error":{"message":"bad header Authorization: Bearer ` + key + ` for key ` + key + `","type":"auth"}}`}
	c := newClient(t, s.start(t), key, 5*time.Second)
	_, err := c.Chat(context.Background(), ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), key)
	assert.Contains(t, err.Error(), "HTTP 401")
	var se *StatusError
	assert.True(t, errors.As(err, &se), "the redacted error still unwraps")
}

func TestNew(t *testing.T) {
	_, err := New(Options{})
	assert.ErrorIs(t, err, ErrNoKey, "the OpenAI API needs a key")
	_, err = New(Options{BaseURL: "https://api.openai.com/v1"})
	assert.ErrorIs(t, err, ErrNoKey)
	_, err = New(Options{BaseURL: "localhost:11434/v1"})
	assert.ErrorContains(t, err, "want http:// or https://")
	c, err := New(Options{BaseURL: "http://localhost:11434/v1/"})
	require.NoError(t, err, "a local server needs no key")
	assert.Equal(t, "http://localhost:11434/v1", c.base)
	assert.Equal(t, DefaultTimeout, c.timeout)
	c, err = New(Options{APIKey: "k"})
	require.NoError(t, err)
	assert.Equal(t, DefaultBaseURL, c.base, "no base URL is the OpenAI API, for every caller")
	assert.Equal(t, "k", KeyFromEnv(func(n string) string { return map[string]string{EnvAPIKey: "k"}[n] }))
}

func TestEmbed(t *testing.T) {
	s := &server{status: 200, body: `{"object":"list","model":"text-embedding-3-small","data":[{"index":1,"embedding":[0,1]},{"index":0,"embedding":["NaN",0]}],"usage":{"prompt_tokens":7,"total_tokens":7}}`}
	c := newClient(t, s.start(t), "sk-test-123456", 5*time.Second)
	ctx, exp, end := traced(t)
	resp, err := c.Embed(ctx, "text-embedding-3-small", []string{"a", "b"})
	end()
	require.NoError(t, err)
	require.Len(t, resp.Data, 2)
	assert.Equal(t, 1, *resp.Data[0].Index)
	assert.Equal(t, `"NaN"`, string(resp.Data[1].Embedding[0]), "components are left for the caller to validate")
	assert.Equal(t, provider.Usage{InputTokens: 7, ResponseModel: "text-embedding-3-small"}, resp.Usage)
	req := s.req.Load().(map[string]any)
	assert.Equal(t, []any{"a", "b"}, req["input"])
	assert.Equal(t, "float", req["encoding_format"])
	assert.Equal(t, "/v1/embeddings", s.path.Load())
	assert.Equal(t, "embeddings text-embedding-3-small", exp.GetSpans()[0].Name)

	s = &server{status: 200, body: `{"data":[{"embedding":[NaN]}]}`}
	c = newClient(t, s.start(t), "", 5*time.Second)
	_, err = c.Embed(context.Background(), "m", []string{"a"})
	assert.ErrorIs(t, err, ErrMalformed)
	assert.ErrorContains(t, err, "decode response")
}

func TestNoSpanWithoutParent(t *testing.T) {
	ctx, sp := provider.Start(context.Background(), provider.Call{Operation: provider.OpChat, Model: "m"})
	assert.Equal(t, context.Background(), ctx, "no recording parent: no span, context unchanged")
	sp.End(provider.Usage{}, nil)
}
