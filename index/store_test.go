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

func saveSmall(t *testing.T, s *Store, at time.Time) Manifest {
	t.Helper()
	m, err := s.Save(smallIndex(t), Corpus{Digest: testDigest}, testEmb, at)
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
	assert.Equal(t, smallIndex(t).Fingerprint(), idx.Fingerprint(), "loaded rows must be bit-identical")
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

// TestStoreReducedCopy: a generation stores the int8 copy, names its
// digest in the fingerprinted manifest and loads it unchanged; a
// generation saved before copies were stored loads with one rebuilt from
// its vectors, and both search exactly like the float32 scan.
func TestStoreReducedCopy(t *testing.T) {
	s := NewStore(t.TempDir(), StoreOptions{})
	built := randomIndex(t, 500, 70, 3)
	m, err := s.Save(built, Corpus{Digest: testDigest}, testEmb, time.Unix(1, 0))
	require.NoError(t, err)
	require.NotNil(t, m.Reduced)
	assert.Equal(t, dTypeInt8RowScale, m.Reduced.DType)
	dir := filepath.Join(s.Dir(), "generations", m.ID)
	fi, err := os.Stat(filepath.Join(dir, reducedFile))
	require.NoError(t, err)
	assert.Equal(t, built.ReducedBytes(), fi.Size())

	loaded, _, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
	require.NoError(t, err)
	assert.Equal(t, built.red.codes, loaded.red.codes)
	assert.Equal(t, built.red.scales, loaded.red.scales)
	assert.Equal(t, built.red.errs, loaded.red.errs)
	assert.InDelta(t, built.red.norm, loaded.red.norm, 1e-12)
	q := randomQueries(1, 70, 4)[0]
	want := bruteForce(built, q, 3)
	got, err := loaded.Search(q, 3)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// A generation of the earlier layout: no vectors.i8, no "reduced".
	require.NoError(t, os.Remove(filepath.Join(dir, reducedFile)))
	old := m
	old.Reduced = nil
	old.Fingerprint = old.computeFingerprint()
	b, err := json.Marshal(old)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"reduced"`)
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestFile), b, 0o644))
	loaded, _, err = s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
	require.NoError(t, err)
	require.NotNil(t, loaded.red)
	assert.Equal(t, built.red.codes, loaded.red.codes)
	got, err = loaded.Search(q, 3)
	require.NoError(t, err)
	assert.Equal(t, want, got)
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

// rewrite replaces generation m's vectors with data and re-signs the
// manifest so that only the property under test is wrong.
func rewrite(t *testing.T, s *Store, m Manifest, data []float32, edit func(*Manifest)) {
	t.Helper()
	dir := filepath.Join(s.Dir(), "generations", m.ID)
	var buf []byte
	for _, f := range data {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, vectorsFile), buf, 0o644))
	m.VectorsSHA256 = vectorsDigest(data)
	if m.Reduced != nil && len(data)%m.Dims == 0 {
		writeReducedFile(t, dir, buildReduced(data, m.Dims), &m)
	}
	if edit != nil {
		edit(&m)
	}
	m.Fingerprint = m.computeFingerprint()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestFile), b, 0o644))
}

// writeReducedFile replaces the int8 copy of the generation in dir with red
// and records its digest in m (which the caller re-signs).
func writeReducedFile(t *testing.T, dir string, red *reduced, m *Manifest) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, writeReduced(&buf, red))
	require.NoError(t, os.WriteFile(filepath.Join(dir, reducedFile), buf.Bytes(), 0o644))
	sum := sha256.Sum256(buf.Bytes())
	m.Reduced = &ReducedInfo{DType: dTypeInt8RowScale, SHA256: "sha256:" + hex.EncodeToString(sum[:])}
}

func TestStoreLoadValidates(t *testing.T) {
	good := smallIndex(t).data
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Store, m Manifest)
		msg   string
	}{
		{"non-unit row", func(t *testing.T, s *Store, m Manifest) {
			d := append([]float32(nil), good...)
			d[0] = 1.001
			rewrite(t, s, m, d, nil)
		}, `row 0 (a) has norm off 1`},
		{"unit within tolerance", nil, ""},
		{"non-finite row", func(t *testing.T, s *Store, m Manifest) {
			d := append([]float32(nil), good...)
			d[5] = float32(math.NaN())
			rewrite(t, s, m, d, nil)
		}, "row 1 (b)"},
		{"zero row", func(t *testing.T, s *Store, m Manifest) {
			d := append([]float32(nil), good...)
			d[4] = 0
			d[5] = 0
			rewrite(t, s, m, d, nil)
		}, "row 1 (b) has norm off 1"},
		{"truncated vectors", func(t *testing.T, s *Store, m Manifest) {
			rewrite(t, s, m, good[:8], nil)
		}, "has 32 bytes, want 48"},
		{"vectors digest", func(t *testing.T, s *Store, m Manifest) {
			p := filepath.Join(s.Dir(), "generations", m.ID, vectorsFile)
			b, _ := os.ReadFile(p)
			copy(b[0:8], append(append([]byte{}, b[4:8]...), b[0:4]...)) // row 0 becomes (0,1,0,0): still unit
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, "digest"},
		{"dtype", func(t *testing.T, s *Store, m Manifest) {
			rewrite(t, s, m, good, func(m *Manifest) { m.DType = "float64le" })
		}, `dtype "float64le"`},
		{"manifest edited without fingerprint", func(t *testing.T, s *Store, m Manifest) {
			p := filepath.Join(s.Dir(), "generations", m.ID, manifestFile)
			b, _ := os.ReadFile(p)
			var raw map[string]any
			require.NoError(t, json.Unmarshal(b, &raw))
			raw["ids"] = []string{"a", "b", "x"}
			b, _ = json.Marshal(raw)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, "fingerprint"},
		{"reduced digest", func(t *testing.T, s *Store, m Manifest) {
			p := filepath.Join(s.Dir(), "generations", m.ID, reducedFile)
			b, _ := os.ReadFile(p)
			b[0]++
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, "vectors.i8 digest"},
		{"reduced truncated", func(t *testing.T, s *Store, m Manifest) {
			p := filepath.Join(s.Dir(), "generations", m.ID, reducedFile)
			b, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, b[:len(b)-1], 0o644))
		}, "vectors.i8 has"},
		{"reduced missing", func(t *testing.T, s *Store, m Manifest) {
			require.NoError(t, os.Remove(filepath.Join(s.Dir(), "generations", m.ID, reducedFile)))
		}, "vectors.i8"},
		{"reduced bound does not hold", func(t *testing.T, s *Store, m Manifest) {
			// A re-signed copy whose codes moved but whose bound did not.
			red := buildReduced(good, m.Dims)
			red.codes[0] -= 3
			rewrite(t, s, m, good, func(m *Manifest) {
				writeReducedFile(t, filepath.Join(s.Dir(), "generations", m.ID), red, m)
			})
		}, "row 0 (a): codes out of range or error bound"},
		{"reduced code -128", func(t *testing.T, s *Store, m Manifest) {
			red := buildReduced(good, m.Dims)
			red.codes[4], red.errs[1] = -128, 10
			rewrite(t, s, m, good, func(m *Manifest) {
				writeReducedFile(t, filepath.Join(s.Dir(), "generations", m.ID), red, m)
			})
		}, "row 1 (b): codes out of range"},
		{"reduced dtype", func(t *testing.T, s *Store, m Manifest) {
			rewrite(t, s, m, good, func(m *Manifest) { m.Reduced.DType = "int4" })
		}, `reduced copy dtype "int4"`},
		{"active names missing generation", func(t *testing.T, s *Store, m Manifest) {
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), activeFile), []byte(`{"generation":"00000000000000000000000000000000"}`), 0o644))
		}, "does not exist"},
		{"active not hex", func(t *testing.T, s *Store, m Manifest) {
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), activeFile), []byte(`{"generation":"../x"}`), 0o644))
		}, "not 32 lowercase hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), StoreOptions{})
			m := saveSmall(t, s, time.Unix(1, 0))
			if tc.setup == nil {
				d := append([]float32(nil), good...)
				d[0] = 1 + 5e-6 // inside unitNormTolerance: accepted as written
				rewrite(t, s, m, d, nil)
				idx, _, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
				require.NoError(t, err)
				assert.Equal(t, float32(1+5e-6), idx.data[0], "load must not renormalise")
				return
			}
			tc.setup(t, s, m)
			_, _, err := s.Load(Expect{CorpusDigest: testDigest, Embedder: testEmb})
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
		_, err := NewStore(data, StoreOptions{}).Save(smallIndex(t), Corpus{Digest: testDigest}, testEmb, time.Now())
		require.ErrorIs(t, err, ErrUnsafePath)
		assert.Contains(t, err.Error(), "symbolic link")
	})
	t.Run("index is a file", func(t *testing.T) {
		data := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(data, "index"), nil, 0o644))
		err := NewStore(data, StoreOptions{}).Preflight()
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
			m, err := s.Save(idx, Corpus{Digest: testDigest}, testEmb, time.Unix(int64(10+i), 0))
			if err != nil {
				saveErr = err
				return
			}
			want[m.ID] = idx.Fingerprint()
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
	assert.Empty(t, bare.CorpusSHA256)
	_, _, err = s.Generation("")
	require.ErrorIs(t, err, ErrNoCorpus)

	file := []byte(`{"id":"c","chunks":[]}` + "\n")
	m, err := s.Save(smallIndex(t), Corpus{Digest: testDigest, File: file}, testEmb, time.Unix(200, 0))
	require.NoError(t, err)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, m.CorpusSHA256)
	assert.NotEqual(t, bare.Fingerprint, m.Fingerprint, "the recorded corpus is covered by the fingerprint")
	am, path, err := s.Generation("")
	require.NoError(t, err)
	assert.Equal(t, m.ID, am.ID)
	assert.Equal(t, filepath.Join(data, "index", "generations", m.ID, corpusFile), path)
	have, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, file, have)

	// A tampered copy is refused; so is a manifest whose corpus digest was
	// edited to match it (the fingerprint no longer does).
	require.NoError(t, os.Chmod(path, 0o644))
	require.NoError(t, os.WriteFile(path, []byte(`{"id":"other"}`), 0o644))
	_, _, err = s.Generation("")
	require.ErrorIs(t, err, ErrCorrupt)
	mpath := filepath.Join(data, "index", "generations", m.ID, "manifest.json")
	var raw map[string]any
	b, err := os.ReadFile(mpath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &raw))
	raw["corpus_sha256"] = "sha256:0000"
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

	m, err := s.Save(smallIndex(t), Corpus{Digest: testDigest, File: []byte(`[]`)}, testEmb, time.Unix(100, 0))
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
	h, err := s.Save(smallIndex(t), Corpus{Digest: testDigest, File: []byte(`[]`), Retrieval: "hybrid"}, testEmb, time.Unix(100, 0))
	require.NoError(t, err)
	assert.Equal(t, "hybrid", h.Retrieval)
	assert.NotEqual(t, m.Fingerprint, h.Fingerprint)
	hm, _, err := s.Generation(h.ID)
	require.NoError(t, err)
	assert.Equal(t, "hybrid", hm.Retrieval)
	_, why, err = s.Reusable(want, 0)
	require.NoError(t, err)
	assert.Contains(t, why, "retrieves by hybrid, want vector")
	m, err = s.Save(smallIndex(t), Corpus{Digest: testDigest, File: []byte(`[]`)}, testEmb, time.Unix(100, 0))
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

	vec := filepath.Join(data, "index", "generations", m.ID, "vectors.f32")
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
