package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/verdryx/verdryx/index"
)

// EmbedderName is the Name of the OpenAI-compatible embedder.
const EmbedderName = "openai"

// Embedder is the index.Embedder of an OpenAI-compatible embeddings
// endpoint, over a Client (so with its base URL, key, per-call timeout,
// body limit and no retries). It validates the answer strictly: one
// finite, non-zero vector per input, all of one length, returned L2
// normalised in input order. It is safe for concurrent use.
type Embedder struct {
	client *Client
	model  string
	dims   int
}

var _ index.Embedder = (*Embedder)(nil)

// NewEmbedder returns the embedder of model on c. dims, when positive, is
// the vector length every answer must have; zero accepts the length of
// the first vector, then requires it of all. It makes no call.
func NewEmbedder(c *Client, model string, dims int) (*Embedder, error) {
	switch {
	case c == nil:
		return nil, errors.New("openai embedder: nil client")
	case model == "":
		return nil, errors.New("openai embedder: model is required")
	case dims < 0:
		return nil, fmt.Errorf("openai embedder: dims must not be negative, have %d", dims)
	}
	return &Embedder{client: c, model: model, dims: dims}, nil
}

// Name returns EmbedderName.
func (e *Embedder) Name() string { return EmbedderName }

// Model returns the configured model id, with the required dimension when
// one is set ("text-embedding-3-small/d256").
func (e *Embedder) Model() string {
	if e.dims > 0 {
		return fmt.Sprintf("%s/d%d", e.model, e.dims)
	}
	return e.model
}

// Embed sends texts in one call and returns their vectors in input order.
// A wrong vector length wraps index.ErrDimension, a NaN, infinite or
// out-of-range component index.ErrNonFinite, a zero vector
// index.ErrZeroVector; transport failures are the Client's.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	resp, err := e.client.Embed(ctx, e.model, texts)
	if err != nil {
		return nil, err
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("openai embeddings: asked for %d vectors, response has %d", len(texts), len(resp.Data))
	}
	out := make([][]float32, len(texts))
	dims := e.dims
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
			return nil, fmt.Errorf("%w: openai embeddings: data[%d] has %d components, want %d", index.ErrDimension, i, len(d.Embedding), dims)
		}
		v := make([]float32, dims)
		for j, c := range d.Embedding {
			f, err := parseComponent(c)
			if err != nil {
				return nil, fmt.Errorf("openai embeddings: data[%d] component %d: %w", i, j, err)
			}
			v[j] = f
		}
		if _, err := index.Normalize(v); err != nil {
			return nil, fmt.Errorf("openai embeddings: data[%d]: %w", i, err)
		}
		out[pos] = v
	}
	return out, nil
}

// parseComponent decodes one vector component, reporting NaN, infinities
// and values outside float32 range (sent as strings or huge numbers) as
// index.ErrNonFinite rather than as a bare JSON error.
func parseComponent(raw json.RawMessage) (float32, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return 0, fmt.Errorf("%w: %q", index.ErrNonFinite, s)
		}
		return 0, fmt.Errorf("%w: %s", index.ErrNonFinite, raw)
	}
	f32 := float32(f)
	if math.IsNaN(f) || math.IsInf(float64(f32), 0) {
		return 0, fmt.Errorf("%w: %s", index.ErrNonFinite, raw)
	}
	return f32, nil
}
