package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/cache"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/docs"
)

// indexBuildFlags are the flags of index build.
type indexBuildFlags struct {
	rf           ragFlags
	docs         string
	chunkTokens  int
	chunkOverlap int
	embedBatch   int
	asJSON       bool
	force        bool
}

// maxListedFiles is the most documents index build lists one by one
// (--json lists every one).
const maxListedFiles = 20

func newIndexBuildCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "build",
		Short: "embed a corpus or a folder of documents and publish it as the active index generation",
		Long: "Embed a corpus (--corpus FILE) or a folder of Markdown, HTML and text documents (--docs DIR, chunked by\n" +
			"headings and paragraphs) and publish it as the active index generation. Embeddings are requested in\n" +
			"batches (--embed-batch texts, at most 512 KiB of text each) and cached under <data>/index/cache by text\n" +
			"and embedder, so a rebuild embeds only new or changed texts.\n" +
			"When the active generation was built from the same corpus digest with the same embedder (name, model,\n" +
			"dimensions) and verifies, it is reused and nothing is embedded; --force builds a new generation anyway.",
	}
	fs := cmd.Flags()
	var f indexBuildFlags
	f.rf.register(fs, false)
	fs.StringVar(&f.docs, "docs", "", "folder of .md, .markdown, .txt, .html and .htm documents to chunk and index (instead of --corpus)")
	fs.IntVar(&f.chunkTokens, "chunk-tokens", docs.DefaultChunkTokens, "with --docs: most tokens of a chunk (a token counted as 4 bytes)")
	fs.IntVar(&f.chunkOverlap, "chunk-overlap", docs.DefaultChunkOverlap, "with --docs: most tokens a chunk repeats of the one before it in its section")
	fs.IntVar(&f.embedBatch, "embed-batch", cache.MaxInputs, "most texts per embedding request (1..2048)")
	fs.BoolVar(&f.asJSON, "json", false, "print the generation's manifest as JSON")
	fs.BoolVar(&f.force, "force", false, "build a new generation even when the active one matches the corpus and embedder")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		if len(pos) > 0 {
			return usageErrorf("index build: unexpected argument %q", pos[0])
		}
		f.rf.data = g.data
		if err := f.rf.check(); err != nil {
			return err
		}
		switch {
		case f.rf.corpus == "" && f.docs == "":
			return usageErrorf("index build: --corpus is required (or --docs DIR)")
		case f.rf.corpus != "" && f.docs != "":
			return usageErrorf("index build: give --corpus or --docs, not both")
		case f.embedBatch < 1 || f.embedBatch > cache.MaxInputs:
			return usageErrorf("index build: --embed-batch %d: want 1..%d", f.embedBatch, cache.MaxInputs)
		}
		return runIndexBuild(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &f)
	}
	return cmd
}

// buildSource is what index build embeds: the corpus's id and citation
// schema, its digest and entry count, its entries as a stream, and for
// --docs what was read.
type buildSource struct {
	schema rag.Corpus
	digest string
	count  int
	each   func(fn func(rag.Entry) error) error
	docs   *docs.Result
}

// source reads --corpus, or walks --docs once to name it (its digest and
// chunk count) without holding its chunks; building walks it again.
func (f *indexBuildFlags) source() (buildSource, error) {
	if f.docs != "" {
		w, err := docs.NewWalker(f.docs, docs.Options{ChunkTokens: f.chunkTokens, ChunkOverlap: f.chunkOverlap})
		if err != nil {
			return buildSource{}, inputError(fmt.Errorf("--docs %s: %w", f.docs, err))
		}
		var res docs.Result
		each := func(yield func(rag.Entry) error) error {
			r, err := w.Walk(yield)
			if err != nil {
				return fmt.Errorf("--docs %s: %w", f.docs, err)
			}
			res = r
			return nil
		}
		digest, n, err := rag.DigestEntries(w.Schema(), each)
		if err != nil {
			return buildSource{}, inputError(err)
		}
		return buildSource{schema: w.Schema(), digest: digest, count: n, each: each, docs: &res}, nil
	}
	if err := checkNotEmpty(f.rf.corpus, "--corpus"); err != nil {
		return buildSource{}, err
	}
	file, err := os.ReadFile(f.rf.corpus)
	if err != nil {
		return buildSource{}, inputError(fmt.Errorf("read corpus: %w", err))
	}
	corpus, err := rag.ParseCorpus(file)
	if err != nil {
		return buildSource{}, inputError(fmt.Errorf("%s: %w", f.rf.corpus, err))
	}
	each := func(fn func(rag.Entry) error) error {
		for _, e := range corpus.Entries {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	return buildSource{schema: corpus, digest: corpus.Digest(), count: len(corpus.Entries), each: each}, nil
}

// runIndexBuild reads the source, reuses the active generation when it
// matches, else streams it through the embedder (and, for a provider's
// embedder, the cache) into a new generation.
func runIndexBuild(ctx context.Context, stdout, stderr io.Writer, f *indexBuildFlags) error {
	src, err := f.source()
	if err != nil {
		return err
	}
	emb, err := f.rf.newEmbedder()
	if err != nil {
		return inputError(err)
	}
	store, vc := index.NewStore(f.rf.data, index.StoreOptions{}), cache.New(f.rf.data)
	if err := vc.Preflight(); err != nil { // before paying for embeddings
		return inputError(err)
	}
	removedStale, err := store.RemoveStale() // refuses an unsafe store path first
	if errors.Is(err, index.ErrUnsafePath) {
		return inputError(err)
	}
	if err != nil {
		return err
	}
	stale := staleList(removedStale)
	if !f.asJSON {
		printStale(stdout, stale)
		printDocsRead(stdout, f, src)
	}
	mode := f.rf.retrievalMode(f.docs != "")
	if !f.force {
		m, why, err := store.Reusable(index.Expect{CorpusDigest: src.digest, Embedder: index.InfoOf(emb), Retrieval: mode}, f.rf.dims)
		if err != nil {
			return inputError(err)
		}
		if why == "" {
			if f.asJSON {
				return writeBuildJSON(stdout, m, store, src, cache.Stats{Texts: src.count}, 0, true, stale)
			}
			fmt.Fprintf(stdout, "generation %s reused in %s: same corpus digest and embedder (--force builds a new one)\n", m.ID, store.Dir())
			fmt.Fprintf(stdout, "  rows %d, dims %d, embedder %s/%s\n", m.Count, m.Dims, m.Embedder.Name, m.Embedder.Model)
			fmt.Fprintf(stdout, "  corpus %s %s\n  fingerprint %s\n", src.schema.ID, m.CorpusDigest, m.Fingerprint)
			return nil
		}
	}
	start := time.Now()
	workers := 1 // a paid provider gets one request at a time
	// The offline embedder's vectors are not cached: they cost less to
	// make again than to keep a second copy of (the generation keeps one).
	var c *cache.Cache
	if f.rf.embedder == "offline" {
		workers = runtime.GOMAXPROCS(0)
	} else {
		c = vc
	}
	m, st, err := rag.BuildGeneration(ctx, store, src.schema, emb, rag.BuildOptions{
		Embed:     cache.Options{Cache: c, MaxInputs: f.embedBatch, Workers: workers, Progress: embedProgress(stderr)},
		Total:     src.count,
		Retrieval: mode,
	}, src.each, time.Now())
	if err != nil {
		return f.rf.providerError(err)
	}
	if f.asJSON {
		return writeBuildJSON(stdout, m, store, src, st, time.Since(start), false, stale)
	}
	fmt.Fprintf(stdout, "embedded %d, from cache %d (invalid entries replaced %d), in %d request(s) of at most %d texts and %d bytes\n",
		st.Embedded, st.Cached, st.Rejected, st.Requests, f.embedBatch, cache.DefaultMaxBytes)
	fmt.Fprintf(stdout, "generation %s active in %s\n", m.ID, store.Dir())
	fmt.Fprintf(stdout, "  rows %d, dims %d, embedder %s/%s, retrieval %s, built in %s\n", m.Count, m.Dims, m.Embedder.Name, m.Embedder.Model, m.Retrieval, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(stdout, "  corpus %s %s\n  fingerprint %s\n", src.schema.ID, m.CorpusDigest, m.Fingerprint)
	return nil
}

// printDocsRead prints what --docs read and skipped and how many chunks
// it made; nothing without --docs.
func printDocsRead(w io.Writer, f *indexBuildFlags, src buildSource) {
	res := src.docs
	if res == nil {
		return
	}
	kinds := map[string]int{}
	size := 0
	for _, d := range res.Files {
		kinds[d.Kind]++
		size += d.Bytes
	}
	fmt.Fprintf(w, "read %d document(s), %d bytes, from %s: %d markdown, %d html, %d text\n",
		len(res.Files), size, f.docs, kinds["markdown"], kinds["html"], kinds["text"])
	if len(res.Files) <= maxListedFiles {
		for _, d := range res.Files {
			fmt.Fprintf(w, "  %s: %s, %d bytes, %d chunk(s)\n", d.Source, d.Kind, d.Bytes, d.Chunks)
		}
	}
	fmt.Fprintf(w, "skipped %d path(s)\n", len(res.Skipped))
	for _, s := range res.Skipped {
		fmt.Fprintf(w, "  %s: %s\n", s.Source, s.Reason)
	}
	fmt.Fprintf(w, "chunks %d (--chunk-tokens %d, --chunk-overlap %d)\n", src.count, f.chunkTokens, f.chunkOverlap)
}

// writeBuildJSON prints the manifest with what the build read and did.
func writeBuildJSON(w io.Writer, m index.Manifest, store *index.Store, src buildSource, st cache.Stats, took time.Duration, reused bool, stale []staleDir) error {
	out := struct {
		index.Manifest
		Dir          string         `json:"dir"`
		CorpusID     string         `json:"corpus_id"`
		BuildSeconds float64        `json:"build_seconds"`
		Reused       bool           `json:"reused"`
		Embedding    cache.Stats    `json:"embedding"`
		Documents    []docs.File    `json:"documents,omitempty"`
		Skipped      []docs.Skipped `json:"skipped,omitempty"`
		StaleRemoved []staleDir     `json:"stale_staging_removed"`
	}{Manifest: m, Dir: store.Dir(), CorpusID: src.schema.ID, BuildSeconds: took.Seconds(), Reused: reused, Embedding: st, StaleRemoved: stale}
	if src.docs != nil {
		out.Documents, out.Skipped = src.docs.Files, src.docs.Skipped
	}
	return writeJSON(w, out)
}

// staleDir is a staging directory of an interrupted build that index
// build or gc removed (index.Store.RemoveStale).
type staleDir struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// staleList orders what RemoveStale removed by name (never nil).
func staleList(removed map[string]int64) []staleDir {
	out := []staleDir{}
	for name, n := range removed {
		out = append(out, staleDir{Name: name, Bytes: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// printStale lists the staging directories of interrupted builds that
// index build or gc removed.
func printStale(w io.Writer, stale []staleDir) {
	for _, s := range stale {
		fmt.Fprintf(w, "removed generations/%s (%d bytes): the staging directory of an interrupted build\n", s.Name, s.Bytes)
	}
}

// pruneCache removes the embedding cache entries that no retained
// generation uses: an entry is kept when its key is that of a text of a
// valid generation's recorded corpus under that generation's embedder.
// A generation that cannot be read keeps nothing (the cache only saves
// embedding calls).
func pruneCache(data string) (int, error) {
	store := index.NewStore(data, index.StoreOptions{})
	list, err := store.List()
	if err != nil {
		return 0, err
	}
	keep := map[string]bool{}
	for _, l := range list {
		if l.Err != nil {
			continue
		}
		_, path, err := store.Generation(l.ID)
		if err != nil {
			continue
		}
		c, err := rag.LoadCorpus(path)
		if err != nil {
			continue
		}
		for _, t := range c.SearchTexts() {
			keep[cache.Key(l.Embedder, t)] = true
		}
	}
	return cache.New(data).Prune(keep)
}

// embedProgress returns a progress bar of the texts embedded for
// cache.Options.Progress when stderr is a terminal, else nil.
func embedProgress(stderr io.Writer) func(done, total int) {
	if !isTerminal(stderr) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("embedding"),
				progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
		}
		_ = bar.Set(done)
	}
}
