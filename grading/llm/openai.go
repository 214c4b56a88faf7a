package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/verdryx/verdryx/provider/openai"
)

// DefaultMaxTokens caps an OpenAI answer when neither the call nor
// OpenAIOptions does.
const DefaultMaxTokens = 1024

// OpenAIOptions configure the OpenAI-compatible chat adapter. Where and
// how it calls (base URL, key, per-call timeout, body limit, no retries)
// is the openai.Client's, the one configuration of every OpenAI-compatible
// call.
type OpenAIOptions struct {
	// Model is the provider model id sent in the request ("gpt-4o-mini").
	Model string
	// MaxTokens caps an answer when the call does not; 0 means
	// DefaultMaxTokens.
	MaxTokens int
}

// OpenAI is the model and judge adapter for OpenAI-compatible chat
// endpoints, over the shared client (package provider/openai: official SDK,
// retries off, a timeout per call, a GenAI span per call). It is safe for
// concurrent use. Its ID is "openai:" + model.
type OpenAI struct {
	opts   OpenAIOptions
	client *openai.Client
}

var _ Model = (*OpenAI)(nil)

// NewOpenAI builds the adapter on c; it makes no network call.
func NewOpenAI(c *openai.Client, opts OpenAIOptions) (*OpenAI, error) {
	if c == nil {
		return nil, errors.New("openai: nil client")
	}
	if opts.Model == "" {
		return nil, errors.New("openai: empty model id")
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	return &OpenAI{opts: opts, client: c}, nil
}

// OpenAIFromEnv builds the adapter with the key from OPENAI_API_KEY, the
// base URL baseURL ("" means openai.DefaultBaseURL) and timeout per call
// (0 means openai.DefaultTimeout). The OpenAI API itself without a key is
// ErrNoKey; other servers may need none.
func OpenAIFromEnv(model, baseURL string, timeout time.Duration, getenv func(string) string) (*OpenAI, error) {
	c, err := openai.New(openai.Options{BaseURL: baseURL, APIKey: openai.KeyFromEnv(getenv), Timeout: timeout})
	if errors.Is(err, openai.ErrNoKey) {
		return nil, fmt.Errorf("openai %s: %w (set %s)", model, ErrNoKey, openai.EnvAPIKey)
	}
	if err != nil {
		return nil, fmt.Errorf("openai %s: %w", model, err)
	}
	return NewOpenAI(c, OpenAIOptions{Model: model})
}

// ID returns "openai:" + the model id.
func (o *OpenAI) ID() string { return "openai:" + o.opts.Model }

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

// Complete makes one chat completion. A non-2xx status wraps ErrStatus; a
// body that does not decode or has no choice wraps ErrMalformed; a timeout
// wraps the context error. Errors never carry the key.
func (o *OpenAI) Complete(ctx context.Context, call Call) (Completion, error) {
	req := openai.ChatRequest{Model: o.opts.Model, MaxTokens: call.MaxTokens}
	if req.MaxTokens <= 0 {
		req.MaxTokens = o.opts.MaxTokens
	}
	if call.System != "" {
		req.Messages = append(req.Messages, openai.Message{Role: "system", Content: call.System})
	}
	req.Messages = append(req.Messages, openai.Message{Role: "user", Content: call.Prompt})
	for i, t := range call.Tools {
		ot, err := anthropicToolToOpenAI(t)
		if err != nil {
			return Completion{}, fmt.Errorf("%s: tool #%d: %w", o.ID(), i, err)
		}
		req.Tools = append(req.Tools, ot)
	}
	resp, err := o.client.Chat(ctx, req)
	if err != nil {
		var se *openai.StatusError
		switch {
		case errors.As(err, &se):
			return Completion{}, fmt.Errorf("%w: %w", ErrStatus, err)
		case errors.Is(err, openai.ErrMalformed):
			return Completion{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return Completion{}, err
	}
	return Completion{
		Text: resp.Text, ToolCalls: resp.ToolCalls,
		InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
		ResponseModel: resp.Usage.ResponseModel,
	}, nil
}
