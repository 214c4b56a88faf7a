package rag

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
)

// saveStored builds corpus c with the offline embedder and retrieval as
// the active generation of a new store and opens it.
func saveStored(t *testing.T, c Corpus, _ []byte, retrieval string) (*Pipeline, *index.Store, index.Manifest) {
	t.Helper()
	emb := hashembed.New(0)
	store := index.NewStore(t.TempDir(), index.StoreOptions{})
	m, _, err := BuildGeneration(context.Background(), store, c, emb, BuildOptions{Retrieval: retrieval}, entriesOf(c), time.Now())
	require.NoError(t, err)
	p, err := OpenStored(store, "active", Providers{}, NewExtractive(0), Options{})
	require.NoError(t, err)
	return p, store, m
}

// TestStoredPipelineAnswersAsInMemory: a stored generation, which reads
// its chunks where they lie and its BM25 statistics from disk, answers
// every question (retrieved chunks, scores, prompt, answer) exactly as a
// pipeline holding the same corpus and rows in memory, with and without a
// filter, under both retrievals.
func TestStoredPipelineAnswersAsInMemory(t *testing.T) {
	file, err := os.ReadFile("testdata/retrieval/corpus.json")
	require.NoError(t, err)
	c, err := ParseCorpus(file)
	require.NoError(t, err)
	_, qs := loadRetrievalFixture(t)
	var questions []string
	for _, q := range qs.Answerable {
		questions = append(questions, q.Question)
	}
	questions = append(questions, qs.Unanswerable...)
	for _, mode := range []string{RetrievalVector, RetrievalHybrid} {
		stored, store, _ := saveStored(t, c, file, mode)
		require.Empty(t, stored.Corpus().Entries, "a stored pipeline holds no corpus")
		idx, _, err := store.Load(index.Expect{CorpusDigest: c.Digest(), Embedder: index.InfoOf(hashembed.New(0))})
		require.NoError(t, err)
		mem, err := New(c, idx, stored.Generation(), hashembed.New(0), NewExtractive(0), Options{Retrieval: mode})
		require.NoError(t, err)
		source := c.Entries[0].Metadata[c.SourceField]
		for _, q := range questions {
			for _, o := range []AskOptions{{TopK: 3}, {TopK: 2, Filter: Filter{c.SourceField: source.(string)}}} {
				want, werr := mem.AskWith(context.Background(), q, o)
				got, gerr := stored.AskWith(context.Background(), q, o)
				if werr != nil {
					require.EqualError(t, gerr, werr.Error(), "%s %q", mode, q)
					continue
				}
				require.NoError(t, gerr, "%s %q", mode, q)
				require.Equal(t, want, got, "%s %q %v", mode, q, o.Filter)
			}
		}
	}
}

// TestStoredChunkDamageIsNamed: a chunk whose bytes no longer decode, or
// name another id than its row, is refused when it is read, naming the
// file and the entry; nothing is read before (opening reads no chunk).
func TestStoredChunkDamageIsNamed(t *testing.T) {
	file, err := os.ReadFile("testdata/retrieval/corpus.json")
	require.NoError(t, err)
	c, err := ParseCorpus(file)
	require.NoError(t, err)
	_, store, m := saveStored(t, c, file, RetrievalHybrid)
	path := filepath.Join(store.Dir(), "generations", m.ID, "corpus.json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o644))
	_, _, spans, err := readChunks(filepath.Join(store.Dir(), "generations", m.ID, chunksFile), int64(len(b)), m.Count)
	require.NoError(t, err)
	for r, sp := range spans { // every id becomes another of the same length
		e := b[sp.off : sp.off+int64(sp.n)]
		i := strings.Index(string(e), `"id":"`)
		require.GreaterOrEqual(t, i, 0, "entry %d: %s", r, e)
		e[i+len(`"id":"`)] = 'Z'
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
	p, err := OpenStored(store, "active", Providers{}, NewExtractive(0), Options{})
	require.NoError(t, err, "opening reads no chunk")
	_, err = p.Ask(context.Background(), "How many parking spaces are there?")
	require.ErrorIs(t, err, index.ErrCorrupt)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "index row")
	_, err = store.Verify("active")
	require.ErrorIs(t, err, index.ErrCorrupt, "verify reads it all")
}

// TestCopiesDoNotCrowdTheTopK: chunks with the same text (one file copied
// into two folders) take one place in the top k, the copies named on it,
// in memory and stored, under both retrievals.
func TestCopiesDoNotCrowdTheTopK(t *testing.T) {
	entry := func(id, text, source string) map[string]any {
		return map[string]any{"id": id, "text": text, "source": source}
	}
	lease := "Each grant carries a fencing token that only grows, checked by every writer before it writes."
	entries := []map[string]any{
		entry("a", lease, "locks.md"),
		entry("b", lease, "v1/locks.md"),
		entry("c", lease, "v2/locks.md"),
		entry("d", "Writers hold a grant for a number of seconds and renew the grant before it runs out.", "grants.md"),
		entry("e", "Snapshots are written to the bucket every hour and kept for a week.", "backups.md"),
	}
	file, err := json.Marshal(map[string]any{"id": "copies", "label_fields": []string{"source"}, "source_field": "source", "entries": entries})
	require.NoError(t, err)
	c, err := ParseCorpus(file)
	require.NoError(t, err)
	for _, mode := range []string{RetrievalVector, RetrievalHybrid} {
		stored, _, _ := saveStored(t, c, file, mode)
		mem, err := Build(context.Background(), c, hashembed.New(0), NewExtractive(0), Options{Retrieval: mode})
		require.NoError(t, err)
		for name, p := range map[string]*Pipeline{"stored": stored, "memory": mem} {
			rec, err := p.AskWith(context.Background(), "What does every writer check in a grant's fencing token?", AskOptions{TopK: 2})
			require.NoError(t, err)
			require.Len(t, rec.Chunks, 2, "%s %s", mode, name)
			require.Equal(t, "a", rec.Chunks[0].ID, "%s %s", mode, name)
			require.Equal(t, []string{"b", "c"}, rec.Chunks[0].Duplicates, "%s %s", mode, name)
			require.Equal(t, "d", rec.Chunks[1].ID, "%s %s: the next distinct text, not a copy", mode, name)
			require.Empty(t, rec.Chunks[1].Duplicates)
		}
	}
}

// TestBM25EncodingRefusesDamage: every truncation of an encoding is an
// error or a consistent prefix, never a panic, and a ranking over it
// fails or ranks; weights match the counting of newTermStats.
func TestBM25EncodingRefusesDamage(t *testing.T) {
	c, _ := loadRetrievalFixture(t)
	texts := c.SearchTexts()
	enc := encodeBM25(texts)
	for n := range len(enc) {
		b, err := decodeBM25(enc[:n])
		if err == nil {
			_, _ = b.rankErr("parking spaces office", nil, 10)
		}
	}
	b, err := decodeBM25(enc)
	require.NoError(t, err)
	bad := append([]byte(nil), enc...)
	bad[len(bad)-1] = 0xff // an unterminated varint in the last postings
	db, err := decodeBM25(bad)
	require.NoError(t, err)
	last := db.count() - 1
	require.Error(t, db.postings(last, func(int, float64) {}))

	counted := newTermStats(texts)
	table := &termStats{table: b, n: b.n}
	for _, q := range append(texts[:5:5], "parking spaces", "how many vacation days", "installation", "instal", "zz", "configuring") {
		for _, w := range termsOf(q) {
			for _, t2 := range []string{w, w[:max(len(w)-2, 1)], w + "ing"} {
				require.InDelta(t, counted.weight(t2), table.weight(t2), 1e-12, "weight of %q", t2)
				require.False(t, math.IsNaN(table.weight(t2)))
			}
		}
	}
}

// TestDigesterIsCorpusDigest: the digest streamed entry by entry is
// Corpus.Digest, for corpora with and without a subject field and units,
// and any change to an entry changes it.
func TestDigesterIsCorpusDigest(t *testing.T) {
	paths, err := filepath.Glob("testdata/*/corpus.json")
	require.NoError(t, err)
	paths = append(paths, "../testdata/grimoire/corpus.json")
	units := 0
	for _, p := range paths {
		c, err := LoadCorpus(p)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err, p)
		if len(c.Units) > 0 {
			units++
		}
		got, n, err := DigestEntries(c, entriesOf(c))
		require.NoError(t, err)
		require.Equal(t, len(c.Entries), n)
		require.Equal(t, c.Digest(), got, p)
	}
	c, err := ParseCorpus([]byte(`{"id":"u","label_fields":["source"],"source_field":"source","subject_field":"topic","units":{"pint":["pt"]},"entries":[` +
		`{"id":"a","text":"two pints","source":"a.md","topic":"milk","n":2.5,"m":3,"tags":["x",1]}]}`))
	require.NoError(t, err)
	before, _, err := DigestEntries(c, entriesOf(c))
	require.NoError(t, err)
	require.Equal(t, c.Digest(), before)
	c.Entries[0].Metadata["n"] = 2.25
	after, _, err := DigestEntries(c, entriesOf(c))
	require.NoError(t, err)
	require.Equal(t, c.Digest(), after)
	require.NotEqual(t, before, after)
}

// entriesOf yields the entries of c, as BuildGeneration and DigestEntries
// take them.
func entriesOf(c Corpus) func(func(Entry) error) error {
	return func(yield func(Entry) error) error {
		for _, e := range c.Entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}
}

// otherMagics returns good with the magic (its first len(magic) bytes,
// the version at byte at) changed: each other byte changed in turn, and
// the version set to every other value; each with the format it names.
func otherMagics(good []byte, magic string, at int) (bad [][]byte, versions [][]byte) {
	for i := range len(magic) {
		for _, c := range []byte{'A', 'z', 0, 0xff} {
			if i == at || good[i] == c {
				continue
			}
			b := append([]byte(nil), good...)
			b[i] = c
			bad = append(bad, b)
		}
	}
	for v := range 256 {
		if byte(v) == magic[at] {
			continue
		}
		b := append([]byte(nil), good...)
		b[at] = byte(v)
		versions = append(versions, b)
	}
	return bad, versions
}

// TestChunkIndexRefusesOtherMagicsAndVersions: a chunks.idx under another
// magic than "VXCHNK1\n", or of another version than 1, is refused
// naming the format found and the one this build reads.
func TestChunkIndexRefusesOtherMagicsAndVersions(t *testing.T) {
	var buf strings.Builder
	require.NoError(t, writeChunks(&buf, Corpus{ID: "c", LabelFields: []string{"source"}, SourceField: "source"}, []string{"source"},
		[]span{{off: 1, n: 10}, {off: 12, n: 8}}))
	good := []byte(buf.String())
	path := filepath.Join(t.TempDir(), chunksFile)
	read := func(b []byte) error {
		require.NoError(t, os.WriteFile(path, b, 0o644))
		_, _, _, err := readChunks(path, 20, 2)
		return err
	}
	require.NoError(t, read(good))
	bad, versions := otherMagics(good, chunksMagic, len("VXCHNK"))
	for _, b := range append(bad, versions...) {
		err := read(b)
		require.ErrorIs(t, err, index.ErrCorrupt)
		require.ErrorContains(t, err, fmt.Sprintf(`format %q, this build reads "VXCHNK1\n"`, b[:len(chunksMagic)]))
	}
	require.ErrorContains(t, read(good[:3]), `format "VXC", this build reads`)
}

// TestBM25RefusesOtherMagicsAndVersions: BM25 statistics under another
// magic than "VXBM25\x01\n", or of another version than 1, are refused
// naming the format found and the one this build reads.
func TestBM25RefusesOtherMagicsAndVersions(t *testing.T) {
	good := encodeBM25([]string{"two pints of milk", "a pint"})
	_, err := decodeBM25(good)
	require.NoError(t, err)
	bad, versions := otherMagics(good, bm25Magic, len("VXBM25"))
	for _, b := range append(bad, versions...) {
		_, err := decodeBM25(b)
		require.ErrorIs(t, err, errBM25)
		require.ErrorContains(t, err, fmt.Sprintf(`format %q, this build reads "VXBM25\x01\n"`, b[:len(bm25Magic)]))
	}
}
