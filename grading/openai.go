package grading

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/verdryx/verdryx/redact"
)

// OpenAIOptions configure the OpenAI-compatible chat adapter.
type OpenAIOptions struct {
	// Model is the provider model id sent in the request ("gpt-4o-mini").
	Model string
	// APIKey is sent as a bearer token; OpenAIFromEnv reads OPENAI_API_KEY.
	// An empty key sends no Authorization header (local servers).
	APIKey string
	// BaseURL is the API root; requests go to BaseURL + "/chat/completions".
	// "" means https://api.openai.com/v1.
	BaseURL string
	// Timeout bounds each call; 0 means 60 s. Calls are never retried.
	Timeout time.Duration
	// MaxTokens caps an answer when the call does not; 0 means 1024.
	MaxTokens int
	// HTTPClient replaces the transport; its own Timeout is left as is.
	HTTPClient *http.Client
}

// OpenAI calls an OpenAI-compatible /chat/completions endpoint with
// net/http. It is safe for concurrent use. Its ID is "openai:" + model.
type OpenAI struct {
	opts   OpenAIOptions
	client *http.Client
}

var _ Model = (*OpenAI)(nil)

// NewOpenAI builds the adapter; it makes no network call.
func NewOpenAI(opts OpenAIOptions) (*OpenAI, error) {
	if opts.Model == "" {
		return nil, errors.New("openai: empty model id")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = "https://api.openai.com/v1"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = 1024
	}
	c := opts.HTTPClient
	if c == nil {
		c = &http.Client{}
	}
	return &OpenAI{opts: opts, client: c}, nil
}

// OpenAIFromEnv builds the adapter with the key from OPENAI_API_KEY.
func OpenAIFromEnv(model, baseURL string, timeout time.Duration, getenv func(string) string) (*OpenAI, error) {
	key := getenv("OPENAI_API_KEY")
	if key == "" && (baseURL == "" || strings.Contains(baseURL, "api.openai.com")) {
		return nil, fmt.Errorf("openai %s: %w (set OPENAI_API_KEY)", model, ErrNoKey)
	}
	return NewOpenAI(OpenAIOptions{Model: model, APIKey: key, BaseURL: baseURL, Timeout: timeout})
}

// ID returns "openai:" + the model id.
func (o *OpenAI) ID() string { return "openai:" + o.opts.Model }

type oaiMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type oaiRequest struct {
	Model     string            `json:"model"`
	Messages  []oaiMessage      `json:"messages"`
	MaxTokens int               `json:"max_tokens,omitempty"`
	Tools     []json.RawMessage `json:"tools,omitempty"`
}

type oaiResponse struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// anthropicToolToOpenAI maps {name, description, input_schema} to the
// function-tool shape; a tool already in that shape passes through.
func anthropicToolToOpenAI(raw json.RawMessage) (json.RawMessage, error) {
	var t struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	if t.Type == "function" {
		return raw, nil
	}
	fn := map[string]any{"name": t.Name}
	if t.Description != "" {
		fn["description"] = t.Description
	}
	if len(t.InputSchema) > 0 {
		fn["parameters"] = t.InputSchema
	}
	return json.Marshal(map[string]any{"type": "function", "function": fn})
}

// Complete posts one chat completion. A non-2xx status wraps ErrStatus; a
// body that does not decode or has no choice wraps ErrMalformed; a timeout
// returns the context error.
func (o *OpenAI) Complete(ctx context.Context, call Call) (_ Completion, err error) {
	// Errors may quote the answer body and the URL; a server echoing the
	// key or the Authorization header must not put it in a reason.
	defer func() { err = redact.New(o.opts.APIKey).Error(err) }()
	ctx, cancel := context.WithTimeout(ctx, o.opts.Timeout)
	defer cancel()
	req := oaiRequest{Model: o.opts.Model, MaxTokens: call.MaxTokens}
	if req.MaxTokens <= 0 {
		req.MaxTokens = o.opts.MaxTokens
	}
	if call.System != "" {
		req.Messages = append(req.Messages, oaiMessage{Role: "system", Content: call.System})
	}
	req.Messages = append(req.Messages, oaiMessage{Role: "user", Content: call.Prompt})
	for i, t := range call.Tools {
		ot, err := anthropicToolToOpenAI(t)
		if err != nil {
			return Completion{}, fmt.Errorf("%s: tool #%d: %w", o.ID(), i, err)
		}
		req.Tools = append(req.Tools, ot)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Completion{}, fmt.Errorf("%s: encode request: %w", o.ID(), err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(o.opts.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Completion{}, fmt.Errorf("%s: %w", o.ID(), err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if o.opts.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.opts.APIKey)
	}
	resp, err := o.client.Do(hreq)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Completion{}, fmt.Errorf("%s: %w", o.ID(), ctxErr)
		}
		return Completion{}, fmt.Errorf("%s: %w", o.ID(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Completion{}, fmt.Errorf("%s: %w", o.ID(), ctxErr)
		}
		return Completion{}, fmt.Errorf("%s: read answer: %w", o.ID(), err)
	}
	if resp.StatusCode/100 != 2 {
		return Completion{}, fmt.Errorf("%s: %w: %d %s", o.ID(), ErrStatus, resp.StatusCode, truncate(strings.TrimSpace(string(data)), 200))
	}
	var r oaiResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return Completion{}, fmt.Errorf("%s: %w: %v", o.ID(), ErrMalformed, err)
	}
	if len(r.Choices) == 0 {
		return Completion{}, fmt.Errorf("%s: %w: no choices", o.ID(), ErrMalformed)
	}
	m := r.Choices[0].Message
	c := Completion{InputTokens: r.Usage.PromptTokens, OutputTokens: r.Usage.CompletionTokens}
	if m.Content != nil {
		c.Text = *m.Content
	}
	for _, tc := range m.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, tc.Function.Name)
	}
	return c, nil
}
