package grading

import (
	"context"

	"github.com/verdryx/verdryx/grading/llm"
)

// cannedModel answers every call with text, counting tokens.
type cannedModel struct {
	id   string
	text string
	err  error
	last llm.Call
}

func (m *cannedModel) ID() string { return m.id }
func (m *cannedModel) Complete(_ context.Context, c llm.Call) (llm.Completion, error) {
	m.last = c
	if m.err != nil {
		return llm.Completion{}, m.err
	}
	return llm.Completion{Text: m.text, InputTokens: 1000, OutputTokens: 10}, nil
}
