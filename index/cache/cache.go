// Package cache embeds texts in bounded batches and keeps every vector
// under the data directory by the digest of its text and of the embedder
// that made it, so a rebuild embeds only the texts it has not embedded
// before.
//
// An entry is one file, <data>/index/cache/<k[0:2]>/<k>.vec, where k is
// the lowercase hex SHA-256 of "verdryx-embedding\x00" + embedder name +
// "\x00" + model + "\x00" + text. Its bytes (little-endian):
//
//	magic    8 bytes  "VDXEMB01" (format version 1; any other is refused)
//	key     32 bytes  the digest k
//	dims     4 bytes  uint32, > 0
//	vector   4*dims   float32 components
//	check   32 bytes  SHA-256 of every byte before it
//
// An entry is trusted only when all of that holds, its length is exactly
// 76 + 4*dims, its components are finite and not all zero, and dims is the
// embedder's; anything else is counted as rejected and the text embedded
// again (the new entry replaces it). Entries are written to a temporary
// file and renamed into place, without fsync: a torn entry fails its
// check and is embedded again, never read as a vector.
package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/verdryx/verdryx/index"
)

// Request limits.
const (
	// MaxInputs is the most texts one embedding request carries (the
	// OpenAI embeddings API's limit).
	MaxInputs = 2048
	// DefaultMaxBytes is the default most bytes of text of one request:
	// 512 KiB keeps a request under OpenAI's 300,000 tokens per request
	// for any text of at least 1.75 bytes per token.
	DefaultMaxBytes = 512 << 10
)

const (
	magic     = "VDXEMB01"
	keyPrefix = "verdryx-embedding\x00"
	headerLen = len(magic) + sha256.Size + 4
)

// Cache is the embedding cache under <data>/index/cache. It holds no open
// resources and is safe for concurrent use.
type Cache struct {
	dir string
}

// New returns the cache of dataDir (it creates nothing).
func New(dataDir string) *Cache {
	return &Cache{dir: filepath.Join(dataDir, "index", "cache")}
}

// Options configure Embed.
type Options struct {
	// Cache keeps the vectors; nil embeds every text.
	Cache *Cache
	// MaxInputs is the most texts of one Embed call to the embedder:
	// 1..MaxInputs, 0 meaning MaxInputs.
	MaxInputs int
	// MaxBytes is the most bytes of text of one call (a longer text goes
	// alone); 0 means DefaultMaxBytes.
	MaxBytes int
	// Workers is how many calls may be in flight at once; 0 means 1.
	Workers int
	// Progress, if set, is called after each answered call with how many
	// texts have been embedded so far and how many are to be (the texts
	// the cache did not hold, equal texts once). Calls are serialized and
	// done grows; it is not called when nothing is to be embedded.
	Progress func(done, total int)
}

// Stats count what Embed did.
type Stats struct {
	// Texts is how many texts were asked for.
	Texts int `json:"texts"`
	// Cached is how many of them were read from the cache.
	Cached int `json:"cached"`
	// Embedded is how many distinct texts were sent to the embedder.
	Embedded int `json:"embedded"`
	// Requests is how many calls the embedder received.
	Requests int `json:"requests"`
	// Rejected is how many cache entries were found invalid and replaced.
	Rejected int `json:"rejected"`
}

// Batches returns the [start, end) ranges of texts that make the
// embedding requests, in order: each holds at most maxInputs texts and at
// most maxBytes bytes of text, unless a single text is longer.
func Batches(texts []string, maxInputs, maxBytes int) [][2]int {
	var out [][2]int
	start, size := 0, 0
	for i, t := range texts {
		if i > start && (i-start >= maxInputs || size+len(t) > maxBytes) {
			out = append(out, [2]int{start, i})
			start, size = i, 0
		}
		size += len(t)
	}
	if start < len(texts) {
		out = append(out, [2]int{start, len(texts)})
	}
	return out
}

// Key returns the hex digest naming text's entry for embedder e.
func Key(e index.EmbedderInfo, text string) string {
	h := sha256.New()
	h.Write([]byte(keyPrefix + e.Name + "\x00" + e.Model + "\x00"))
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

// dimser is implemented by embedders that know their vector length.
type dimser interface{ Dims() int }

// Embed returns one vector per text, in order: read from opts.Cache when
// a valid entry exists, otherwise embedded with emb in batches (Batches,
// equal texts embedded once) and written to the cache. It blocks until
// every batch is answered or one fails; the first failure is returned
// and nothing else is embedded after it. Vectors are checked (one
// length, finite, non-zero) before they are cached.
func Embed(ctx context.Context, emb index.Embedder, texts []string, opts Options) ([][]float32, Stats, error) {
	if opts.MaxInputs <= 0 || opts.MaxInputs > MaxInputs {
		opts.MaxInputs = MaxInputs
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	opts.Workers = max(opts.Workers, 1)
	st := Stats{Texts: len(texts)}
	info := index.InfoOf(emb)
	dims := 0
	if d, ok := emb.(dimser); ok {
		dims = d.Dims()
	}
	out := make([][]float32, len(texts))
	keys := make([]string, len(texts))
	first := map[string]int{} // key -> index of its first text
	var pending, cached []int // first indexes to embed, read from the cache
	for i, t := range texts {
		keys[i] = Key(info, t)
		if _, ok := first[keys[i]]; ok {
			continue
		}
		first[keys[i]] = i
		v, err := opts.Cache.read(keys[i])
		switch {
		case errors.Is(err, fs.ErrNotExist):
			pending = append(pending, i)
		case err != nil || (dims > 0 && len(v) != dims):
			st.Rejected++
			pending = append(pending, i)
		default:
			out[i] = v
			cached = append(cached, i)
			st.Cached++
		}
	}
	for len(pending) > 0 {
		if err := embedPending(ctx, emb, texts, pending, out, opts, &st, st.Embedded+len(pending)); err != nil {
			return nil, st, err
		}
		if dims == 0 {
			dims = len(out[pending[0]])
		}
		pending = pending[:0]
		kept := cached[:0]
		for _, i := range cached {
			if len(out[i]) != dims { // a cached vector of another length
				st.Rejected++
				st.Cached--
				pending = append(pending, i)
				continue
			}
			kept = append(kept, i)
		}
		cached = kept
	}
	for i := range texts {
		out[i] = out[first[keys[i]]]
	}
	return out, st, nil
}

// embedPending embeds texts[i] for i in idx in batches, checks and caches
// the vectors and stores them in out; total is what opts.Progress counts
// up to.
func embedPending(ctx context.Context, emb index.Embedder, texts []string, idx []int, out [][]float32, opts Options, st *Stats, total int) error {
	batch := make([]string, len(idx))
	for j, i := range idx {
		batch[j] = texts[i]
	}
	ranges := Batches(batch, opts.MaxInputs, opts.MaxBytes)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan [2]int)
	for range min(opts.Workers, len(ranges)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				err := embedBatch(ctx, emb, batch[r[0]:r[1]], idx[r[0]:r[1]], out, opts.Cache)
				mu.Lock()
				st.Requests++
				if err == nil {
					st.Embedded += r[1] - r[0]
					if opts.Progress != nil {
						opts.Progress(st.Embedded, total)
					}
				} else if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	for _, r := range ranges {
		if ctx.Err() != nil {
			break
		}
		work <- r
	}
	close(work)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

func embedBatch(ctx context.Context, emb index.Embedder, batch []string, idx []int, out [][]float32, c *Cache) error {
	vecs, err := emb.Embed(ctx, batch)
	if err != nil {
		return fmt.Errorf("embed %d texts: %w", len(batch), err)
	}
	if len(vecs) != len(batch) {
		return fmt.Errorf("embed %d texts: the embedder returned %d vectors", len(batch), len(vecs))
	}
	info := index.InfoOf(emb)
	for j, v := range vecs {
		if err := checkVector(v); err != nil {
			return fmt.Errorf("embed text %d of a batch of %d: %w", j, len(batch), err)
		}
		if err := c.write(Key(info, batch[j]), v); err != nil {
			return err
		}
		out[idx[j]] = v
	}
	return nil
}

// checkVector refuses an empty, non-finite or zero vector.
func checkVector(v []float32) error {
	if len(v) == 0 {
		return fmt.Errorf("%w: empty vector", index.ErrDimension)
	}
	zero := true
	for k, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w at component %d", index.ErrNonFinite, k)
		}
		zero = zero && x == 0
	}
	if zero {
		return index.ErrZeroVector
	}
	return nil
}

func (c *Cache) path(key string) string {
	return filepath.Join(c.dir, key[:2], key+".vec")
}

// errInvalid marks an entry that fails verification.
var errInvalid = errors.New("cache: invalid entry")

// read returns the vector of key's entry; fs.ErrNotExist when there is
// none (or c is nil), errInvalid when it does not verify.
func (c *Cache) read(key string) ([]float32, error) {
	if c == nil {
		return nil, fs.ErrNotExist
	}
	p := c.path(key)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", errInvalid, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return decode(b, key)
}

// decode verifies an entry's bytes against key and returns its vector.
func decode(b []byte, key string) ([]float32, error) {
	if head := b[:min(len(b), len(magic))]; string(head) != magic {
		return nil, fmt.Errorf("%w: format %q, this build reads %q", errInvalid, head, magic)
	}
	if len(b) < headerLen+4+sha256.Size {
		return nil, fmt.Errorf("%w: %d bytes, too short for an entry", errInvalid, len(b))
	}
	want, err := hex.DecodeString(key)
	if err != nil || !bytes.Equal(b[len(magic):len(magic)+sha256.Size], want) {
		return nil, fmt.Errorf("%w: key differs", errInvalid)
	}
	dims := int(binary.LittleEndian.Uint32(b[headerLen-4:]))
	if dims <= 0 || len(b) != headerLen+4*dims+sha256.Size {
		return nil, fmt.Errorf("%w: %d bytes for %d dims", errInvalid, len(b), dims)
	}
	body := b[:len(b)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], b[len(body):]) {
		return nil, fmt.Errorf("%w: checksum differs", errInvalid)
	}
	v := make([]float32, dims)
	for k := range v {
		v[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[headerLen+4*k:]))
	}
	if err := checkVector(v); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalid, err)
	}
	return v, nil
}

// encode returns the entry bytes of v under key.
func encode(key string, v []float32) []byte {
	b := make([]byte, 0, headerLen+4*len(v)+sha256.Size)
	b = append(b, magic...)
	k, _ := hex.DecodeString(key)
	b = append(b, k...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// write stores v as key's entry (nothing when c is nil): a temporary file
// in the entry's directory, renamed over the entry.
func (c *Cache) write(key string, v []float32) error {
	if c == nil {
		return nil
	}
	dir := filepath.Dir(c.path(key))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("embedding cache: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("embedding cache: %w", err)
	}
	_, werr := f.Write(encode(key, v))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("embedding cache: write %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), c.path(key)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("embedding cache: %w", err)
	}
	return nil
}

// Preflight checks that <data>/index/cache, where it exists, is a real
// directory and not a symbolic link.
func (c *Cache) Preflight() error {
	fi, err := os.Lstat(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("embedding cache: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		return fmt.Errorf("%w: %s is a symbolic link or not a directory", index.ErrUnsafePath, c.dir)
	}
	return nil
}

// Prune removes every entry (and stray temporary file) of the cache
// whose key is not in keep, and the directories it empties; it returns
// how many entries it removed. An entry written by a build running at
// the same time may be removed: that build's generation is complete
// without it, only the saving on its next rebuild is lost.
func (c *Cache) Prune(keep map[string]bool) (int, error) {
	if err := c.Preflight(); err != nil {
		return 0, err
	}
	subs, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("embedding cache: %w", err)
	}
	removed := 0
	for _, sub := range subs {
		if !sub.IsDir() {
			continue
		}
		dir := filepath.Join(c.dir, sub.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			return removed, fmt.Errorf("embedding cache: %w", err)
		}
		left := len(entries)
		for _, e := range entries {
			key, ok := strings.CutSuffix(e.Name(), ".vec")
			if ok && keep[key] {
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return removed, fmt.Errorf("embedding cache: %w", err)
			}
			left--
			if ok {
				removed++
			}
		}
		if left == 0 {
			_ = os.Remove(dir) // a concurrent writer may have refilled it
		}
	}
	return removed, nil
}

// Window is how many texts a streaming build embeds at once (it holds
// their float32 vectors, never the whole corpus's).
const Window = 8192
