package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/provider/openai"
)

// fakeOpenAI serves /v1/embeddings as the OpenAI API does, each vector a
// function of its text, and records the inputs of every request.
type fakeOpenAI struct {
	mu       sync.Mutex
	requests [][]string
	bytes    []int
}

func (f *fakeOpenAI) inputs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		n += len(r)
	}
	return n
}

func vectorOf(text string) []float64 {
	h := fnv.New64a()
	h.Write([]byte(text))
	s := h.Sum64()
	return []float64{float64(s%97) + 1, float64(s/97%89) + 1, float64(s/97/89%83) + 1, 1}
}

func newFakeOpenAI(t *testing.T) (*fakeOpenAI, index.Embedder) {
	t.Helper()
	f := &fakeOpenAI{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		size := 0
		for _, s := range req.Input {
			size += len(s)
		}
		f.mu.Lock()
		f.requests = append(f.requests, req.Input)
		f.bytes = append(f.bytes, size)
		f.mu.Unlock()
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		data := make([]item, len(req.Input))
		for i, s := range req.Input {
			data[i] = item{"embedding", i, vectorOf(s)}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "m"})
	}))
	t.Cleanup(srv.Close)
	c, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "sk-test", MaxResponseBytes: 64 << 20})
	require.NoError(t, err)
	emb, err := openai.NewEmbedder(c, "text-embedding-3-small", 4)
	require.NoError(t, err)
	return f, emb
}

func texts(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s text number %d", prefix, i)
	}
	return out
}

// TestBatchesBoundInputsAndBytes: requests hold at most MaxInputs texts
// and at most the byte budget, unless one text alone is longer; every
// text is sent once, in order.
func TestBatchesBoundInputsAndBytes(t *testing.T) {
	f, emb := newFakeOpenAI(t)
	in := texts(5000, "short")
	vecs, st, err := Embed(context.Background(), emb, in, Options{})
	require.NoError(t, err)
	require.Len(t, vecs, 5000)
	assert.Equal(t, 3, len(f.requests))
	var sent []string
	for _, r := range f.requests {
		assert.LessOrEqual(t, len(r), MaxInputs)
		sent = append(sent, r...)
	}
	assert.Equal(t, in, sent)
	assert.Equal(t, Stats{Texts: 5000, Embedded: 5000, Requests: 3}, st)
	for i, v := range vecs {
		assert.InDeltaSlice(t, vectorOf(in[i]), v, 1e-6, "vector %d not the one of its text", i)
	}

	f, emb = newFakeOpenAI(t)
	big := make([]string, 7)
	for i := range big {
		big[i] = fmt.Sprintf("%d %s", i, strings.Repeat("x", 200<<10))
	}
	big = append(big, strings.Repeat("y", 600<<10)) // longer than the budget: alone
	_, st, err = Embed(context.Background(), emb, big, Options{MaxInputs: 100})
	require.NoError(t, err)
	for i, b := range f.bytes {
		if len(f.requests[i]) > 1 {
			assert.LessOrEqual(t, b, DefaultMaxBytes, "request %d", i)
		}
	}
	assert.Equal(t, 5, st.Requests) // 2+2+2+1 of 200 KiB, then the long one
	assert.Len(t, f.requests[len(f.requests)-1], 1)

	assert.Equal(t, [][2]int{{0, 2}, {2, 4}, {4, 5}}, Batches([]string{"a", "b", "c", "d", "e"}, 2, 100))
	assert.Equal(t, [][2]int{{0, 1}, {1, 3}}, Batches([]string{"aaa", "bbb", "c"}, 10, 5))
}

// countingEmbedder counts the texts its Embed receives.
type countingEmbedder struct {
	index.Embedder
	texts atomic.Int64
	calls atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.calls.Add(1)
	c.texts.Add(int64(len(texts)))
	return c.Embedder.Embed(ctx, texts)
}

func (c *countingEmbedder) Dims() int { return c.Embedder.(*hashembed.Embedder).Dims() }

// TestCacheEmbedsOnlyWhatChanged: a second run embeds nothing, a run with
// one text changed embeds that text only, vectors equal fresh ones; equal
// texts are embedded once; another embedder model shares nothing.
func TestCacheEmbedsOnlyWhatChanged(t *testing.T) {
	c := New(t.TempDir())
	emb := &countingEmbedder{Embedder: hashembed.New(64)}
	in := texts(300, "cached")
	in = append(in, in[0]) // a repeat is embedded once
	first, st, err := Embed(context.Background(), emb, in, Options{Cache: c, MaxInputs: 100})
	require.NoError(t, err)
	assert.Equal(t, Stats{Texts: 301, Embedded: 300, Requests: 3}, st)
	assert.Equal(t, first[0], first[300])

	again, st, err := Embed(context.Background(), emb, in, Options{Cache: c, MaxInputs: 100})
	require.NoError(t, err)
	assert.Equal(t, Stats{Texts: 301, Cached: 300}, st)
	assert.Equal(t, first, again)
	assert.Equal(t, int64(300), emb.texts.Load())

	edited := append([]string(nil), in...)
	edited[17] = "an edited text"
	vecs, st, err := Embed(context.Background(), emb, edited, Options{Cache: c, MaxInputs: 100})
	require.NoError(t, err)
	assert.Equal(t, Stats{Texts: 301, Cached: 299, Embedded: 1, Requests: 1}, st)
	fresh, err := hashembed.New(64).Embed(context.Background(), []string{"an edited text"})
	require.NoError(t, err)
	assert.Equal(t, fresh[0], vecs[17])

	other := &countingEmbedder{Embedder: hashembed.New(32)}
	_, st, err = Embed(context.Background(), other, in[:5], Options{Cache: c})
	require.NoError(t, err)
	assert.Equal(t, 5, st.Embedded, "another model reads no entry of the first")
}

// TestCorruptEntriesAreReembedded: an entry truncated, with a flipped
// vector byte, another format version, another key or a vector of other
// dimensions is never read as a vector: it is counted rejected, embedded
// again and replaced.
func TestCorruptEntriesAreReembedded(t *testing.T) {
	dir := t.TempDir()
	c := New(dir)
	emb := &countingEmbedder{Embedder: hashembed.New(16)}
	in := texts(6, "corrupt")
	want, _, err := Embed(context.Background(), emb, in, Options{Cache: c})
	require.NoError(t, err)
	info := index.InfoOf(emb)
	path := func(i int) string { return c.path(Key(info, in[i])) }
	damage := []func(b []byte) []byte{
		func(b []byte) []byte { return b[:len(b)-5] },
		func(b []byte) []byte { b[headerLen+3] ^= 0x40; return b },
		func(b []byte) []byte { b[7] = '2'; return b },
		func(b []byte) []byte { return encode(Key(info, in[0]), make([]float32, 16)) },
		func(b []byte) []byte { return encode(Key(info, in[4]), []float32{1, 2, 3}) },
	}
	for i, d := range damage {
		b, err := os.ReadFile(path(i))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path(i), d(b), 0o644))
	}
	got, st, err := Embed(context.Background(), emb, in, Options{Cache: c})
	require.NoError(t, err)
	assert.Equal(t, Stats{Texts: 6, Cached: 1, Embedded: 5, Rejected: 5, Requests: 1}, st)
	assert.Equal(t, want, got)
	_, st, err = Embed(context.Background(), emb, in, Options{Cache: c})
	require.NoError(t, err)
	assert.Equal(t, Stats{Texts: 6, Cached: 6}, st, "rejected entries were replaced")

	// An embedder that does not say its dimensions: the first fresh vector
	// sets them, a cached vector of another length is embedded again.
	f, oai := newFakeOpenAI(t)
	_, _, err = Embed(context.Background(), oai, in[:2], Options{Cache: c})
	require.NoError(t, err)
	p := c.path(Key(index.InfoOf(oai), in[0]))
	require.NoError(t, os.WriteFile(p, encode(Key(index.InfoOf(oai), in[0]), []float32{1, 2, 3, 4, 5}), 0o644))
	vecs, st, err := Embed(context.Background(), oai, in[:3], Options{Cache: c})
	require.NoError(t, err)
	assert.Equal(t, Stats{Texts: 3, Cached: 1, Embedded: 2, Rejected: 1, Requests: 2}, st)
	for _, v := range vecs {
		assert.Len(t, v, 4)
	}
	assert.Equal(t, 4, f.inputs())
	require.NoError(t, c.Preflight())
	require.NoError(t, os.RemoveAll(c.dir))
	require.NoError(t, os.Symlink(t.TempDir(), c.dir))
	assert.ErrorIs(t, c.Preflight(), index.ErrUnsafePath)
	assert.Equal(t, filepath.Join(dir, "index", "cache"), c.dir)
}

// TestPrune: entries whose key is not kept and stray temporary files are
// removed, kept ones stay readable, emptied directories go.
func TestPrune(t *testing.T) {
	c := New(t.TempDir())
	emb := hashembed.New(16)
	in := texts(40, "prune")
	_, _, err := Embed(context.Background(), emb, in, Options{Cache: c})
	require.NoError(t, err)
	keep := map[string]bool{}
	for _, s := range in[:10] {
		keep[Key(index.InfoOf(emb), s)] = true
	}
	stray := filepath.Join(filepath.Dir(c.path(Key(index.InfoOf(emb), in[0]))), ".tmp-123")
	require.NoError(t, os.WriteFile(stray, []byte("x"), 0o644))
	n, err := c.Prune(keep)
	require.NoError(t, err)
	assert.Equal(t, 30, n)
	assert.NoFileExists(t, stray)
	_, st, err := Embed(context.Background(), emb, in, Options{Cache: c})
	require.NoError(t, err)
	assert.Equal(t, 10, st.Cached)
	assert.Equal(t, 30, st.Embedded)
	n, err = New(t.TempDir()).Prune(nil)
	assert.NoError(t, err)
	assert.Zero(t, n)
}

// TestNewIndex: the index holds every row under its id, vecs is cleared,
// mismatched counts are refused.

// TestProgressCountsWhatIsEmbedded: Progress is called once per answered
// request with a growing count that ends at the texts the cache did not
// hold, from concurrent workers one call at a time; an all-cached run
// reports nothing.
func TestProgressCountsWhatIsEmbedded(t *testing.T) {
	c := New(t.TempDir())
	emb := hashembed.New(32)
	in := texts(250, "progress")
	in = append(in, in[3]) // a repeat counts once
	var (
		seen       [][2]int // unguarded: the race detector sees concurrent calls
		inUse      atomic.Bool
		concurrent atomic.Bool
	)
	progress := func(done, total int) {
		if !inUse.CompareAndSwap(false, true) {
			concurrent.Store(true)
		}
		seen = append(seen, [2]int{done, total})
		runtime.Gosched()
		inUse.Store(false)
	}
	_, st, err := Embed(context.Background(), emb, in[:40], Options{Cache: c, MaxInputs: 100})
	require.NoError(t, err)
	require.Equal(t, 40, st.Embedded)
	_, st, err = Embed(context.Background(), emb, in, Options{Cache: c, MaxInputs: 30, Workers: 4, Progress: progress})
	require.NoError(t, err)
	require.Equal(t, 210, st.Embedded)
	require.False(t, concurrent.Load(), "Progress called concurrently")
	require.Len(t, seen, st.Requests)
	for i, s := range seen {
		assert.Equal(t, 210, s[1], "total is what the cache did not hold")
		if i > 0 {
			assert.Greater(t, s[0], seen[i-1][0], "done grows")
		}
	}
	assert.Equal(t, 210, seen[len(seen)-1][0])

	seen = nil
	_, _, err = Embed(context.Background(), emb, in, Options{Cache: c, Progress: progress})
	require.NoError(t, err)
	assert.Empty(t, seen, "nothing embedded, nothing reported")
}

// TestDecodeRefusesOtherMagicsAndVersions: an entry under another magic
// than "VDXEMB01" (each byte of "VDXEMB" changed in turn) or of another
// version than 01 is refused naming the format found and the one this
// build reads.
func TestDecodeRefusesOtherMagicsAndVersions(t *testing.T) {
	key := Key(index.InfoOf(hashembed.New(4)), "a text")
	good := encode(key, []float32{1, -2, 0.5, 3})
	_, err := decode(good, key)
	require.NoError(t, err)
	var bad [][]byte
	for i := range len(magic) {
		for _, c := range []byte{'A', 'z', '0', '9', 0, 0xff} {
			if good[i] == c {
				continue
			}
			b := append([]byte(nil), good...)
			b[i] = c
			bad = append(bad, b)
		}
	}
	for v := range 100 {
		if v == 1 {
			continue
		}
		b := append([]byte(nil), good...)
		copy(b[len(magic)-2:], fmt.Sprintf("%02d", v))
		bad = append(bad, b)
	}
	for _, b := range bad {
		_, err := decode(b, key)
		require.ErrorIs(t, err, errInvalid)
		require.ErrorContains(t, err, fmt.Sprintf(`format %q, this build reads "VDXEMB01"`, b[:len(magic)]))
	}
}
