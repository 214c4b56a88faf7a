package llm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestModels(t *testing.T) {
	keys := map[string]string{"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "ok"}
	resolve := Models(ModelsOptions{Timeout: time.Second, Getenv: func(k string) string { return keys[k] }})
	for _, tc := range []struct{ id, wantID string }{
		{StubID, StubID},
		{"openai:gpt-4o-mini", "openai:gpt-4o-mini"},
		{"anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"claude-haiku-4-5", "claude-haiku-4-5"},
	} {
		m, err := resolve(tc.id)
		require.NoError(t, err, tc.id)
		assert.Equal(t, tc.wantID, m.ID(), tc.id)
	}
	m, err := resolve(StubID)
	require.NoError(t, err)
	assert.IsType(t, &Stub{}, m)
	m, err = resolve("openai:gpt-4o-mini")
	require.NoError(t, err)
	assert.IsType(t, &OpenAI{}, m)
	m, err = resolve("claude-haiku-4-5")
	require.NoError(t, err)
	assert.IsType(t, &Anthropic{}, m, "a bare id is an Anthropic model")

	keyless := Models(ModelsOptions{OpenAIBaseURL: "http://127.0.0.1:11434/v1"})
	_, err = keyless("claude-haiku-4-5")
	assert.ErrorIs(t, err, ErrNoKey)
	m, err = keyless("openai:llama3")
	require.NoError(t, err, "a local OpenAI-compatible server needs no key")
	assert.Equal(t, "openai:llama3", m.ID())
	_, err = Models(ModelsOptions{})("openai:gpt-4o-mini")
	assert.ErrorIs(t, err, ErrNoKey, "the OpenAI API itself needs a key")
}
