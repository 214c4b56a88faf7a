package grading

import (
	"context"
	"fmt"
	"os"

	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/rag"
)

// StoredRAG returns the evalrun.Deps.RAG builder that answers a set's rag
// cases from generation id ("active" or a generation id) of st, through
// rag.OpenStored: the embedder that built it (reached with p), its stored
// vectors, only the questions embedded. The extractive generator answers
// for the stub model, the model itself for any other. The set's corpus,
// read with read (nil: os.ReadFile), must be the one the generation was
// built from (else index.ErrStale). It makes no network call; every error
// wraps ErrBadRequest, since it will fail the same way every time.
func StoredRAG(st *index.Store, id string, p rag.Providers, read ReadFileFunc) func(ctx context.Context, corpusPath string, model llm.Model) (RAGAsker, error) {
	if read == nil {
		read = os.ReadFile
	}
	return func(_ context.Context, corpusPath string, model llm.Model) (RAGAsker, error) {
		var gen rag.Generator = rag.NewExtractive(0)
		if model != nil && model.ID() != llm.StubID {
			gen = modelGenerator{model}
		}
		pipe, err := rag.OpenStored(st, id, p, gen, rag.Options{})
		if err != nil {
			return nil, fmt.Errorf("%w: index %s: %w", ErrBadRequest, id, err)
		}
		c, err := loadCorpusWith(read, corpusPath)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		if c.Digest() != pipe.CorpusDigest() {
			return nil, fmt.Errorf("%w: index %s: %w: generation %s was built from corpus %s, the eval set's corpus %s is %s",
				ErrBadRequest, id, index.ErrStale, pipe.Generation(), pipe.CorpusDigest(), corpusPath, c.Digest())
		}
		return pipe, nil
	}
}
