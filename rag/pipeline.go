package rag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
)

// DefaultTopK is the number of chunks retrieved per question.
const DefaultTopK = 2

// Options tunes a Pipeline.
type Options struct {
	// TopK is the number of chunks retrieved; zero means DefaultTopK.
	TopK int
	// Retrieval is RetrievalVector or RetrievalHybrid; "" means
	// RetrievalVector. OpenStored sets it from the generation.
	Retrieval string
	// Logger receives debug lines (ids and sizes only, never text); nil
	// discards.
	Logger *slog.Logger
}

// Pipeline answers questions over one corpus and one index. It is immutable
// and safe for concurrent use; Ask blocks on the embedder and generator.
// Its BM25 statistics are computed from the corpus when it is built (New)
// and read from the generation when it is stored (OpenStored); either way
// they weigh the extractive generator's focus terms, and with
// RetrievalHybrid they rank too.
type Pipeline struct {
	// corpus is the citation schema; its Entries are empty for a stored
	// generation, whose chunks are read as they are retrieved.
	corpus    Corpus
	chunks    chunkSource
	metaKeys  map[string]bool // every metadata key of some chunk
	retrieval string
	bm25      *bm25
	terms     *termStats
	digest    string
	idx       *index.Index
	// every entry, by row, read on the first filtered ask of a stored
	// generation (a filter reads every chunk's metadata).
	allOnce    sync.Once
	all        []Entry
	allErr     error
	generation string
	emb        index.Embedder
	gen        Generator
	topK       int
	logger     *slog.Logger
}

// chunkSource gives the entry of an index row. Safe for concurrent use.
type chunkSource interface {
	entry(row int) (Entry, error)
}

// memChunks are entries in memory, by row.
type memChunks []Entry

func (m memChunks) entry(row int) (Entry, error) { return m[row], nil }

// New returns a pipeline over an already built index whose ids are exactly
// the corpus ids. generation names the index in records.
func New(c Corpus, idx *index.Index, generation string, emb index.Embedder, gen Generator, opts Options) (*Pipeline, error) {
	if idx.Len() != len(c.Entries) {
		return nil, fmt.Errorf("rag: index has %d rows, corpus %q has %d entries", idx.Len(), c.ID, len(c.Entries))
	}
	byID := make(map[string]Entry, len(c.Entries))
	metaKeys := map[string]bool{}
	for _, e := range c.Entries {
		byID[e.ID] = e
		for k := range e.Metadata {
			metaKeys[k] = true
		}
	}
	ids := idx.IDs()
	rows := make([]Entry, len(ids))
	texts := make([]string, len(ids))
	for r, id := range ids {
		e, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("rag: index row %q is not in corpus %q", id, c.ID)
		}
		rows[r] = e
		texts[r] = searchText(e)
	}
	return newPipeline(c, memChunks(rows), metaKeys, newBM25(texts), c.Digest(), idx, generation, emb, gen, opts)
}

// newPipeline checks opts and assembles a pipeline.
func newPipeline(c Corpus, chunks chunkSource, metaKeys map[string]bool, lex *bm25, digest string, idx *index.Index, generation string, emb index.Embedder, gen Generator, opts Options) (*Pipeline, error) {
	retrieval, err := ResolveRetrieval(opts.Retrieval, false)
	if err != nil {
		return nil, fmt.Errorf("rag: %w", err)
	}
	if lex.n != idx.Len() {
		return nil, fmt.Errorf("rag: BM25 statistics of %d rows for an index of %d", lex.n, idx.Len())
	}
	if opts.TopK == 0 {
		opts.TopK = DefaultTopK
	}
	if opts.TopK < 0 {
		return nil, fmt.Errorf("rag: top-k must be positive, have %d", opts.TopK)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{
		corpus: c, chunks: chunks, metaKeys: metaKeys, retrieval: retrieval, bm25: lex,
		terms:  &termStats{table: lex, n: lex.n},
		digest: digest, idx: idx, generation: generation,
		emb: emb, gen: gen, topK: opts.TopK, logger: opts.Logger.With("component", "rag"),
	}, nil
}

// BuildIndex embeds every corpus entry with emb and returns the in-memory
// index, rows in corpus order.
func BuildIndex(ctx context.Context, c Corpus, emb index.Embedder) (*index.Index, error) {
	vecs, err := emb.Embed(ctx, c.SearchTexts())
	if err != nil {
		return nil, fmt.Errorf("embed corpus %q: %w", c.ID, err)
	}
	if len(vecs) != len(c.Entries) {
		return nil, fmt.Errorf("embed corpus %q: %d vectors for %d entries", c.ID, len(vecs), len(c.Entries))
	}
	return index.New(c.IDs(), vecs)
}

// Build embeds the corpus into an in-memory index and returns the pipeline.
func Build(ctx context.Context, c Corpus, emb index.Embedder, gen Generator, opts Options) (*Pipeline, error) {
	idx, err := BuildIndex(ctx, c, emb)
	if err != nil {
		return nil, err
	}
	return New(c, idx, "memory:"+strings.TrimPrefix(idx.Fingerprint(), "sha256:")[:32], emb, gen, opts)
}

// NewOffline loads the corpus file and builds a pipeline with the offline
// hashing embedder and the extractive generator. It makes no network call.
func NewOffline(ctx context.Context, corpusPath string, opts Options) (*Pipeline, error) {
	c, err := LoadCorpus(corpusPath)
	if err != nil {
		return nil, err
	}
	return Build(ctx, c, hashembed.New(0), NewExtractive(0), opts)
}

// Corpus returns the pipeline's corpus: its id and citation schema, and,
// for a corpus in memory (New, Build), its entries; a stored generation's
// (OpenStored) has none, its chunks being read as they are retrieved.
func (p *Pipeline) Corpus() Corpus { return p.corpus }

// CorpusDigest returns the digest of the corpus the pipeline answers from.
func (p *Pipeline) CorpusDigest() string { return p.digest }

// Embedder names the embedder questions are embedded with, as records
// do ("<name>/<model>").
func (p *Pipeline) Embedder() string { return p.emb.Name() + "/" + p.emb.Model() }

// Describe returns the settings that shape its answers: the retrieval
// mode (RetrievalVector, RetrievalHybrid), the number of chunks an Ask
// retrieves and the generator's name, as records name it.
func (p *Pipeline) Describe() (retrieval string, topK int, generator string) {
	return p.retrieval, p.topK, p.gen.Name()
}

// Generation returns the index generation id answers come from.
func (p *Pipeline) Generation() string { return p.generation }

// contextPayload returns the citation-labelled blocks of chunks joined by a
// blank line.
func (p *Pipeline) contextPayload(chunks []Chunk) string {
	blocks := make([]string, len(chunks))
	for i, c := range chunks {
		blocks[i] = p.corpus.Block(Entry{ID: c.ID, Text: c.Text, Metadata: c.Metadata})
	}
	return strings.Join(blocks, "\n\n")
}

// messages returns the generation messages for question over payload.
func messages(c Corpus, question, payload string) []Message {
	system := "Answer the question using only the context blocks below. " +
		"Cite every block you rely on by its id in square brackets, for example [chunk-id], " +
		"and repeat that block's " + c.SourceField + " exactly as written. " +
		"Keep numbers, units and conditions exactly as the context states them, and never combine facts from different sources. " +
		"If the context does not support an answer, reply with exactly " + Abstention + " and nothing else."
	user := "Context:\n\n" + payload + "\n\nQuestion: " + question
	return []Message{{Role: "system", Content: system}, {Role: "user", Content: user}}
}

// Ask retrieves, builds the prompt, generates and returns the validated
// record. The answer is kept exactly as the generator returned it.
func (p *Pipeline) Ask(ctx context.Context, question string) (Record, error) {
	return p.AskWith(ctx, question, AskOptions{})
}

// AskOptions tune one ask.
type AskOptions struct {
	// TopK is the number of chunks retrieved; 0 means the pipeline's
	// Options.TopK, a negative value is an error.
	TopK int
	// Filter restricts the chunks retrieved (see Filter); an error
	// wrapping ErrFilter when a key is on no chunk or nothing matches.
	Filter Filter
}

// AskWith is Ask with o's top-k and filter.
func (p *Pipeline) AskWith(ctx context.Context, question string, o AskOptions) (Record, error) {
	if strings.TrimSpace(question) == "" {
		return Record{}, errors.New("rag: empty question")
	}
	topK := o.TopK
	if topK == 0 {
		topK = p.topK
	}
	if topK < 0 {
		return Record{}, fmt.Errorf("rag: top-k must be positive, have %d", topK)
	}
	chunks, err := p.retrieve(ctx, question, topK, o.Filter)
	if err != nil {
		return Record{}, err
	}
	rec := Record{
		Question:        question,
		Retrieval:       p.retrieval,
		Filter:          maps.Clone(o.Filter),
		Chunks:          chunks,
		IndexGeneration: p.generation,
		CorpusDigest:    p.digest,
		Embedder:        p.emb.Name() + "/" + p.emb.Model(),
		Generator:       p.gen.Name(),
	}
	for _, c := range chunks {
		rec.RetrievedIDs = append(rec.RetrievedIDs, c.ID)
		rec.Distances = append(rec.Distances, c.Distance)
		rec.Similarities = append(rec.Similarities, c.Similarity)
	}
	rec.ContextPayload = p.contextPayload(chunks)
	rec.Messages = messages(p.corpus, question, rec.ContextPayload)
	p.logger.Debug("retrieved", "ids", rec.RetrievedIDs, "generation", p.generation)
	answer, err := p.gen.Generate(ctx, Request{Question: question, Chunks: chunks, Messages: rec.Messages, SourceField: p.corpus.SourceField, SubjectField: p.corpus.SubjectField, terms: p.termStats()})
	if err != nil {
		return Record{}, fmt.Errorf("generate: %w", err)
	}
	rec.Answer = answer
	if err := rec.Validate(); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// termStats returns the corpus's term statistics.
func (p *Pipeline) termStats() *termStats { return p.terms }

// allEntries returns every entry by row, read once.
func (p *Pipeline) allEntries() ([]Entry, error) {
	if m, ok := p.chunks.(memChunks); ok {
		return m, nil
	}
	p.allOnce.Do(func() {
		all := make([]Entry, p.idx.Len())
		for r := range all {
			if all[r], p.allErr = p.chunks.entry(r); p.allErr != nil {
				p.allErr = fmt.Errorf("generation %s: %w", p.generation, p.allErr)
				return
			}
		}
		p.all = all
	})
	return p.all, p.allErr
}
