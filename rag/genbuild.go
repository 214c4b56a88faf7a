package rag

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/cache"
)

// DigestEntries returns the Corpus.Digest of the corpus of schema's id and
// citation schema (its entries ignored) holding the entries each yields
// in order to its argument (stopping at the first error that returns),
// and their count, without holding them: a corpus is named as it streams.
func DigestEntries(schema Corpus, each func(yield func(Entry) error) error) (string, int, error) {
	d := newDigester(schema)
	if err := each(d.add); err != nil {
		return "", 0, err
	}
	return d.sum(), d.n, nil
}

// digester computes Corpus.Digest entry by entry: add each entry in
// order, then sum. Not safe for concurrent use.
type digester struct {
	h hash.Hash
	n int
}

// newDigester starts the digest of a corpus with schema's citation schema
// (its entries are ignored).
func newDigester(schema Corpus) *digester {
	d := &digester{h: sha256.New()}
	// The struct Corpus.Digest marshals, written a member at a time.
	js := func(v any) []byte {
		b, _ := json.Marshal(v) // strings, string slices and maps of them encode
		return b
	}
	d.h.Write([]byte(`{"label_fields":`))
	d.h.Write(js(schema.LabelFields))
	d.h.Write([]byte(`,"source_field":`))
	d.h.Write(js(schema.SourceField))
	d.h.Write([]byte(`,"subject_field":`))
	d.h.Write(js(schema.SubjectField))
	if len(schema.Units) > 0 {
		d.h.Write([]byte(`,"units":`))
		d.h.Write(js(schema.Units))
	}
	d.h.Write([]byte(`,"entries":[`))
	return d
}

// add adds the next entry.
func (d *digester) add(e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("rag: digest entry %q: %w", e.ID, err)
	}
	if d.n > 0 {
		d.h.Write([]byte{','})
	}
	d.h.Write(b)
	d.n++
	return nil
}

// sum returns the digest of the entries added: Corpus.Digest of the
// corpus holding them. A corpus has entries; with none added, sum is that
// of an empty entries array (Digest would say null).
func (d *digester) sum() string {
	d.h.Write([]byte("]}"))
	return "sha256:" + hex.EncodeToString(d.h.Sum(nil))
}

// bm25Acc counts the BM25 statistics of texts added one at a time, each a
// row, keeping each term's postings already encoded (a few bytes each).
type bm25Acc struct {
	terms  map[string]*termAcc
	lens   []uint32
	total  float64
	counts map[string]uint32
}

// termAcc is one term's postings so far: uvarint row delta, uvarint count.
type termAcc struct {
	df   uint32
	last uint32
	post []byte
}

func newBM25Acc() *bm25Acc {
	return &bm25Acc{terms: map[string]*termAcc{}, counts: map[string]uint32{}}
}

// add counts the next row's text.
func (a *bm25Acc) add(text string) {
	row := uint32(len(a.lens))
	clear(a.counts)
	terms := termsOf(text)
	a.lens = append(a.lens, uint32(len(terms)))
	a.total += float64(len(terms))
	for _, w := range terms {
		a.counts[w]++
	}
	for w, c := range a.counts {
		t := a.terms[w]
		if t == nil {
			t = &termAcc{}
			a.terms[w] = t
		}
		t.post = binary.AppendUvarint(t.post, uint64(row-t.last))
		t.post = binary.AppendUvarint(t.post, uint64(c))
		t.df++
		t.last = row
	}
}

// encode writes the statistics in the bm25Magic encoding.
func (a *bm25Acc) encode(w io.Writer) error {
	words := make([]string, 0, len(a.terms))
	for t := range a.terms {
		words = append(words, t)
	}
	sort.Strings(words)
	avg := 0.0
	if len(a.lens) > 0 {
		avg = a.total / float64(len(a.lens))
	}
	var out []byte
	put32 := func(v uint32) { out = binary.LittleEndian.AppendUint32(out, v) }
	flush := func() error {
		_, err := w.Write(out)
		out = out[:0]
		return err
	}
	out = append(out, bm25Magic...)
	put32(uint32(len(a.lens)))
	out = binary.LittleEndian.AppendUint64(out, math.Float64bits(avg))
	for _, l := range a.lens {
		put32(l)
	}
	put32(uint32(len(words)))
	off := 0
	for _, t := range words {
		put32(uint32(off))
		off += len(t)
	}
	put32(uint32(off))
	if err := flush(); err != nil {
		return err
	}
	for _, t := range words {
		out = append(out, t...)
	}
	for _, t := range words {
		put32(a.terms[t].df)
	}
	var poff uint64
	for _, t := range words {
		out = binary.LittleEndian.AppendUint64(out, poff)
		poff += uint64(len(a.terms[t].post))
	}
	out = binary.LittleEndian.AppendUint64(out, poff)
	if err := flush(); err != nil {
		return err
	}
	for _, t := range words {
		if _, err := w.Write(a.terms[t].post); err != nil {
			return err
		}
	}
	return nil
}

// BuildOptions configure BuildGeneration.
type BuildOptions struct {
	// Embed batches the embedding calls (cache.Embed's options; a nil
	// Cache embeds every text). Its Progress counts entries embedded out
	// of Total.
	Embed cache.Options
	// Total is how many entries will be added, for Progress (0: unknown,
	// counted as added).
	Total int
	// Retrieval is the generation's retrieval mode (ResolveRetrieval).
	Retrieval string
}

// generationBuilder streams a corpus into a new generation of an index
// store: each entry is written to the generation's corpus.json as it is
// added, its search text counted for BM25 and queued for embedding, and
// every cache.Window texts are embedded and their rows written; so memory
// holds one window of texts and vectors, the ids, the row scales and the
// BM25 postings (a few bytes each), never the corpus or the matrix. Commit
// finishes the files and activates the generation (index.Writer.Commit).
// Not safe for concurrent use.
type generationBuilder struct {
	ctx    context.Context
	store  *index.Store
	schema Corpus
	emb    index.Embedder
	o      BuildOptions
	w      *index.Writer
	corpus io.Writer    // corpus.json once w exists
	early  bytes.Buffer // corpus.json until w exists (dims not yet known)
	head   []byte       // the bytes corpus.json opens with
	off    int64
	spans  []span
	digest *digester
	lex    *bm25Acc
	keys   map[string]bool
	ids    []string
	texts  []string
	stats  cache.Stats
	added  int
	err    error
}

// newGenerationBuilder starts a generation of store for a corpus of
// schema's id and citation schema (its entries are ignored), embedded with
// emb. The staging directory is made at the first add (abort removes it).
func newGenerationBuilder(ctx context.Context, store *index.Store, schema Corpus, emb index.Embedder, o BuildOptions) *generationBuilder {
	schema.Entries = nil
	head, _ := json.Marshal(struct { // strings, string slices and maps of them encode
		ID           string              `json:"id"`
		LabelFields  []string            `json:"label_fields"`
		SourceField  string              `json:"source_field"`
		SubjectField string              `json:"subject_field,omitempty"`
		Units        map[string][]string `json:"units,omitempty"`
	}{schema.ID, schema.LabelFields, schema.SourceField, schema.SubjectField, schema.Units})
	head = append(head[:len(head)-1], `,"entries":[`...)
	return &generationBuilder{ctx: ctx, store: store, schema: schema, emb: emb, o: o, digest: newDigester(schema), lex: newBM25Acc(),
		keys: map[string]bool{}, head: head, off: int64(len(head))}
}

// add adds the next entry (valid, as ParseCorpus gives them; ids unique).
func (b *generationBuilder) add(e Entry) error {
	if b.err != nil {
		return b.err
	}
	if err := b.write1(e); err != nil {
		b.err = err
		return err
	}
	return nil
}

func (b *generationBuilder) write1(e Entry) error {
	if len(b.ids) == 0 {
		if len(b.schema.LabelFields) == 0 || !slices.Contains(b.schema.LabelFields, b.schema.SourceField) {
			return fmt.Errorf("rag: corpus %q: source field %q is not one of label fields %v", b.schema.ID, b.schema.SourceField, b.schema.LabelFields)
		}
		if d, ok := b.emb.(interface{ Dims() int }); ok && d.Dims() > 0 {
			if err := b.open(d.Dims()); err != nil {
				return err
			}
		}
	}
	obj := make(map[string]any, len(e.Metadata)+2)
	for k, v := range e.Metadata {
		obj[k] = v
	}
	obj["id"], obj["text"] = e.ID, e.Text
	eb, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("rag: encode entry %q: %w", e.ID, err)
	}
	sep := ",\n"
	if len(b.spans) == 0 {
		sep = "\n"
	}
	if err := b.write(append([]byte(sep), eb...)); err != nil {
		return err
	}
	b.spans = append(b.spans, span{off: b.off + int64(len(sep)), n: uint32(len(eb))})
	b.off += int64(len(sep) + len(eb))
	if err := b.digest.add(e); err != nil {
		return err
	}
	for k := range e.Metadata {
		b.keys[k] = true
	}
	t := searchText(e)
	b.lex.add(t)
	b.ids = append(b.ids, e.ID)
	b.texts = append(b.texts, t)
	if len(b.texts) >= cache.Window {
		return b.flush()
	}
	return nil
}

// write appends p to corpus.json (held back until the writer exists).
func (b *generationBuilder) write(p []byte) error {
	if b.corpus == nil {
		b.early.Write(p)
		return nil
	}
	if _, err := b.corpus.Write(p); err != nil {
		return fmt.Errorf("write corpus: %w", err)
	}
	return nil
}

// open makes the writer for rows of dims and starts corpus.json with what
// was held back.
func (b *generationBuilder) open(dims int) error {
	w, err := b.store.NewWriter(dims)
	if err != nil {
		return err
	}
	c, err := w.Create("corpus.json")
	if err != nil {
		w.Abort()
		return err
	}
	if _, err := c.Write(b.head); err != nil {
		w.Abort()
		return fmt.Errorf("write corpus: %w", err)
	}
	if _, err := c.Write(b.early.Bytes()); err != nil {
		w.Abort()
		return fmt.Errorf("write corpus: %w", err)
	}
	b.early = bytes.Buffer{}
	b.w, b.corpus = w, c
	return nil
}

// flush embeds the queued texts and writes their rows.
func (b *generationBuilder) flush() error {
	if len(b.texts) == 0 {
		return nil
	}
	o := b.o.Embed
	total := max(b.o.Total, b.added+len(b.texts))
	if p := b.o.Embed.Progress; p != nil {
		base := b.added
		o.Progress = func(done, _ int) { p(base+done, total) }
	}
	vecs, st, err := cache.Embed(b.ctx, b.emb, b.texts, o)
	b.stats.Texts += st.Texts
	b.stats.Cached += st.Cached
	b.stats.Embedded += st.Embedded
	b.stats.Requests += st.Requests
	b.stats.Rejected += st.Rejected
	if err != nil {
		return fmt.Errorf("embed corpus %q: %w", b.schema.ID, err)
	}
	if b.w == nil {
		if err := b.open(len(vecs[0])); err != nil {
			return err
		}
	}
	for i, v := range vecs {
		if err := b.w.Add(b.ids[b.added+i], v); err != nil {
			return fmt.Errorf("embed corpus %q: %w", b.schema.ID, err)
		}
	}
	b.added += len(b.texts)
	if p := b.o.Embed.Progress; p != nil {
		p(b.added, total)
	}
	b.texts = b.texts[:0]
	return nil
}

// abort removes what the builder wrote. It is a no-op after commit.
func (b *generationBuilder) abort() {
	if b.w != nil {
		b.w.Abort()
	}
}

// commit embeds what is queued, writes the chunk index and the BM25
// statistics, and commits the generation, returning its manifest and what
// embedding did. The builder is done either way.
func (b *generationBuilder) commit(now time.Time) (index.Manifest, cache.Stats, error) {
	defer b.abort()
	if b.err != nil {
		return index.Manifest{}, b.stats, b.err
	}
	if len(b.ids) == 0 {
		return index.Manifest{}, b.stats, fmt.Errorf("rag: corpus %q has no entries", b.schema.ID)
	}
	if err := b.flush(); err != nil {
		return index.Manifest{}, b.stats, err
	}
	if _, err := io.WriteString(b.corpus, "\n]}\n"); err != nil {
		return index.Manifest{}, b.stats, fmt.Errorf("write corpus: %w", err)
	}
	keys := make([]string, 0, len(b.keys))
	for k := range b.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ci, err := b.w.Create(chunksFile)
	if err != nil {
		return index.Manifest{}, b.stats, err
	}
	if err := writeChunks(ci, b.schema, keys, b.spans); err != nil {
		return index.Manifest{}, b.stats, err
	}
	bw, err := b.w.Create(bm25File)
	if err != nil {
		return index.Manifest{}, b.stats, err
	}
	if err := b.lex.encode(bw); err != nil {
		return index.Manifest{}, b.stats, fmt.Errorf("write %s: %w", bm25File, err)
	}
	m, err := b.w.Commit(b.digest.sum(), b.o.Retrieval, index.InfoOf(b.emb), now)
	return m, b.stats, err
}

// writeChunks writes a chunksFile.
func writeChunks(w io.Writer, schema Corpus, keys []string, spans []span) error {
	hdr, err := json.Marshal(chunksHeader{ID: schema.ID, LabelFields: schema.LabelFields, SourceField: schema.SourceField,
		SubjectField: schema.SubjectField, Units: schema.Units, MetaKeys: keys})
	if err != nil {
		return fmt.Errorf("rag: encode chunk index: %w", err)
	}
	out := []byte(chunksMagic)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(hdr)))
	out = append(out, hdr...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(spans)))
	for _, s := range spans {
		out = binary.LittleEndian.AppendUint64(out, uint64(s.off))
		out = binary.LittleEndian.AppendUint32(out, s.n)
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("write %s: %w", chunksFile, err)
	}
	return nil
}

// BuildGeneration streams the entries each yields (of a corpus of
// schema's id and citation schema; its entries ignored) into a new
// generation of store, embedded with emb, and activates it: each entry is
// written to the generation's corpus.json as it comes, its search text
// counted for BM25 and queued, and every cache.Window texts are embedded
// and their rows written; so memory holds one window of texts and
// vectors, the ids, the row scales and the BM25 postings (a few bytes
// each), never the corpus or the matrix. On any error nothing is
// activated and the staging directory is removed.
func BuildGeneration(ctx context.Context, store *index.Store, schema Corpus, emb index.Embedder, o BuildOptions, each func(yield func(Entry) error) error, now time.Time) (index.Manifest, cache.Stats, error) {
	b := newGenerationBuilder(ctx, store, schema, emb, o)
	defer b.abort()
	if err := each(b.add); err != nil {
		return index.Manifest{}, b.stats, err
	}
	return b.commit(now)
}
