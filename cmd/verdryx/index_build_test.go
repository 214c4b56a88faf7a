package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index/hashembed"
)

const docsFolder = "../../rag/docs/testdata/manual"

// copyFolder copies the regular files of src into a new temporary folder.
func copyFolder(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	return dst
}

// embeddingsRecorder is a fake OpenAI embeddings server that records the
// inputs of every request (vectors from a small hashing embedder).
type embeddingsRecorder struct {
	mu       sync.Mutex
	requests [][]string
}

func (e *embeddingsRecorder) take() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.requests
	e.requests = nil
	return r
}

func newEmbeddingsRecorder(t *testing.T) (*embeddingsRecorder, string) {
	t.Helper()
	rec := &embeddingsRecorder{}
	hash := hashembed.New(64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.NotFound(w, r)
			return
		}
		rec.mu.Lock()
		rec.requests = append(rec.requests, req.Input)
		rec.mu.Unlock()
		vecs, _ := hash.Embed(r.Context(), req.Input)
		var data []map[string]any
		for i, v := range vecs {
			data = append(data, map[string]any{"index": i, "embedding": v})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL + "/v1"
}

// TestIndexBuildDocs: index build --docs reads a folder, lists what it
// skipped, embeds its chunks in requests of at most --embed-batch inputs;
// a rebuild embeds nothing, an edit of one section embeds only that
// section's chunks; ask answers from the generation with no --corpus and
// shows each chunk's source and span, whose bytes are its text.
func TestIndexBuildDocs(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-fake")
	rec, url := newEmbeddingsRecorder(t)
	dir := copyFolder(t, docsFolder)
	data := t.TempDir()
	build := []string{"index", "build", "--data", data, "--docs", dir, "--embedder", "openai", "--openai-base-url", url,
		"--embed-model", "fake", "--chunk-tokens", "40", "--chunk-overlap", "8", "--embed-batch", "4"}
	out, errOut, code := ragRun(t, build...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "read 4 document(s)")
	assert.Contains(t, out, "diagram.png: not .md, .markdown, .txt, .html or .htm")
	assert.Contains(t, out, "locks/install.md: markdown")
	var chunks []string
	for _, r := range rec.take() {
		assert.LessOrEqual(t, len(r), 4)
		chunks = append(chunks, r...)
	}
	require.Greater(t, len(chunks), 8)
	assert.Contains(t, out, "embedded "+itoaT(len(chunks))+", from cache 0")

	out, errOut, code = ragRun(t, "index", "ls", "--data", data)
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `RETRIEVAL`, out)
	assert.Regexp(t, `openai/fake\s+hybrid\s`, out, "a --docs index ranks hybrid by default, and ls says so")

	out, errOut, code = ragRun(t, append(build, "--force")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, rec.take(), "an unchanged rebuild embeds nothing")
	assert.Contains(t, out, "embedded 0, from cache "+itoaT(len(chunks)))

	p := filepath.Join(dir, "locks", "install.md")
	src, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, bytes.Replace(src, []byte("Windows hosts are not supported"), []byte("Windows hosts are never supported"), 1), 0o644))
	out, errOut, code = ragRun(t, build...)
	require.Equal(t, exitOK, code, errOut)
	var sent []string
	for _, r := range rec.take() {
		sent = append(sent, r...)
	}
	require.Len(t, sent, 1, "only the edited section's chunk is embedded: %q", sent)
	assert.Contains(t, sent[0], "never supported")
	assert.Contains(t, out, "embedded 1, from cache "+itoaT(len(chunks)-1))

	// gc drops the first generation and the one cache entry only it used
	// (the section before the edit); what the active one uses stays.
	out, errOut, code = ragRun(t, "index", "gc", "--keep", "0", "--data", data)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "2 generation(s) removed, 1 embedding cache entr(ies) no retained generation uses")
	_, errOut, code = ragRun(t, append(build, "--force")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, rec.take(), "gc kept every entry the active generation uses")

	out, errOut, code = ragRun(t, "ask", "--json", "--data", data, "--openai-base-url", url, "Which port do peers connect on?")
	require.Equal(t, exitOK, code, errOut)
	var record struct {
		Chunks []struct {
			ID       string `json:"id"`
			Text     string `json:"text"`
			Metadata struct {
				Source   string   `json:"source"`
				Headings []string `json:"headings"`
				Span     [2]int   `json:"span"`
			} `json:"metadata"`
		} `json:"retrieved_chunks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &record), out)
	require.NotEmpty(t, record.Chunks)
	for _, c := range record.Chunks {
		require.NotEmpty(t, c.Metadata.Source, c.ID)
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(c.Metadata.Source)))
		require.NoError(t, err)
		got := string(b[c.Metadata.Span[0]:c.Metadata.Span[1]])
		if strings.HasSuffix(c.Metadata.Source, ".html") {
			assert.Contains(t, got, "7420", c.ID)
			continue
		}
		assert.Equal(t, got, c.Text, c.ID)
	}
	assert.Equal(t, "faq.html", record.Chunks[0].Metadata.Source, "the chunk holding the answer ranks first")
}

func itoaT(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestIndexBuildDocsRefusals: --docs and --corpus together, a bad
// --embed-batch or --chunk-overlap and a folder holding a file that is
// not UTF-8 are refused (exit 2) naming what is wrong.
func TestIndexBuildDocsRefusals(t *testing.T) {
	dir := copyFolder(t, docsFolder)
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--docs", dir, "--corpus", ragCorpusPath}, "not both"},
		{[]string{"--docs", dir, "--embed-batch", "2049"}, "--embed-batch 2049"},
		{[]string{"--docs", dir, "--chunk-overlap", "300"}, "chunk overlap 300"},
		{[]string{"--docs", filepath.Join(dir, "missing")}, "missing"},
	} {
		_, errOut, code := ragRun(t, append([]string{"index", "build", "--data", data}, tc.args...)...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Contains(t, errOut, tc.want)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "locks", "latin1.txt"), []byte("caf\xe9 au lait"), 0o644))
	_, errOut, code := ragRun(t, "index", "build", "--data", data, "--docs", dir)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "docs: not valid UTF-8: locks/latin1.txt at byte 3")
}

// TestBenchIngestDocsSmall runs bench ingest-docs on 1 MB: every figure
// is there and positive, the chunks cover the folder.
func TestBenchIngestDocsSmall(t *testing.T) {
	out, errOut, code := ragRun(t, "bench", "ingest-docs", "--sizes", "1", "--file-kb", "100", "--dims", "64", "--json")
	require.Equal(t, exitOK, code, errOut)
	var res []struct {
		Files      int     `json:"files"`
		Bytes      int64   `json:"bytes"`
		Chunks     int     `json:"chunks"`
		ChunkBytes int64   `json:"chunk_bytes"`
		ParseMBps  float64 `json:"parse_chunk_mb_per_s"`
		BuildMBps  float64 `json:"build_mb_per_s"`
		DiskRatio  float64 `json:"disk_ratio"`
		IndexBytes int64   `json:"index_bytes"`
		Requests   int     `json:"embed_requests"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res, 1)
	r := res[0]
	assert.Equal(t, 10, r.Files)
	assert.InDelta(t, 1e6, float64(r.Bytes), 1e5)
	assert.Greater(t, r.ChunkBytes, r.Bytes*9/10, "chunks cover the folder")
	assert.Greater(t, r.Chunks, 500)
	assert.Positive(t, r.ParseMBps)
	assert.Positive(t, r.BuildMBps)
	assert.InDelta(t, float64(r.IndexBytes)/float64(r.Bytes), r.DiskRatio, 1e-9)
	assert.Greater(t, r.IndexBytes, int64(r.Chunks)*64*4)
	assert.GreaterOrEqual(t, r.Requests, 1)
	_, _, code = ragRun(t, "bench", "ingest-docs", "--file-kb", "0")
	assert.Equal(t, exitUsage, code)
}

// TestInterruptedBuildsAreCleanedUp: the staging directories an
// interrupted build left (one with its lock file, one from before the
// locks) are removed and listed by the next build, and by index gc; the
// generations stay.
func TestInterruptedBuildsAreCleanedUp(t *testing.T) {
	data := t.TempDir()
	gens := filepath.Join(data, "index", "generations")
	leave := func(name string, withLock bool) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Join(gens, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(gens, name, "vectors.f32"), make([]byte, 64), 0o644))
		if withLock {
			require.NoError(t, os.WriteFile(filepath.Join(gens, name+".lock"), nil, 0o644))
		}
	}
	leave(".staging-0a0a0a0a0a0a0a0a", true)
	leave(".staging-123456", false)
	out, errOut, code := ragRun(t, "index", "build", "--data", data, "--corpus", ragCorpusPath)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "removed generations/.staging-0a0a0a0a0a0a0a0a (64 bytes): the staging directory of an interrupted build\n")
	assert.Contains(t, out, "removed generations/.staging-123456 (64 bytes)")
	entries, err := os.ReadDir(gens)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the new generation: %v", entries)

	leave(".staging-0b0b0b0b0b0b0b0b", true)
	out, errOut, code = ragRun(t, "index", "gc", "--data", data, "--json")
	require.Equal(t, exitOK, code, errOut)
	var gc struct {
		Removed []string   `json:"removed"`
		Stale   []staleDir `json:"stale_staging_removed"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &gc))
	require.Equal(t, []staleDir{{Name: ".staging-0b0b0b0b0b0b0b0b", Bytes: 64}}, gc.Stale)
	require.Empty(t, gc.Removed, "the active generation stays")
	entries, err = os.ReadDir(gens)
	require.NoError(t, err)
	require.Len(t, entries, 1, "%v", entries)
}
