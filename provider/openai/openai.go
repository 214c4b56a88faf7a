// Package openai is the one OpenAI-compatible client of verdryx: chat
// completions and embeddings through the official SDK
// (github.com/openai/openai-go/v3), against api.openai.com or any
// compatible server (Ollama, vLLM, llama.cpp: http://localhost:11434/v1).
//
// Every call is made exactly once (SDK retries off), bounded by a per-call
// timeout, and recorded as an OpenTelemetry GenAI span (package provider)
// under the span in the caller's context. Errors name the operation, the
// model and the URL, quote the provider's error message, and never carry
// the API key (package redact). The client reads no environment variable
// itself: KeyFromEnv reads OPENAI_API_KEY for the callers that want it.
//
// Options is the one configuration of every OpenAI-compatible call: the
// embedder (Embedder, an index.Embedder), the RAG generator (rag.Chat) and
// the grading model and judge adapter (llm.OpenAI) are thin layers
// over a Client built from it, so they share its defaults: base URL
// DefaultBaseURL, DefaultTimeout per call, DefaultMaxResponseBytes per
// answer, no retries.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/verdryx/verdryx/provider"
	"github.com/verdryx/verdryx/redact"
)

// DefaultBaseURL is the API root used when Options.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultTimeout bounds each call when Options.Timeout is zero. It is a
// per-call limit, not a deadline for a whole command, and a call that timed
// out may still have been processed (and billed) by the provider.
const DefaultTimeout = 120 * time.Second

// DefaultMaxResponseBytes bounds each answer's body when
// Options.MaxResponseBytes is zero: room for a few thousand
// 3,072-dimension vectors in one embeddings answer.
const DefaultMaxResponseBytes = 64 << 20

// EnvAPIKey is the environment variable KeyFromEnv reads.
const EnvAPIKey = "OPENAI_API_KEY"

// ErrNoKey is returned by New when the base URL is the OpenAI API itself
// and no key is given. Other compatible servers may need none.
var ErrNoKey = errors.New("openai: no API key (set " + EnvAPIKey + ")")

// ErrMalformed marks a 2xx answer that does not decode or lacks what the
// call needs (no choice, no data).
var ErrMalformed = errors.New("malformed response")

// ErrTooLarge marks an answer whose body is over Options.MaxResponseBytes;
// a 2xx answer so marked also wraps ErrMalformed. The body is not read
// past the limit.
var ErrTooLarge = errors.New("openai: response body over the limit")

// StatusError is a non-2xx answer. Message is the provider's error message
// (redacted), or the start of the body when it has none.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Message) }

// ErrorType returns the status code, the error.type of the call's span.
func (e *StatusError) ErrorType() string { return strconv.Itoa(e.Code) }

// Options configure a Client.
type Options struct {
	// BaseURL is the API root including the version path; "" means
	// DefaultBaseURL. Requests go to BaseURL + "/chat/completions" and
	// BaseURL + "/embeddings".
	BaseURL string
	// APIKey is sent as a bearer token when non-empty.
	APIKey string
	// Timeout bounds each call; zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient replaces the transport; nil means a plain http.Client
	// (the per-call timeout applies either way).
	HTTPClient *http.Client
	// MaxResponseBytes bounds the body of each answer, error answers
	// included; zero means DefaultMaxResponseBytes, negative is an error.
	MaxResponseBytes int64
}

// Client calls one OpenAI-compatible server. It is safe for concurrent use.
type Client struct {
	base    string
	key     string
	timeout time.Duration
	chat    sdk.ChatCompletionService
	embed   sdk.EmbeddingService
}

// NeedsKey reports whether baseURL is the OpenAI API itself, which refuses
// calls without a key.
func NeedsKey(baseURL string) bool {
	return baseURL == "" || strings.Contains(baseURL, "api.openai.com")
}

// KeyFromEnv returns the value of OPENAI_API_KEY read with getenv.
func KeyFromEnv(getenv func(string) string) string { return getenv(EnvAPIKey) }

// New validates opts and builds the client. It makes no network call and
// reads no environment variable. An empty base URL is DefaultBaseURL, a
// trailing slash is dropped, a scheme other than http or https is an
// error; an empty key for the OpenAI API itself is ErrNoKey.
func New(opts Options) (*Client, error) {
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.APIKey == "" && NeedsKey(opts.BaseURL) {
		return nil, ErrNoKey
	}
	if !strings.HasPrefix(opts.BaseURL, "http://") && !strings.HasPrefix(opts.BaseURL, "https://") {
		return nil, fmt.Errorf("openai: base URL %q: want http:// or https://", redact.URL(opts.BaseURL))
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	switch {
	case opts.MaxResponseBytes < 0:
		return nil, fmt.Errorf("openai: max response bytes must not be negative, have %d", opts.MaxResponseBytes)
	case opts.MaxResponseBytes == 0:
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	base := strings.TrimRight(opts.BaseURL, "/")
	// The services are built without sdk.NewClient, which would read
	// OPENAI_* variables (base URL, organisation, custom headers) behind
	// the caller's back.
	ro := []option.RequestOption{
		option.WithBaseURL(base + "/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(opts.Timeout),
		option.WithMiddleware(limitBody(opts.MaxResponseBytes)),
	}
	if opts.APIKey != "" {
		ro = append(ro, option.WithAPIKey(opts.APIKey))
	}
	return &Client{
		base:    base,
		key:     opts.APIKey,
		timeout: opts.Timeout,
		chat:    sdk.NewChatCompletionService(ro...),
		embed:   sdk.NewEmbeddingService(ro...),
	}, nil
}

// Message is one chat message. Role is "system", "user" or "assistant".
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is one chat completion.
type ChatRequest struct {
	Model    string
	Messages []Message
	// Temperature is sent when non-nil.
	Temperature *float64
	// MaxTokens is sent as max_tokens when positive.
	MaxTokens int
	// Tools are function tools in the OpenAI shape, sent verbatim.
	Tools []json.RawMessage
}

// ChatResponse is the first choice of a chat completion.
type ChatResponse struct {
	// Text is the message content; HasText is false when the answer had
	// none (null or absent), as when the model only called tools.
	Text    string
	HasText bool
	// ToolCalls are the names of the functions called, in order.
	ToolCalls []string
	Usage     provider.Usage
}

// Chat makes one chat completion call. A non-2xx answer is a *StatusError;
// a 2xx answer that does not decode or has no choice wraps ErrMalformed; a
// timeout wraps context.DeadlineExceeded.
func (c *Client) Chat(ctx context.Context, req ChatRequest) (resp ChatResponse, err error) {
	ctx, span := provider.Start(ctx, provider.Call{Operation: provider.OpChat, Provider: provider.OpenAI, Model: req.Model})
	defer func() { span.End(resp.Usage, err) }()
	defer func() { err = c.wrap("chat", req.Model, "/chat/completions", err) }()
	params := sdk.ChatCompletionNewParams{Model: sdk.ChatModel(req.Model)}
	for i, m := range req.Messages {
		switch m.Role {
		case "system":
			params.Messages = append(params.Messages, sdk.SystemMessage(m.Content))
		case "user":
			params.Messages = append(params.Messages, sdk.UserMessage(m.Content))
		case "assistant":
			params.Messages = append(params.Messages, sdk.AssistantMessage(m.Content))
		default:
			return ChatResponse{}, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	if req.Temperature != nil {
		params.Temperature = sdk.Float(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = sdk.Int(int64(req.MaxTokens))
	}
	var ro []option.RequestOption
	if len(req.Tools) > 0 {
		ro = append(ro, option.WithJSONSet("tools", req.Tools))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// The body is taken raw and decoded here, whatever its Content-Type:
	// some compatible servers answer JSON as text/plain.
	var raw []byte
	var hr *http.Response
	if _, err := c.chat.New(ctx, params, append(ro, option.WithResponseBodyInto(&raw), option.WithResponseInto(&hr))...); err != nil {
		return ChatResponse{}, classify(ctx, hr, err)
	}
	var out sdk.ChatCompletion
	if err := json.Unmarshal(raw, &out); err != nil {
		return ChatResponse{}, fmt.Errorf("%w: decode response: %v", ErrMalformed, err)
	}
	if len(out.Choices) == 0 {
		return ChatResponse{}, fmt.Errorf("%w: no choices", ErrMalformed)
	}
	resp.Usage = provider.Usage{InputTokens: out.Usage.PromptTokens, OutputTokens: out.Usage.CompletionTokens, ResponseModel: out.Model}
	msg := out.Choices[0].Message
	resp.Text = msg.Content
	resp.HasText = msg.JSON.Content.Valid()
	for _, tc := range msg.ToolCalls {
		name := tc.Function.Name
		if name == "" {
			name = tc.Custom.Name
		}
		resp.ToolCalls = append(resp.ToolCalls, name)
	}
	return resp, nil
}

// Embedding is one vector of an embeddings answer, components undecoded so
// the caller can validate each (the SDK's decoder would turn a "NaN" string
// into 0 without a word).
type Embedding struct {
	// Index is the input position the provider gave, nil when absent.
	Index     *int              `json:"index"`
	Embedding []json.RawMessage `json:"embedding"`
}

// EmbedResponse is an embeddings answer, in the provider's order.
type EmbedResponse struct {
	Data  []Embedding
	Usage provider.Usage
}

// Embed makes one embeddings call for texts with encoding_format "float".
// Errors are as for Chat; the body is decoded strictly.
func (c *Client) Embed(ctx context.Context, model string, texts []string) (resp EmbedResponse, err error) {
	ctx, span := provider.Start(ctx, provider.Call{Operation: provider.OpEmbeddings, Provider: provider.OpenAI, Model: model})
	defer func() { span.End(resp.Usage, err) }()
	defer func() { err = c.wrap("embeddings", model, "/embeddings", err) }()
	params := sdk.EmbeddingNewParams{
		Model:          sdk.EmbeddingModel(model),
		Input:          sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: sdk.EmbeddingNewParamsEncodingFormatFloat,
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var raw []byte
	var hr *http.Response
	if _, err := c.embed.New(ctx, params, option.WithResponseBodyInto(&raw), option.WithResponseInto(&hr)); err != nil {
		return EmbedResponse{}, classify(ctx, hr, err)
	}
	var body struct {
		Data  []Embedding `json:"data"`
		Model string      `json:"model"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return EmbedResponse{}, fmt.Errorf("%w: decode response: %v", ErrMalformed, err)
	}
	return EmbedResponse{Data: body.Data, Usage: provider.Usage{InputTokens: body.Usage.PromptTokens, ResponseModel: body.Model}}, nil
}

// wrap prefixes err with the operation, model and URL and redacts it.
func (c *Client) wrap(op, model, path string, err error) error {
	if err == nil {
		return nil
	}
	return redact.New(c.key).Error(fmt.Errorf("openai %s %s (POST %s%s): %w", op, model, c.base, path, err))
}

// maxErrorBody bounds how much of an error body is quoted.
const maxErrorBody = 4 << 10

// classify maps an SDK error to a *StatusError, ErrMalformed or the
// context error. hr is the response when one arrived: an error status
// whose body the SDK could not read as an error object ({"error":"down"})
// is still a status error.
func classify(ctx context.Context, hr *http.Response, err error) error {
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		return &StatusError{Code: apiErr.StatusCode, Message: errorMessage(apiErr)}
	case hr != nil && hr.StatusCode >= 400 && errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%w: %w", &StatusError{Code: hr.StatusCode, Message: "error body too large"}, err)
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	case hr != nil && hr.StatusCode >= 400:
		return &StatusError{Code: hr.StatusCode, Message: bodyMessage(hr)}
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return err
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "parsing response json") {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return err
}

// errorMessage is the provider's {"error":{"message","type"}}, else the
// start of the body.
func errorMessage(e *sdk.Error) string {
	if e.Message != "" {
		if e.Type != "" {
			return fmt.Sprintf("%s (%s)", e.Message, e.Type)
		}
		return e.Message
	}
	return bodyMessage(e.Response)
}

// bodyMessage is a string "error" member of an error body, else the start
// of the body.
func bodyMessage(hr *http.Response) string {
	if hr == nil || hr.Body == nil {
		return "empty body"
	}
	b, _ := io.ReadAll(io.LimitReader(hr.Body, maxErrorBody))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "empty body"
}

// limitBody makes every answer's body fail with ErrTooLarge once more
// than limit bytes have been read from it.
func limitBody(limit int64) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if resp != nil && resp.Body != nil {
			resp.Body = &limitedBody{rc: resp.Body, left: limit}
		}
		return resp, err
	}
}

// limitedBody reads at most left bytes of rc, then fails with
// ErrTooLarge if more is there.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), ErrTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
