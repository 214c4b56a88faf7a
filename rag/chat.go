package rag

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdryx/verdryx/provider/openai"
)

// Chat is the OpenAI-compatible generator, over the shared client (package
// provider/openai, whose Options carry the base URL, key, per-call timeout
// and body limit of every OpenAI-compatible call): one call per question
// at temperature 0 with the pipeline's exact messages, no retries, and the
// first choice's content returned verbatim. Each call is a GenAI span with
// the provider's token usage under the span in the caller's context. It
// is safe for concurrent use.
type Chat struct {
	model  string
	client *openai.Client
}

var _ Generator = (*Chat)(nil)

// NewChat returns the generator of model on c. It makes no call.
func NewChat(c *openai.Client, model string) (*Chat, error) {
	if c == nil {
		return nil, errors.New("openai chat: nil client")
	}
	if model == "" {
		return nil, errors.New("openai chat: model is required")
	}
	return &Chat{model: model, client: c}, nil
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
