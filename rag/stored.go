package rag

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/provider/openai"
)

// Providers say how to reach the providers a stored generation may name
// as its embedder. The generation names its embedder; building it was the
// operator's opt-in, so nothing here chooses one.
type Providers struct {
	// OpenAIBaseURL is the OpenAI-compatible API root; "" means
	// openai.DefaultBaseURL.
	OpenAIBaseURL string
	// OpenAIKey is sent as a bearer token when non-empty (the OpenAI API
	// itself refuses calls without one: openai.ErrNoKey).
	OpenAIKey string
	// Timeout bounds each embedding call; 0 means openai.DefaultTimeout.
	Timeout time.Duration
}

// ErrEmbedder marks a generation whose embedder cannot be rebuilt here:
// an unknown embedder name or model, or a provider without its key.
var ErrEmbedder = errors.New("rag: embedder of the generation unavailable")

// embedderOf returns the embedder that built a generation, from the
// EmbedderInfo its manifest records: the offline hashing embedder
// ("offline-hash", its dimensions from the model) or an OpenAI-compatible
// embedder ("openai", model "<id>" or "<id>/d<dims>") over p. It makes no
// network call. The embedder returned has exactly info as its InfoOf.
func embedderOf(info index.EmbedderInfo, p Providers) (index.Embedder, error) {
	var emb index.Embedder
	switch info.Name {
	case hashembed.New(0).Name():
		dims, ok := hashDims(info.Model)
		if !ok {
			return nil, fmt.Errorf("%w: offline embedder model %q", ErrEmbedder, info.Model)
		}
		emb = hashembed.New(dims)
	case openai.EmbedderName:
		model, dims := info.Model, 0
		if i := strings.LastIndex(model, "/d"); i > 0 {
			if n, err := strconv.Atoi(model[i+2:]); err == nil && n > 0 {
				model, dims = model[:i], n
			}
		}
		c, err := openai.New(openai.Options{BaseURL: p.OpenAIBaseURL, APIKey: p.OpenAIKey, Timeout: p.Timeout})
		if err != nil {
			return nil, fmt.Errorf("%w: %s/%s: %w", ErrEmbedder, info.Name, info.Model, err)
		}
		e, err := openai.NewEmbedder(c, model, dims)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrEmbedder, err)
		}
		emb = e
	default:
		return nil, fmt.Errorf("%w: unknown embedder %q", ErrEmbedder, info.Name)
	}
	if index.InfoOf(emb) != info {
		return nil, fmt.Errorf("%w: embedder %s/%s is rebuilt as %s/%s", ErrEmbedder, info.Name, info.Model, emb.Name(), emb.Model())
	}
	return emb, nil
}

// hashDims reads the dimensions of an offline embedder model
// ("hash-v1/d1024/...").
func hashDims(model string) (int, bool) {
	for _, part := range strings.Split(model, "/") {
		if n, err := strconv.Atoi(strings.TrimPrefix(part, "d")); strings.HasPrefix(part, "d") && err == nil && n > 0 {
			return n, true
		}
	}
	return 0, false
}

// OpenStored is the one way a stored generation answers questions (ask,
// the worker's asks and eval's rag cases against --index): it opens
// generation id of store ("active" or "" for the active one), rebuilds
// the embedder that built it (embedderOf, with p), and returns the
// pipeline over its stored vectors, BM25 statistics and corpus with gen,
// ranking by the retrieval the generation records (none means
// RetrievalVector; opts.Retrieval is overridden, an unknown value is
// ErrCorrupt). It reads the vectors, the ids, the BM25 statistics and
// where each chunk lies, never the whole corpus: chunks are read as they
// are retrieved (every chunk once, on the first ask with a filter). What
// it checks is what is cheap (index.Store.Generation: the manifest and
// every file's size); index.Store.Verify checks the rest. Only questions
// are embedded, one call per ask; it makes no network call. Errors: those
// of index.Store.Generation and LoadGeneration (index.ErrNoActive,
// ErrCorrupt, ...), ErrEmbedder.
func OpenStored(store *index.Store, id string, p Providers, gen Generator, opts Options) (*Pipeline, error) {
	m, corpusPath, err := store.Generation(id)
	if err != nil {
		return nil, err
	}
	emb, err := embedderOf(m.Embedder, p)
	if err != nil {
		return nil, fmt.Errorf("generation %s: %w", m.ID, err)
	}
	if opts.Retrieval, err = retrievalOf(m); err != nil {
		return nil, err
	}
	chunksPath, err := store.File(m, chunksFile)
	if err != nil {
		return nil, err
	}
	schema, keys, spans, err := readChunks(chunksPath, m.Files["corpus.json"].Bytes, m.Count)
	if err != nil {
		return nil, err
	}
	bmPath, err := store.File(m, bm25File)
	if err != nil {
		return nil, err
	}
	lex := &bm25{} // owns the mapping of its file
	bb, err := index.MapFile(bmPath, lex)
	if err != nil {
		return nil, err
	}
	decoded, err := decodeBM25(bb)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", index.ErrCorrupt, bmPath, err)
	}
	*lex = *decoded
	idx, err := store.LoadGeneration(m)
	if err != nil {
		return nil, err
	}
	return newPipeline(schema, &storedChunks{path: corpusPath, spans: spans, schema: schema, ids: idx.IDs()}, keys, lex, m.CorpusDigest, idx, m.ID, emb, gen, opts)
}

// retrievalOf is the retrieval generation m records: RetrievalVector when
// it records none, ErrCorrupt for a value this build does not know.
func retrievalOf(m index.Manifest) (string, error) {
	switch m.Retrieval {
	case "":
		return RetrievalVector, nil
	case RetrievalVector, RetrievalHybrid:
		return m.Retrieval, nil
	}
	return "", fmt.Errorf("%w: generation %s records retrieval %q, want %s or %s", index.ErrCorrupt, m.ID, m.Retrieval, RetrievalVector, RetrievalHybrid)
}
