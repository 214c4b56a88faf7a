package index

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testEmb = EmbedderInfo{Name: "offline-hash", Model: "hash-v1/d4"}

const testDigest = "sha256:corpus-a"

func smallIndex(t *testing.T) *Index {
	t.Helper()
	idx, err := New([]string{"a", "b", "c"}, [][]float32{{1, 0, 0, 0}, {0, 2, 0, 0}, {1, 1, 1, 1}})
	require.NoError(t, err)
	return idx
}

// asQuantized is the quantized index a generation saved from x stores.
func asQuantized(x *Index) *Index {
	var n float64
	row := make([]float32, x.dims)
	for r, s := range x.red.scales {
		for j, c := range x.red.codes[r*x.dims : (r+1)*x.dims] {
			row[j] = s * float32(c)
		}
		n = max(n, normBound(row))
	}
	return newQuantized(x.dims, x.ids, x.red.codes, x.red.scales, n)
}

func saveSmall(t *testing.T, s *Store, at time.Time) Manifest {
	t.Helper()
	m, err := s.save(smallIndex(t), savedCorpus{Digest: testDigest}, testEmb, at)
	require.NoError(t, err)
	return m
}

// snapshot returns every file under dir with its bytes and mtime.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		require.NoError(t, err)
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[p] = string(b) + fi.ModTime().String()
		}
		return nil
	}))
	return out
}

func TestStoreRoundTrip(t *testing.T) {
	data := t.TempDir()
	s := NewStore(data, StoreOptions{})
	_, err := s.activeID()
	require.ErrorIs(t, err, ErrNoActive)

	m1 := saveSmall(t, s, time.Unix(100, 0))
	assert.Regexp(t, `^[0-9a-f]{32}$`, m1.ID)
	assert.DirExists(t, filepath.Join(data, "index", "generations", m1.ID))
	before := snapshot(t, data)

	idx, m, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
	require.NoError(t, err)
	assert.Equal(t, m1.ID, m.ID)
	assert.Equal(t, asQuantized(smallIndex(t)).Fingerprint(), idx.Fingerprint(), "loaded rows must be the saved codes, bit for bit")
	assert.Equal(t, before, snapshot(t, data), "load must not write anything")

	m2 := saveSmall(t, s, time.Unix(200, 0))
	id, err := s.activeID()
	require.NoError(t, err)
	assert.Equal(t, m2.ID, id, "the last save is active")
	assert.Equal(t, m1.Fingerprint, m2.Fingerprint, "same content, same fingerprint")
	assert.NotEqual(t, m1.ID, m2.ID)
	entries, err := os.ReadDir(filepath.Join(data, "index", "generations"))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no staging leftovers")
}

// TestStoreQuantizedRoundTrip: a generation stores the int8 copy only;
// it loads as a quantized index with the same codes and scales, whose
// single-query search (int8 pass and exact rerank) equals a brute-force
// scan of the rows the codes define, and whose multi-query scan agrees.
func TestStoreQuantizedRoundTrip(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	built := randomIndex(t, 500, 70, 3)
	m, err := s.save(built, savedCorpus{Digest: testDigest}, testEmb, time.Unix(1, 0))
	require.NoError(t, err)
	assert.Equal(t, dTypeQuantized, m.DType)
	dir := filepath.Join(s.Dir(), "generations", m.ID)
	fi, err := os.Stat(filepath.Join(dir, vectorsFile))
	require.NoError(t, err)
	assert.Equal(t, int64(500*(70+4)), fi.Size(), "dims codes and one scale a row, nothing else")
	assert.NoFileExists(t, filepath.Join(dir, "vectors.f32"))

	loaded, _, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
	require.NoError(t, err)
	require.True(t, loaded.quantized())
	assert.Equal(t, built.red.codes, loaded.red.codes)
	assert.Equal(t, built.red.scales, loaded.red.scales)
	assert.Equal(t, built.ids, loaded.ids)
	for i, q := range randomQueries(20, 70, 4) {
		want := bruteForce(loaded, q, 5)
		got, st, err := loaded.SearchStats(q, 5)
		require.NoError(t, err)
		assert.Equal(t, want, got, "query %d", i)
		assert.Less(t, st, loaded.Len(), "the int8 pass rules rows out")
	}
	qs := randomQueries(6, 70, 5)
	batch, err := loaded.SearchBatch(qs, 4)
	require.NoError(t, err)
	for i, q := range qs {
		assert.Equal(t, bruteForce(loaded, q, 4), batch[i], "batch query %d", i)
	}
	// Quantized rows are close to the float32 ones they came from.
	for r := range built.Len() {
		a, b := built.row(r), loaded.row(r)
		var dot float64
		for j := range a {
			dot += float64(a[j]) * float64(b[j])
		}
		assert.Greater(t, dot, 0.998, "row %d", r)
	}
}

// TestWriterMatchesSavedFloatIndex: a generation written row by row
// keeps exactly what saving a float32 index of the same rows keeps, and
// refuses what Save refuses.
func TestWriterMatchesSavedFloatIndex(t *testing.T) {
	full := randomIndex(t, 300, 33, 7)
	s := NewStore(t.TempDir(), StoreOptions{})
	saved, err := s.save(full, savedCorpus{Digest: testDigest}, testEmb, time.Unix(1, 0))
	require.NoError(t, err)
	w, err := s.NewWriter(33)
	require.NoError(t, err)
	for r := range full.Len() {
		require.NoError(t, w.Add(full.ids[r], full.row(r)))
	}
	require.ErrorContains(t, w.Add(full.ids[0], full.row(0)), "duplicate id")
	require.ErrorContains(t, w.Add("x\ny", full.row(0)), "line break")
	require.ErrorIs(t, w.Add("short", full.row(0)[:5]), ErrDimension)
	written, err := w.Commit(testDigest, "", testEmb, time.Unix(2, 0))
	require.NoError(t, err)
	assert.Equal(t, saved.Fingerprint, written.Fingerprint, "same rows, same generation content")
	q, _, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
	require.NoError(t, err)
	active, err := s.activeID()
	require.NoError(t, err)
	assert.Equal(t, written.ID, active)
	for i, qq := range randomQueries(10, 33, 8) {
		got, err := q.Search(qq, 3)
		require.NoError(t, err)
		assert.Equal(t, bruteForce(q, qq, 3), got, "query %d", i)
	}
	_, err = w.Commit(testDigest, "", testEmb, time.Unix(3, 0))
	require.Error(t, err, "a writer commits once")
	empty, err := s.NewWriter(4)
	require.NoError(t, err)
	_, err = empty.Commit(testDigest, "", testEmb, time.Unix(4, 0))
	require.ErrorContains(t, err, "no rows")
	entries, err := os.ReadDir(filepath.Join(s.Dir(), "generations"))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no staging left behind")
}

func TestStoreRefusesStale(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	saveSmall(t, s, time.Unix(1, 0))
	for _, tc := range []struct {
		name string
		want Expect
		msg  string
	}{
		{"corpus changed", Expect{CorpusDigest: "sha256:corpus-b", Embedder: testEmb}, "built from corpus sha256:corpus-a"},
		{"embedder changed", Expect{CorpusDigest: testDigest, Embedder: EmbedderInfo{Name: "openai", Model: "text-embedding-3-small"}}, "built with embedder offline-hash/hash-v1/d4"},
		{"model changed", Expect{CorpusDigest: testDigest, Embedder: EmbedderInfo{Name: "offline-hash", Model: "hash-v1/d8"}}, "configured is offline-hash/hash-v1/d8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Load(tc.want)
			require.ErrorIs(t, err, ErrStale)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// resign rewrites file name of generation m with b, records its size and
// digest and re-signs the manifest, so that only the property under test
// is wrong.
func resign(t *testing.T, s *Store, m Manifest, name string, b []byte, edit func(*Manifest)) {
	t.Helper()
	dir := filepath.Join(s.Dir(), "generations", m.ID)
	if b != nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		sum := sha256.Sum256(b)
		m.Files[name] = FileInfo{Bytes: int64(len(b)), SHA256: "sha256:" + hex.EncodeToString(sum[:])}
	}
	if edit != nil {
		edit(&m)
	}
	m.Fingerprint = m.computeFingerprint()
	mb, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestFile), mb, 0o644))
}

// TestStoreLoadValidates: opening checks what is cheap (manifest, its
// fingerprint, every file's size and the ids' count) and Verify checks the
// rest (digests, codes, scales, norms), naming the file and row.
func TestStoreLoadValidates(t *testing.T) {
	vectors := func(t *testing.T, s *Store, m Manifest) []byte {
		b, err := os.ReadFile(filepath.Join(s.Dir(), "generations", m.ID, vectorsFile))
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, s *Store, m Manifest)
		msg    string
		verify bool // found by Verify only, not on open
	}{
		{"truncated vectors", func(t *testing.T, s *Store, m Manifest) {
			b := vectors(t, s, m)
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "generations", m.ID, vectorsFile), b[:len(b)-1], 0o644))
		}, "vectors.i8 has 23 bytes, the manifest says 24", false},
		{"vectors re-signed at another size", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, vectorsFile, vectors(t, s, m)[:16], nil)
		}, "vectors.i8 of 16 bytes, want 24", false},
		{"an id missing", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, idsFile, []byte("a\nb\n"), nil)
		}, "has 2 ids, the manifest says 3", false},
		{"ids without final newline", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, idsFile, []byte("a\nb\nc"), nil)
		}, "does not end in a newline", false},
		{"dtype", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, "", nil, func(m *Manifest) { m.DType = "float32le" })
		}, `dtype "float32le"`, false},
		{"an earlier format", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, "", nil, func(m *Manifest) { m.Format = "verdryx-index/v1" })
		}, `format "verdryx-index/v1"`, false},
		{"a later format", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, "", nil, func(m *Manifest) { m.Format = "verdryx-index/v3" })
		}, `format "verdryx-index/v3", want "verdryx-index/v2"`, false},
		{"another program's format", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, "", nil, func(m *Manifest) { m.Format = "other-index/v2" })
		}, `format "other-index/v2", want "verdryx-index/v2"`, false},
		{"no format", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, "", nil, func(m *Manifest) { m.Format = "" })
		}, `format "", want "verdryx-index/v2"`, false},
		{"manifest edited without fingerprint", func(t *testing.T, s *Store, m Manifest) {
			p := filepath.Join(s.Dir(), "generations", m.ID, manifestFile)
			b, _ := os.ReadFile(p)
			var raw map[string]any
			require.NoError(t, json.Unmarshal(b, &raw))
			raw["count"] = 4
			b, _ = json.Marshal(raw)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, "fingerprint", false},
		{"vectors digest", func(t *testing.T, s *Store, m Manifest) {
			b := vectors(t, s, m)
			b[0]--
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "generations", m.ID, vectorsFile), b, 0o644))
		}, "vectors.i8 digest", true},
		{"ids digest", func(t *testing.T, s *Store, m Manifest) {
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "generations", m.ID, idsFile), []byte("a\nx\nc\n"), 0o644))
		}, "ids digest", true},
		{"repeated id", func(t *testing.T, s *Store, m Manifest) {
			resign(t, s, m, idsFile, []byte("a\na\nc\n"), nil)
		}, `ids line 2: id "a" is empty or repeated`, true},
		{"code -128", func(t *testing.T, s *Store, m Manifest) {
			b := vectors(t, s, m)
			b[5] = 0x80
			resign(t, s, m, vectorsFile, b, nil)
		}, "row 1 (b): a code of -128", true},
		{"scale not finite", func(t *testing.T, s *Store, m Manifest) {
			b := vectors(t, s, m)
			binary.LittleEndian.PutUint32(b[12+4:], math.Float32bits(float32(math.Inf(1))))
			resign(t, s, m, vectorsFile, b, nil)
		}, "row 1 (b): scale +Inf", true},
		{"row above max_norm", func(t *testing.T, s *Store, m Manifest) {
			b := vectors(t, s, m)
			binary.LittleEndian.PutUint32(b[12+8:], math.Float32bits(1))
			resign(t, s, m, vectorsFile, b, nil)
		}, "row 2 (c): norm up to", true},
		{"active names missing generation", func(t *testing.T, s *Store, m Manifest) {
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), activeFile), []byte(`{"generation":"00000000000000000000000000000000"}`), 0o644))
		}, "does not exist", false},
		{"active not hex", func(t *testing.T, s *Store, m Manifest) {
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), activeFile), []byte(`{"generation":"../x"}`), 0o644))
		}, "not 32 lowercase hex", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), StoreOptions{})
			m := saveSmall(t, s, time.Unix(1, 0))
			_, err := s.Verify("active")
			require.NoError(t, err, "as saved")
			tc.setup(t, s, m)
			_, _, err = s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
			if tc.verify {
				require.NoError(t, err, "opening reads no digest")
				_, err = s.Verify("")
			}
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestStoreRefusesSymlinksAndFiles(t *testing.T) {
	t.Run("generations symlink", func(t *testing.T) {
		data := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(data, "index"), 0o755))
		require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(data, "index", "generations")))
		_, err := NewStore(data, StoreOptions{}).save(smallIndex(t), savedCorpus{Digest: testDigest}, testEmb, time.Now())
		require.ErrorIs(t, err, ErrUnsafePath)
		assert.Contains(t, err.Error(), "symbolic link")
	})
	t.Run("index is a file", func(t *testing.T) {
		data := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(data, "index"), nil, 0o644))
		err := NewStore(data, StoreOptions{}).preflight()
		require.ErrorIs(t, err, ErrUnsafePath)
		assert.Contains(t, err.Error(), "not a directory")
	})
	t.Run("generation dir symlink", func(t *testing.T) {
		data := t.TempDir()
		s := NewStore(data, StoreOptions{})
		m := saveSmall(t, s, time.Unix(1, 0))
		dir := filepath.Join(s.Dir(), "generations", m.ID)
		moved := filepath.Join(t.TempDir(), "moved")
		require.NoError(t, os.Rename(dir, moved))
		require.NoError(t, os.Symlink(moved, dir))
		_, _, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
		require.ErrorIs(t, err, ErrUnsafePath)
	})
	t.Run("active symlink", func(t *testing.T) {
		data := t.TempDir()
		s := NewStore(data, StoreOptions{})
		saveSmall(t, s, time.Unix(1, 0))
		p := filepath.Join(s.Dir(), activeFile)
		target := filepath.Join(t.TempDir(), "a.json")
		b, _ := os.ReadFile(p)
		require.NoError(t, os.WriteFile(target, b, 0o644))
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Symlink(target, p))
		_, err := s.activeID()
		require.ErrorIs(t, err, ErrUnsafePath)
	})
}

func TestStoreListAndPrune(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	var ids []string
	for i := range 4 {
		ids = append(ids, saveSmall(t, s, time.Unix(int64(100+i), 0)).ID)
	}
	// Re-activate the oldest: prune must keep it even though it is oldest.
	require.NoError(t, s.activate(ids[0]))
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 4)
	assert.Equal(t, ids[3], list[0].ID, "newest first")
	assert.True(t, list[3].Active)

	res, err := s.Prune(1)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{ids[1], ids[2]}, res.Removed)
	list, err = s.List()
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, ids[3], list[0].ID)
	assert.Equal(t, ids[0], list[1].ID)

	res, err = s.Prune(0)
	require.NoError(t, err)
	assert.Equal(t, []string{ids[3]}, res.Removed)
	_, _, err = s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
	require.NoError(t, err, "the active generation survives every prune")
	_, err = s.Prune(-1)
	assert.Error(t, err)
}

// TestReadersSeeCompleteGenerations loads the active generation over and
// over while another goroutine saves new ones: every load must succeed and
// return one complete generation (rows matching its manifest), never a mix.
func TestReadersSeeCompleteGenerations(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	saveSmall(t, s, time.Unix(1, 0))
	want := map[string]string{} // generation id -> index fingerprint
	done := make(chan struct{})
	var saveErr error
	go func() {
		defer close(done)
		for i := range 15 {
			idx, err := New([]string{"a", "b"}, [][]float32{{1, float32(i)}, {float32(i), 1}})
			if err != nil {
				saveErr = err
				return
			}
			m, err := s.save(idx, savedCorpus{Digest: testDigest}, testEmb, time.Unix(int64(10+i), 0))
			if err != nil {
				saveErr = err
				return
			}
			want[m.ID] = asQuantized(idx).Fingerprint()
		}
	}()
	type seen struct{ id, fp string }
	var loads []seen
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		idx, m, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
		require.NoError(t, err)
		loads = append(loads, seen{m.ID, idx.Fingerprint()})
	}
	require.NoError(t, saveErr)
	for _, l := range loads {
		if fp, ok := want[l.id]; ok {
			assert.Equal(t, fp, l.fp, "generation %s loaded with other rows", l.id)
		}
	}
	assert.NotEmpty(t, loads)
}

// TestInterruptedSaveKeepsPreviousGeneration leaves what a crash before
// publication leaves (a staging directory with a partial file): the
// previous generation stays active and listing ignores the leftover.
func TestInterruptedSaveKeepsPreviousGeneration(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	m := saveSmall(t, s, time.Unix(1, 0))
	staging := filepath.Join(s.Dir(), "generations", ".staging-123")
	require.NoError(t, os.MkdirAll(staging, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(staging, vectorsFile), []byte{1, 2, 3}, 0o644))
	_, got, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
	require.NoError(t, err)
	assert.Equal(t, m.ID, got.ID)
	list, err := s.List()
	require.NoError(t, err)
	assert.Len(t, list, 1)
}

// TestStoreRecordsCorpus: a generation keeps a copy of its corpus file,
// covered by the fingerprint, and Generation refuses a copy that no
// longer matches the manifest.
func TestStoreRecordsCorpus(t *testing.T) {
	data := t.TempDir()
	s := NewStore(data, StoreOptions{})
	_, _, err := s.Generation("")
	require.ErrorIs(t, err, ErrNoActive)

	bare := saveSmall(t, s, time.Unix(100, 0))
	assert.NotContains(t, bare.Files, corpusFile)
	_, _, err = s.Generation("")
	require.ErrorIs(t, err, ErrNoCorpus)

	file := []byte(`{"id":"c","chunks":[]}` + "\n")
	m, err := s.save(smallIndex(t), savedCorpus{Digest: testDigest, File: file}, testEmb, time.Unix(200, 0))
	require.NoError(t, err)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, m.Files[corpusFile].SHA256)
	assert.NotEqual(t, bare.Fingerprint, m.Fingerprint, "the recorded corpus is covered by the fingerprint")
	am, path, err := s.Generation("")
	require.NoError(t, err)
	assert.Equal(t, m.ID, am.ID)
	assert.Equal(t, filepath.Join(data, "index", "generations", m.ID, corpusFile), path)
	have, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, file, have)

	// A tampered copy is refused: at another size on open, at the same
	// size by Verify; so is a manifest whose corpus digest was edited to
	// match it (the fingerprint no longer does).
	require.NoError(t, os.Chmod(path, 0o644))
	require.NoError(t, os.WriteFile(path, []byte(`{"id":"other"}`), 0o644))
	_, _, err = s.Generation("")
	require.ErrorIs(t, err, ErrCorrupt)
	require.NoError(t, os.WriteFile(path, bytes.ToUpper(file), 0o644))
	_, _, err = s.Generation("")
	require.NoError(t, err, "opening checks sizes only")
	_, err = s.Verify("")
	require.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, "corpus.json digest")
	mpath := filepath.Join(data, "index", "generations", m.ID, "manifest.json")
	var raw map[string]any
	b, err := os.ReadFile(mpath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &raw))
	raw["files"].(map[string]any)[corpusFile].(map[string]any)["sha256"] = "sha256:0000"
	b, err = json.Marshal(raw)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mpath, b, 0o644))
	_, _, err = s.Generation("")
	require.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, "fingerprint")
}

func TestStoreReusable(t *testing.T) {
	data := t.TempDir()
	s := NewStore(data, StoreOptions{})
	want := Expect{CorpusDigest: testDigest, Embedder: testEmb}
	_, why, err := s.Reusable(want, 0)
	require.NoError(t, err)
	assert.Contains(t, why, "no active", "nothing to reuse yet")

	m, err := s.save(smallIndex(t), savedCorpus{Digest: testDigest, File: []byte(`[]`)}, testEmb, time.Unix(100, 0))
	require.NoError(t, err)
	got, why, err := s.Reusable(want, 0)
	require.NoError(t, err)
	assert.Empty(t, why)
	assert.Equal(t, m.ID, got.ID, "same corpus, same embedder: the active generation")
	got, why, err = s.Reusable(want, 4)
	require.NoError(t, err)
	assert.Empty(t, why)
	assert.Equal(t, m.ID, got.ID)
	got, why, err = s.Reusable(Expect{CorpusDigest: testDigest, Embedder: testEmb, Retrieval: "vector"}, 0)
	require.NoError(t, err)
	assert.Empty(t, why, "a generation recording no retrieval is a vector one")
	assert.Equal(t, m.ID, got.ID)

	// The retrieval is recorded and covered by the fingerprint.
	h, err := s.save(smallIndex(t), savedCorpus{Digest: testDigest, File: []byte(`[]`), Retrieval: "hybrid"}, testEmb, time.Unix(100, 0))
	require.NoError(t, err)
	assert.Equal(t, "hybrid", h.Retrieval)
	assert.NotEqual(t, m.Fingerprint, h.Fingerprint)
	hm, _, err := s.Generation(h.ID)
	require.NoError(t, err)
	assert.Equal(t, "hybrid", hm.Retrieval)
	_, why, err = s.Reusable(want, 0)
	require.NoError(t, err)
	assert.Contains(t, why, "retrieves by hybrid, want vector")
	m, err = s.save(smallIndex(t), savedCorpus{Digest: testDigest, File: []byte(`[]`)}, testEmb, time.Unix(100, 0))
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		want Expect
		dims int
	}{
		"other corpus":    {Expect{CorpusDigest: "sha256:corpus-b", Embedder: testEmb}, 0},
		"other embedder":  {Expect{CorpusDigest: testDigest, Embedder: EmbedderInfo{Name: "openai", Model: "text-embedding-3-small"}}, 0},
		"other model":     {Expect{CorpusDigest: testDigest, Embedder: EmbedderInfo{Name: testEmb.Name, Model: "hash-v1/d8"}}, 0},
		"other dims":      {want, 8},
		"other retrieval": {Expect{CorpusDigest: testDigest, Embedder: testEmb, Retrieval: "hybrid"}, 0},
	} {
		_, why, err := s.Reusable(tc.want, tc.dims)
		require.NoError(t, err, name)
		assert.NotEmpty(t, why, name)
	}

	// A generation without its corpus file, or with damaged vectors, is
	// rebuilt rather than reused.
	noCorpus := NewStore(t.TempDir(), StoreOptions{})
	saveSmall(t, noCorpus, time.Unix(100, 0))
	_, why, err = noCorpus.Reusable(want, 0)
	require.NoError(t, err)
	assert.Contains(t, why, "records no corpus")

	vec := filepath.Join(data, "index", "generations", m.ID, vectorsFile)
	b, err := os.ReadFile(vec)
	require.NoError(t, err)
	b[0] ^= 0xff
	require.NoError(t, os.WriteFile(vec, b, 0o644))
	_, why, err = s.Reusable(want, 0)
	require.NoError(t, err)
	assert.NotEmpty(t, why, "corrupt vectors are not reused")
}

// TestRemoveStaleKeepsRunningSavesAndGenerations: an interrupted save's
// staging directory (its lock released as at the process's death) and an
// older one without a lock file are removed and listed with their sizes;
// the staging directory of a save still running and every completed
// generation stay.
func TestRemoveStaleKeepsRunningSavesAndGenerations(t *testing.T) {
	data := t.TempDir()
	s := NewStore(data, StoreOptions{})
	m := saveSmall(t, s, time.Unix(1, 0))
	gens := filepath.Join(s.Dir(), generationsDir)

	// A save killed mid-write: its directory and lock file are left, the
	// lock itself went with the process.
	dead, release, err := newStaging(gens)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dead, vectorsFile), make([]byte, 1000), 0o644))
	kill(t, dead, release)
	// A staging directory of a build from before the locks.
	legacy := filepath.Join(gens, ".staging-1234567")
	require.NoError(t, os.Mkdir(legacy, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(legacy, manifestFile), make([]byte, 10), 0o644))
	// A save running now (in this process: another open file of the lock
	// conflicts as another process's would).
	live, releaseLive, err := newStaging(gens)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(live, vectorsFile), []byte("x"), 0o644))

	removed, err := s.RemoveStale()
	require.NoError(t, err)
	require.Equal(t, map[string]int64{filepath.Base(dead): 1000, ".staging-1234567": 10}, removed)
	require.NoDirExists(t, dead)
	require.NoFileExists(t, dead+lockSuffix)
	require.NoDirExists(t, legacy)
	require.DirExists(t, live, "a running save's staging directory is kept")
	require.FileExists(t, live+lockSuffix)
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, m.ID, list[0].ID, "a completed generation is never removed")
	require.NoError(t, list[0].Err)

	// Once that save ends without finishing (its process dies), its
	// directory is stale too.
	kill(t, live, releaseLive)
	removed, err = s.RemoveStale()
	require.NoError(t, err)
	require.Equal(t, map[string]int64{filepath.Base(live): 1}, removed)
	removed, err = s.RemoveStale()
	require.NoError(t, err)
	require.Empty(t, removed)
	entries, err := os.ReadDir(gens)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the generation is left: %v", entries)
}

// kill drops a staging directory's lock as the death of its process
// would, leaving the directory and the lock file.
func kill(t *testing.T, dir string, release func()) {
	t.Helper()
	lock, err := os.ReadFile(dir + lockSuffix)
	require.NoError(t, err)
	release()                                                     // closes the lock and removes the file...
	require.NoError(t, os.WriteFile(dir+lockSuffix, lock, 0o644)) // ...which a killed process would have left
}

// TestSaveLeavesNoStaging: a finished save leaves only its generation
// (no staging directory, no lock file).
func TestSaveLeavesNoStaging(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	m := saveSmall(t, s, time.Unix(1, 0))
	entries, err := os.ReadDir(filepath.Join(s.Dir(), generationsDir))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, m.ID, entries[0].Name())
}

// TestRemoveStaleAfterKill9 starts a save's staging in another process,
// which then blocks: its directory is kept while the process lives and
// removed once it is killed with SIGKILL (the kernel dropped its lock).
func TestRemoveStaleAfterKill9(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("SIGKILL of a helper process")
	}
	data := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStagingHelperProcess$")
	cmd.Env = append(os.Environ(), "VERDRYX_INDEX_STAGING_HELPER="+data)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // never closed: the helper blocks on it
	require.NoError(t, err)
	t.Cleanup(func() { stdin.Close() })
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the helper names its staging directory")
	dir := strings.TrimSpace(line)
	require.DirExists(t, dir)

	s := NewStore(data, StoreOptions{})
	removed, err := s.RemoveStale()
	require.NoError(t, err)
	require.Empty(t, removed, "the staging directory of a live process is kept")
	require.DirExists(t, dir)

	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	_ = cmd.Wait()
	removed, err = s.RemoveStale()
	require.NoError(t, err)
	require.Equal(t, map[string]int64{filepath.Base(dir): 3}, removed)
	require.NoDirExists(t, dir)
	require.NoFileExists(t, dir+lockSuffix)
}

// TestStagingHelperProcess is the process TestRemoveStaleAfterKill9 kills:
// it creates a staging directory under the data directory it is given,
// writes a file into it, prints its path and blocks (reading a stdin
// never closed) until killed.
func TestStagingHelperProcess(t *testing.T) {
	data := os.Getenv("VERDRYX_INDEX_STAGING_HELPER")
	if data == "" {
		t.Skip("only as TestRemoveStaleAfterKill9's helper")
	}
	gens := filepath.Join(NewStore(data, StoreOptions{}).Dir(), generationsDir)
	require.NoError(t, os.MkdirAll(gens, 0o755))
	dir, _, err := newStaging(gens)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, vectorsFile), []byte("abc"), 0o644))
	fmt.Println(dir)
	_, _ = io.Copy(io.Discard, os.Stdin) // until SIGKILL
}
