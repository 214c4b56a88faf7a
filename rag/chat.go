package rag

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/verdryx/verdryx/provider/openai"
)

// ChatOptions configures the OpenAI-compatible generator.
type ChatOptions struct {
	// BaseURL is the API root including the version path, for example
	// "https://api.openai.com/v1"; the client posts to BaseURL +
	// "/chat/completions". Required.
	BaseURL string
	// Model is the chat model id. Required.
	Model string
	// APIKey is sent as a bearer token when non-empty; the OpenAI API
	// itself refuses to be built without one.
	APIKey string
	// Timeout bounds each call; zero means openai.DefaultTimeout.
	Timeout time.Duration
	// Client is the HTTP transport; nil means a plain client.
	Client *http.Client
}

// Chat is the OpenAI-compatible generator, over the shared client (package
// provider/openai): one call per question at temperature 0 with the
// pipeline's exact messages, no retries, and the first choice's content
// returned verbatim. Each call is a GenAI span with the provider's token
// usage under the span in the caller's context. It is safe for concurrent
// use.
type Chat struct {
	model  string
	client *openai.Client
}

var _ Generator = (*Chat)(nil)

// NewChat validates opts and returns the client. It makes no call.
func NewChat(opts ChatOptions) (*Chat, error) {
	if opts.BaseURL == "" {
		return nil, errors.New("openai chat: base URL is required")
	}
	if opts.Model == "" {
		return nil, errors.New("openai chat: model is required")
	}
	c, err := openai.New(openai.Options{BaseURL: opts.BaseURL, APIKey: opts.APIKey, Timeout: opts.Timeout, HTTPClient: opts.Client})
	if err != nil {
		return nil, fmt.Errorf("openai chat: %w", err)
	}
	return &Chat{model: opts.Model, client: c}, nil
}

// Name returns "openai-chat/<model>".
func (g *Chat) Name() string { return "openai-chat/" + g.model }

// Generate sends req.Messages and returns the answer unchanged. An answer
// without content, or with empty content, is an error.
func (g *Chat) Generate(ctx context.Context, req Request) (string, error) {
	msgs := make([]openai.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = openai.Message{Role: m.Role, Content: m.Content}
	}
	zero := 0.0
	resp, err := g.client.Chat(ctx, openai.ChatRequest{Model: g.model, Messages: msgs, Temperature: &zero})
	if err != nil {
		return "", err
	}
	if !resp.HasText {
		return "", fmt.Errorf("openai chat %s: response has no message content", g.model)
	}
	if resp.Text == "" {
		return "", fmt.Errorf("openai chat %s: empty answer", g.model)
	}
	return resp.Text, nil
}
