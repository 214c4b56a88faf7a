package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/verdryx/verdryx/provider"
	"github.com/verdryx/verdryx/redact"
)

// AnthropicOptions configure the Anthropic Messages adapter.
type AnthropicOptions struct {
	// Model is the provider model id, e.g. "claude-sonnet-4-5".
	Model string
	// APIKey authenticates; AnthropicFromEnv reads it from
	// ANTHROPIC_API_KEY and nowhere else.
	APIKey string
	// BaseURL overrides the API endpoint (a proxy such as TokenFuse);
	// "" means the SDK's production default.
	BaseURL string
	// Timeout bounds each call; 0 means 60 s. Calls are never retried.
	Timeout time.Duration
	// MaxTokens caps an answer when the call does not; 0 means 1024.
	MaxTokens int
	// HTTPClient replaces the transport (tests); nil means the SDK's.
	HTTPClient *http.Client
}

// Anthropic calls the Anthropic Messages API through the official Go SDK,
// with retries off and a timeout per call. It is safe for concurrent use.
type Anthropic struct {
	opts   AnthropicOptions
	client anthropic.Client
}

var _ Model = (*Anthropic)(nil)

// NewAnthropic builds the adapter. It makes no network call. An empty key
// is ErrNoKey.
func NewAnthropic(opts AnthropicOptions) (*Anthropic, error) {
	if opts.APIKey == "" {
		return nil, fmt.Errorf("anthropic %s: %w (set ANTHROPIC_API_KEY)", opts.Model, ErrNoKey)
	}
	if opts.Model == "" {
		return nil, errors.New("anthropic: empty model id")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = 1024
	}
	ro := []option.RequestOption{
		option.WithoutEnvironmentDefaults(), // we read the environment ourselves
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(opts.Timeout),
	}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	return &Anthropic{opts: opts, client: anthropic.NewClient(ro...)}, nil
}

// AnthropicFromEnv builds the adapter with the key from ANTHROPIC_API_KEY
// and the base URL from baseURL, else ANTHROPIC_BASE_URL.
func AnthropicFromEnv(model, baseURL string, timeout time.Duration, getenv func(string) string) (*Anthropic, error) {
	if baseURL == "" {
		baseURL = getenv("ANTHROPIC_BASE_URL")
	}
	return NewAnthropic(AnthropicOptions{Model: model, APIKey: getenv("ANTHROPIC_API_KEY"), BaseURL: baseURL, Timeout: timeout})
}

// ID returns the model id.
func (a *Anthropic) ID() string { return a.opts.Model }

// Complete sends one user turn (and the system prompt and tools, verbatim)
// and returns the text, the tool names called in order and the usage. An
// error status wraps ErrStatus; an answer that does not decode, or has no
// content, wraps ErrMalformed; a timeout returns the context error.
func (a *Anthropic) Complete(ctx context.Context, call Call) (c Completion, err error) {
	ctx, span := provider.Start(ctx, provider.Call{Operation: provider.OpChat, Provider: provider.Anthropic, Model: a.opts.Model})
	defer func() {
		span.End(provider.Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, ResponseModel: c.ResponseModel}, err)
	}()
	// SDK errors may quote the answer body; never let the key through.
	defer func() { err = redact.New(a.opts.APIKey).Error(err) }()
	maxTokens := call.MaxTokens
	if maxTokens <= 0 {
		maxTokens = a.opts.MaxTokens
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(a.opts.Model),
		MaxTokens: int64(maxTokens),
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(call.Prompt))},
	}
	if call.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: call.System}}
	}
	var ro []option.RequestOption
	if len(call.Tools) > 0 {
		ro = append(ro, option.WithJSONSet("tools", call.Tools))
	}
	msg, err := a.client.Messages.New(ctx, params, ro...)
	if err != nil {
		return Completion{}, classifySDKError(a.opts.Model, err)
	}
	if msg == nil || (msg.ID == "" && len(msg.Content) == 0) {
		return Completion{}, fmt.Errorf("anthropic %s: %w: no message in the answer", a.opts.Model, ErrMalformed)
	}
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			c.Text += block.Text
		case "tool_use":
			c.ToolCalls = append(c.ToolCalls, block.Name)
		}
	}
	c.InputTokens = msg.Usage.InputTokens
	c.OutputTokens = msg.Usage.OutputTokens
	c.ResponseModel = string(msg.Model)
	return c, nil
}

func classifySDKError(model string, err error) error {
	var apiErr *anthropic.Error
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &apiErr):
		return fmt.Errorf("anthropic %s: %w: %d", model, ErrStatus, apiErr.StatusCode)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("anthropic %s: %w", model, err)
	case errors.As(err, &syn), errors.As(err, &typ), errors.Is(err, io.ErrUnexpectedEOF),
		strings.Contains(err.Error(), "parsing response json"):
		return fmt.Errorf("anthropic %s: %w: %v", model, ErrMalformed, err)
	}
	return fmt.Errorf("anthropic %s: %w", model, err)
}
