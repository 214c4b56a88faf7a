package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/verdryx/verdryx/provider/openai"
)

// DefaultOpenAITimeout bounds each embeddings call. It is a per-call
// limit, not a deadline for a whole command, and a call that timed out may
// still have been processed (and billed) by the provider.
const DefaultOpenAITimeout = openai.DefaultTimeout

// OpenAIEmbedderName is the Name of the OpenAI-compatible embedder.
const OpenAIEmbedderName = "openai"

// OpenAIOptions configures an OpenAI-compatible /v1/embeddings client.
type OpenAIOptions struct {
	// BaseURL is the API root including the version path, for example
	// "https://api.openai.com/v1" or "http://localhost:11434/v1"; the client
	// posts to BaseURL + "/embeddings". Required.
	BaseURL string
	// Model is the embedding model id. Required.
	Model string
	// APIKey is sent as a bearer token when non-empty (local servers such as
	// Ollama need none; the OpenAI API itself refuses to be built without
	// one). The CLI reads it from OPENAI_API_KEY.
	APIKey string
	// Dims, when positive, is the vector length every response must have.
	// Zero accepts the length of the first vector, then requires it of all.
	Dims int
	// Timeout bounds each call; zero means DefaultOpenAITimeout.
	Timeout time.Duration
	// Client is the HTTP transport; nil means a plain client. Either way the
	// client makes exactly one attempt per call: there are no retries.
	Client *http.Client
}

// OpenAIEmbedder calls an OpenAI-compatible embeddings endpoint through the
// shared client (package provider/openai: official SDK, one attempt per
// call, an OpenTelemetry GenAI span per call with the provider's token
// usage). It validates the response strictly: one finite, non-zero vector
// per input, all of one length. It is safe for concurrent use.
type OpenAIEmbedder struct {
	opts   OpenAIOptions
	client *openai.Client
}

var _ Embedder = (*OpenAIEmbedder)(nil)

// NewOpenAIEmbedder validates opts and returns the client. It makes no call.
func NewOpenAIEmbedder(opts OpenAIOptions) (*OpenAIEmbedder, error) {
	if opts.BaseURL == "" {
		return nil, errors.New("openai embedder: base URL is required")
	}
	if opts.Model == "" {
		return nil, errors.New("openai embedder: model is required")
	}
	if opts.Dims < 0 {
		return nil, fmt.Errorf("openai embedder: dims must not be negative, have %d", opts.Dims)
	}
	c, err := openai.New(openai.Options{BaseURL: opts.BaseURL, APIKey: opts.APIKey, Timeout: opts.Timeout, HTTPClient: opts.Client})
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	return &OpenAIEmbedder{opts: opts, client: c}, nil
}

// Name returns OpenAIEmbedderName.
func (e *OpenAIEmbedder) Name() string { return OpenAIEmbedderName }

// Model returns the configured model id, with the required dimension when
// one is set.
func (e *OpenAIEmbedder) Model() string {
	if e.opts.Dims > 0 {
		return fmt.Sprintf("%s/d%d", e.opts.Model, e.opts.Dims)
	}
	return e.opts.Model
}

// Embed sends texts in one call and returns their vectors in input order.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	resp, err := e.client.Embed(ctx, e.opts.Model, texts)
	if err != nil {
		return nil, err
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("openai embeddings: asked for %d vectors, response has %d", len(texts), len(resp.Data))
	}
	out := make([][]float32, len(texts))
	dims := e.opts.Dims
	for i, d := range resp.Data {
		pos := i
		if d.Index != nil {
			pos = *d.Index
		}
		if pos < 0 || pos >= len(texts) || out[pos] != nil {
			return nil, fmt.Errorf("openai embeddings: data[%d] has invalid or repeated index %d", i, pos)
		}
		if dims == 0 {
			dims = len(d.Embedding)
		}
		if len(d.Embedding) != dims {
			return nil, fmt.Errorf("%w: openai embeddings: data[%d] has %d components, want %d", ErrDimension, i, len(d.Embedding), dims)
		}
		v := make([]float32, dims)
		for j, c := range d.Embedding {
			f, err := parseComponent(c)
			if err != nil {
				return nil, fmt.Errorf("openai embeddings: data[%d] component %d: %w", i, j, err)
			}
			v[j] = f
		}
		if _, err := Normalize(v); err != nil {
			return nil, fmt.Errorf("openai embeddings: data[%d]: %w", i, err)
		}
		out[pos] = v
	}
	return out, nil
}

// parseComponent decodes one vector component, reporting NaN, infinities
// and values outside float32 range (sent as strings or huge numbers) as
// ErrNonFinite rather than as a bare JSON error.
func parseComponent(raw json.RawMessage) (float32, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return 0, fmt.Errorf("%w: %q", ErrNonFinite, s)
		}
		return 0, fmt.Errorf("%w: %s", ErrNonFinite, raw)
	}
	f32 := float32(f)
	if math.IsNaN(f) || math.IsInf(float64(f32), 0) {
		return 0, fmt.Errorf("%w: %s", ErrNonFinite, raw)
	}
	return f32, nil
}
