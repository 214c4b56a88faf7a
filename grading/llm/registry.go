package llm

import (
	"strings"
	"time"
)

// ModelsOptions configure Models.
type ModelsOptions struct {
	// AnthropicBaseURL is the Anthropic API root; "" means the
	// ANTHROPIC_BASE_URL read with Getenv, else the SDK's default.
	AnthropicBaseURL string
	// OpenAIBaseURL is the OpenAI-compatible API root; "" means
	// openai.DefaultBaseURL.
	OpenAIBaseURL string
	// Timeout bounds each call of every model built; calls are never
	// retried. Zero means each provider's default.
	Timeout time.Duration
	// Keys holds provider keys by the name of their environment variable
	// (ANTHROPIC_API_KEY, OPENAI_API_KEY), read before Getenv.
	Keys map[string]string
	// Getenv reads the provider keys Keys does not hold; nil reads
	// nothing, so only keyless servers work.
	Getenv func(string) string
}

// Models returns the model registry eval resolves --model and --judge
// with: StubID is the deterministic stub, "openai:<id>" an
// OpenAI-compatible model, "anthropic:<id>" and any other id an Anthropic
// model. Each call builds a new adapter and makes no network call; a
// missing key is ErrNoKey.
func Models(opts ModelsOptions) func(id string) (Model, error) {
	getenv := func(name string) string {
		if k, ok := opts.Keys[name]; ok {
			return k
		}
		if opts.Getenv != nil {
			return opts.Getenv(name)
		}
		return ""
	}
	return func(id string) (Model, error) {
		switch {
		case id == StubID:
			return &Stub{}, nil
		case strings.HasPrefix(id, "openai:"):
			return OpenAIFromEnv(strings.TrimPrefix(id, "openai:"), opts.OpenAIBaseURL, opts.Timeout, getenv)
		case strings.HasPrefix(id, "anthropic:"):
			return AnthropicFromEnv(strings.TrimPrefix(id, "anthropic:"), opts.AnthropicBaseURL, opts.Timeout, getenv)
		}
		return AnthropicFromEnv(id, opts.AnthropicBaseURL, opts.Timeout, getenv)
	}
}
