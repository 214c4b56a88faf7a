package rag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/redact"
)

// ChatOptions configures an OpenAI-compatible /v1/chat/completions client.
type ChatOptions struct {
	// BaseURL is the API root including the version path, for example
	// "https://api.openai.com/v1"; the client posts to BaseURL +
	// "/chat/completions". Required.
	BaseURL string
	// Model is the chat model id. Required.
	Model string
	// APIKey is sent as a bearer token when non-empty.
	APIKey string
	// Timeout bounds each call; zero means index.DefaultOpenAITimeout.
	Timeout time.Duration
	// Client is the HTTP client; nil means a new one with Timeout.
	Client *http.Client
}

// Chat is the OpenAI-compatible generator: one request per question at
// temperature 0 with the pipeline's exact messages, no retries, and the
// first choice's content returned verbatim. It is safe for concurrent use.
type Chat struct {
	opts ChatOptions
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
	if opts.Timeout <= 0 {
		opts.Timeout = index.DefaultOpenAITimeout
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Timeout}
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	return &Chat{opts: opts}, nil
}

// Name returns "openai-chat/<model>".
func (g *Chat) Name() string { return "openai-chat/" + g.opts.Model }

// Generate sends req.Messages and returns the answer unchanged.
func (g *Chat) Generate(ctx context.Context, req Request) (_ string, err error) {
	defer func() { err = redact.New(g.opts.APIKey).Error(err) }()
	body, err := json.Marshal(struct {
		Model       string    `json:"model"`
		Messages    []Message `json:"messages"`
		Temperature float64   `json:"temperature"`
	}{g.opts.Model, req.Messages, 0})
	if err != nil {
		return "", fmt.Errorf("openai chat: encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	raw, err := index.PostJSON(ctx, g.opts.Client, g.opts.BaseURL+"/chat/completions", g.opts.APIKey, body)
	if err != nil {
		return "", fmt.Errorf("openai chat: %w", err)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return "", fmt.Errorf("openai chat: decode response: %w", err)
	}
	if len(resp.Choices) == 0 || resp.Choices[0].Message.Content == nil {
		return "", errors.New("openai chat: response has no message content")
	}
	if *resp.Choices[0].Message.Content == "" {
		return "", errors.New("openai chat: empty answer")
	}
	return *resp.Choices[0].Message.Content, nil
}
