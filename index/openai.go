package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/verdryx/verdryx/redact"
)

// DefaultOpenAITimeout bounds each embeddings HTTP call. It is a per-call
// limit, not a deadline for a whole command, and a call that timed out may
// still have been processed (and billed) by the provider.
const DefaultOpenAITimeout = 120 * time.Second

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
	// Ollama need none). The CLI reads it from OPENAI_API_KEY.
	APIKey string
	// Dims, when positive, is the vector length every response must have.
	// Zero accepts the length of the first vector, then requires it of all.
	Dims int
	// Timeout bounds each HTTP call; zero means DefaultOpenAITimeout.
	Timeout time.Duration
	// Client is the HTTP client; nil means a new client with Timeout. The
	// client makes exactly one attempt per call: there are no retries.
	Client *http.Client
}

// OpenAIEmbedder calls an OpenAI-compatible embeddings endpoint. It makes one
// HTTP request per Embed call, never retries, and validates the response
// strictly: one finite, non-zero vector per input, all of one length. It is
// safe for concurrent use.
type OpenAIEmbedder struct {
	opts OpenAIOptions
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
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultOpenAITimeout
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Timeout}
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	return &OpenAIEmbedder{opts: opts}, nil
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

type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     *int              `json:"index"`
		Embedding []json.RawMessage `json:"embedding"`
	} `json:"data"`
}

// Embed posts texts in one request and returns their vectors in input order.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body, err := json.Marshal(embeddingsRequest{Model: e.opts.Model, Input: texts, EncodingFormat: "float"})
	if err != nil {
		return nil, fmt.Errorf("openai embeddings: encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	raw, err := PostJSON(ctx, e.opts.Client, e.opts.BaseURL+"/embeddings", e.opts.APIKey, body)
	if err != nil {
		return nil, fmt.Errorf("openai embeddings: %w", err)
	}
	var resp embeddingsResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("openai embeddings: decode response: %w", err)
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

// maxErrorBody bounds how much of an error response is read and quoted.
const maxErrorBody = 4 << 10

// PostJSON makes one POST of body to url, with key as a bearer token when
// non-empty, and returns the body of a 2xx response; other statuses become
// errors quoting the provider's error message. It never retries. The
// OpenAI-compatible clients of other packages share it.
func PostJSON(ctx context.Context, client *http.Client, url, key string, body []byte) (_ []byte, err error) {
	// Errors quote the URL and the answer body; redact userinfo, echoed
	// headers and the key itself.
	defer func() { err = redact.New(key).Error(err) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, fmt.Errorf("post %s: HTTP %d: %s", url, resp.StatusCode, errorMessage(b))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("read response from %s: %w", url, err)
	}
	return b, nil
}

// errorMessage extracts {"error":{"message":...,"type":...}} from an error
// body, falling back to the trimmed raw text.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		if e.Error.Type != "" {
			return fmt.Sprintf("%s (%s)", e.Error.Message, e.Error.Type)
		}
		return e.Error.Message
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "empty body"
	}
	return s
}
