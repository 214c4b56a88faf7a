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
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/verdryx/verdryx/bench/rss"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/cache"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/internal/mdgen"
	"github.com/verdryx/verdryx/rag"
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
	// Asks is how many cold asks to time per size (0: none), each in a new
	// process through Ask, beside a `grep -rl` of one of its words over
	// the same folder.
	Asks int
	// Ask runs one cold ask of question over the generation under data,
	// in a process of its own, and returns when it has answered.
	Ask func(ctx context.Context, data, question string) error
}

// Size is what one folder size measured.
type Size struct {
	SizeMB       int     `json:"size_mb"`
	Files        int     `json:"files"`
	Bytes        int64   `json:"bytes"`
	Chunks       int     `json:"chunks"`
	ChunkBytes   int64   `json:"chunk_bytes"`
	ParseSeconds float64 `json:"parse_chunk_seconds"`
	ParseMBps    float64 `json:"parse_chunk_mb_per_s"`
	// BuildSeconds is the streaming build: the folder walked and chunked
	// again, embedded in batches, written, verified and activated;
	// BuildMBps is over the chunk texts' bytes.
	BuildSeconds  float64 `json:"build_seconds"`
	BuildMBps     float64 `json:"build_mb_per_s"`
	Requests      int     `json:"embed_requests"`
	IndexBytes    int64   `json:"index_bytes"`
	PeakRSSMiB    float64 `json:"peak_rss_mib"`
	GOMAXPROCS    int     `json:"gomaxprocs"`
	EmbedderModel string  `json:"embedder_model"`
	// DiskRatio is IndexBytes over the folder's bytes.
	DiskRatio float64 `json:"disk_ratio"`
	// Cold asks (Options.Asks): the median wall time of an ask in a new
	// process, of `grep -rl` of one question word over the folder, their
	// ratio, and the median time to open the generation in a running
	// process (what a worker's start adds to its process's).
	AskMedianMS  float64 `json:"ask_median_ms,omitempty"`
	GrepMedianMS float64 `json:"grep_median_ms,omitempty"`
	AskOverGrep  float64 `json:"ask_over_grep,omitempty"`
	OpenMedianMS float64 `json:"open_median_ms,omitempty"`
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
		s.DiskRatio = float64(s.IndexBytes) / float64(n)
		if o.Asks > 0 {
			stage(mb, "cold asks")
			if err := coldAsks(ctx, o, dir, filepath.Join(root, fmt.Sprintf("data-%dmb", mb)), &s); err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func measure(ctx context.Context, o Options, mb int, dir, data string, stage func(int, string)) (Size, error) {
	runtime.GC()
	debug.FreeOSMemory()
	rss.ResetPeak()
	s := Size{SizeMB: mb, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	// As index build --docs does: a walk that names the folder (its
	// digest and chunk count), then a walk that streams it into the
	// generation through the embedder.
	stage(mb, "parse+chunk")
	t0 := time.Now()
	w, err := docs.NewWalker(dir, docs.DefaultOptions())
	if err != nil {
		return s, err
	}
	walk := func(yield func(rag.Entry) error) error {
		_, err := w.Walk(yield)
		return err
	}
	if _, _, err := rag.DigestEntries(w.Schema(), func(yield func(rag.Entry) error) error {
		return walk(func(e rag.Entry) error {
			s.Chunks++
			s.ChunkBytes += int64(len(e.Text))
			return yield(e)
		})
	}); err != nil {
		return s, err
	}
	s.ParseSeconds = time.Since(t0).Seconds()
	stage(mb, "building")
	emb := hashembed.New(o.Dims)
	s.EmbedderModel = emb.Model()
	t0 = time.Now()
	_, st, err := rag.BuildGeneration(ctx, index.NewStore(data, index.StoreOptions{}), w.Schema(), emb, rag.BuildOptions{
		Embed: cache.Options{Workers: o.Procs}, Total: s.Chunks, Retrieval: rag.DefaultRetrievalForDocs}, walk, time.Now())
	if err != nil {
		return s, err
	}
	s.BuildSeconds = time.Since(t0).Seconds()
	s.BuildMBps = float64(s.ChunkBytes) / 1e6 / s.BuildSeconds
	s.Requests = st.Requests
	store := index.NewStore(data, index.StoreOptions{})
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

// coldAsks times o.Asks asks, each in a new process, against grep -rl of
// one of the question's words, and opening the generation in process.
func coldAsks(ctx context.Context, o Options, dir, data string, s *Size) error {
	store := index.NewStore(data, index.StoreOptions{})
	p, err := rag.OpenStored(store, "active", rag.Providers{}, rag.NewExtractive(0), rag.Options{})
	if err != nil {
		return err
	}
	_ = p
	m, corpusPath, err := store.Generation("active")
	if err != nil {
		return err
	}
	c, err := rag.LoadCorpus(corpusPath)
	if err != nil {
		return err
	}
	var asks, greps, opens []float64
	for i := range o.Asks {
		e := c.Entries[(i*7919+m.Count/3)%len(c.Entries)]
		words := questionWords(e.Text)
		if len(words) < 2 {
			continue
		}
		q := fmt.Sprintf("What does the documentation say about %s and %s?", words[0], words[1])
		t0 := time.Now()
		if err := o.Ask(ctx, data, q); err != nil {
			return fmt.Errorf("cold ask %q: %w", q, err)
		}
		asks = append(asks, ms(time.Since(t0)))
		t0 = time.Now()
		out, err := exec.CommandContext(ctx, "grep", "-rl", words[0], dir).Output()
		if err != nil || len(out) == 0 {
			return fmt.Errorf("grep -rl %s: %v (%d bytes out)", words[0], err, len(out))
		}
		greps = append(greps, ms(time.Since(t0)))
		t0 = time.Now()
		if _, err := rag.OpenStored(store, "active", rag.Providers{}, rag.NewExtractive(0), rag.Options{}); err != nil {
			return err
		}
		opens = append(opens, ms(time.Since(t0)))
	}
	if len(asks) == 0 {
		return fmt.Errorf("docsbench: no chunk gave a question")
	}
	s.AskMedianMS, s.GrepMedianMS, s.OpenMedianMS = median(asks), median(greps), median(opens)
	s.AskOverGrep = s.AskMedianMS / s.GrepMedianMS
	return nil
}

// questionWords returns the two longest distinct lowercase words of text
// that are letters only, longest first.
func questionWords(text string) []string {
	seen := map[string]bool{}
	var words []string
	for _, w := range strings.Fields(strings.ToLower(text)) {
		if len(w) < 5 || seen[w] || strings.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
			continue
		}
		seen[w] = true
		words = append(words, w)
	}
	sort.SliceStable(words, func(i, j int) bool { return len(words[i]) > len(words[j]) })
	return words[:min(2, len(words))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
