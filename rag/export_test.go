package rag

import "github.com/verdryx/verdryx/index"

// Open loads the active generation of store for corpus c and embedder emb,
// ranking by the retrieval it records (as OpenStored; opts.Retrieval is
// overridden). A generation built from another corpus or embedder is
// refused with index.ErrStale before emb or gen is called.
func Open(store *index.Store, c Corpus, emb index.Embedder, gen Generator, opts Options) (*Pipeline, error) {
	idx, m, err := store.Load(index.Expect{CorpusDigest: c.Digest(), Embedder: index.InfoOf(emb)})
	if err != nil {
		return nil, err
	}
	if opts.Retrieval, err = retrievalOf(m); err != nil {
		return nil, err
	}
	return New(c, idx, m.ID, emb, gen, opts)
}
