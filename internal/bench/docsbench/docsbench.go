// Package docsbench measures `index build --docs` on generated Markdown:
// parse and chunk (rag/docs), offline embedding in batches
// (index/cache, no cache), the generation's size on disk and the peak
// RSS.
package docsbench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/cache"
	"github.com/verdryx/verdryx/internal/bench/rss"
	"github.com/verdryx/verdryx/internal/mdgen"
	"github.com/verdryx/verdryx/rag/docs"
)

// Options configure Run.
type Options struct {
	// SizesMB are the folder sizes to generate, in 10^6 bytes.
	SizesMB []int
	// FileKB is the size of each generated document, in 10^3 bytes.
	FileKB int
	// Dims is the offline embedder's dimensions (0: its default).
	Dims int
	// Procs is how many embedding batches run at once.
	Procs int
	// Dir holds the generated folders and data (kept); "" means a
	// temporary directory, removed after.
	Dir string
	// OnStage, when set, is called as each stage starts.
	OnStage func(sizeMB int, stage string)
}

// Size is what one folder size measured.
type Size struct {
	SizeMB        int     `json:"size_mb"`
	Files         int     `json:"files"`
	Bytes         int64   `json:"bytes"`
	Chunks        int     `json:"chunks"`
	ChunkBytes    int64   `json:"chunk_bytes"`
	ParseSeconds  float64 `json:"parse_chunk_seconds"`
	ParseMBps     float64 `json:"parse_chunk_mb_per_s"`
	EmbedSeconds  float64 `json:"embed_seconds"`
	EmbedMBps     float64 `json:"embed_mb_per_s"`
	Requests      int     `json:"embed_requests"`
	SaveSeconds   float64 `json:"save_seconds"`
	IndexBytes    int64   `json:"index_bytes"`
	PeakRSSMiB    float64 `json:"peak_rss_mib"`
	GOMAXPROCS    int     `json:"gomaxprocs"`
	EmbedderModel string  `json:"embedder_model"`
}

// Run generates each size, then reads it into chunks, embeds them and
// saves a generation, timing each stage. MB/s are 10^6 bytes per second:
// parse+chunk over the folder's bytes (reading the files included),
// embedding over the chunk texts' bytes.
func Run(ctx context.Context, o Options) ([]Size, error) {
	if o.FileKB <= 0 || o.Procs <= 0 || len(o.SizesMB) == 0 {
		return nil, fmt.Errorf("docsbench: sizes, file size and procs must be positive")
	}
	root := o.Dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "verdryx-bench-docs-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	stage := func(mb int, s string) {
		if o.OnStage != nil {
			o.OnStage(mb, s)
		}
	}
	var out []Size
	for _, mb := range o.SizesMB {
		if mb <= 0 {
			return nil, fmt.Errorf("docsbench: size %d MB: want positive", mb)
		}
		dir := filepath.Join(root, fmt.Sprintf("docs-%dmb", mb))
		files := max(mb*1000/o.FileKB, 1)
		stage(mb, "generating")
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		n, err := mdgen.Generate(dir, int64(mb)*1e6, files, uint64(mb))
		if err != nil {
			return nil, err
		}
		s, err := measure(ctx, o, mb, dir, filepath.Join(root, fmt.Sprintf("data-%dmb", mb)), stage)
		if err != nil {
			return nil, err
		}
		s.Files, s.Bytes = files, n
		s.ParseMBps = float64(n) / 1e6 / s.ParseSeconds
		out = append(out, s)
	}
	return out, nil
}

func measure(ctx context.Context, o Options, mb int, dir, data string, stage func(int, string)) (Size, error) {
	runtime.GC()
	debug.FreeOSMemory()
	rss.ResetPeak()
	s := Size{SizeMB: mb, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	stage(mb, "parse+chunk")
	t0 := time.Now()
	res, err := docs.Load(dir, docs.DefaultOptions())
	if err != nil {
		return s, err
	}
	s.ParseSeconds = time.Since(t0).Seconds()
	texts := res.Corpus.SearchTexts()
	s.Chunks = len(texts)
	for _, t := range texts {
		s.ChunkBytes += int64(len(t))
	}
	stage(mb, "embedding")
	emb := index.NewHashEmbedder(o.Dims)
	s.EmbedderModel = emb.Model()
	t0 = time.Now()
	vecs, st, err := cache.Embed(ctx, emb, texts, cache.Options{Workers: o.Procs})
	if err != nil {
		return s, err
	}
	s.EmbedSeconds = time.Since(t0).Seconds()
	s.EmbedMBps = float64(s.ChunkBytes) / 1e6 / s.EmbedSeconds
	s.Requests = st.Requests
	stage(mb, "saving")
	t0 = time.Now()
	idx, err := cache.NewIndex(res.Corpus.IDs(), vecs)
	if err != nil {
		return s, err
	}
	store := index.NewStore(data, index.StoreOptions{})
	if _, err := store.Save(idx, index.Corpus{Digest: res.Corpus.Digest(), File: res.JSON}, index.InfoOf(emb), time.Now()); err != nil {
		return s, err
	}
	s.SaveSeconds = time.Since(t0).Seconds()
	s.PeakRSSMiB = float64(rss.Peak()) / (1 << 20)
	err = filepath.WalkDir(store.Dir(), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			s.IndexBytes += fi.Size()
		}
		return err
	})
	return s, err
}
