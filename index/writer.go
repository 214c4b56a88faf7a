package index

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Writer builds a new generation on disk row by row, so memory holds one
// row's vector, the ids and the scales rather than the matrix: each row is
// normalised, quantised (as NewQuantizedBuilder does) and its codes
// appended to vectors.i8 in a locked staging directory; files its reader
// adds are written there as they come (Create). Commit publishes and
// activates the generation as Save does; Abort (or a crash: RemoveStale)
// removes the staging directory. A Writer is not safe for concurrent use.
type Writer struct {
	store    *Store
	dims     int
	dir      string
	release  func()
	vec      *os.File
	vecBuf   *bufio.Writer
	vecHash  hash.Hash
	vecBytes int64
	ids      []string
	seen     map[string]int
	scales   []float32
	norm     float64
	row      []float32
	codes    []int8
	files    map[string]FileInfo
	open     *fileWriter
	done     bool
}

// NewWriter starts a generation of rows of dims components (at most
// 65,536) in a new staging directory of the store.
func (s *Store) NewWriter(dims int) (*Writer, error) {
	if dims <= 0 || dims > maxReducedDims {
		return nil, fmt.Errorf("index: a stored generation has 1 to %d dimensions, have %d", maxReducedDims, dims)
	}
	if err := s.preflight(); err != nil {
		return nil, err
	}
	gens := filepath.Join(s.root, generationsDir)
	if err := os.MkdirAll(gens, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", gens, err)
	}
	if err := s.preflight(); err != nil { // the tree may have changed under us
		return nil, err
	}
	dir, release, err := newStaging(gens)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, vectorsFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		os.RemoveAll(dir)
		release()
		return nil, fmt.Errorf("create %s: %w", vectorsFile, err)
	}
	w := &Writer{store: s, dims: dims, dir: dir, release: release, vec: f, vecHash: sha256.New(),
		seen: map[string]int{}, row: make([]float32, dims), codes: make([]int8, dims), files: map[string]FileInfo{}}
	w.vecBuf = bufio.NewWriterSize(io.MultiWriter(f, w.vecHash), 1<<20)
	return w, nil
}

// Add validates v (dims long, finite, non-zero) and appends it, normalised
// and quantised, as row id. Ids must be unique, non-empty and free of line
// breaks.
func (w *Writer) Add(id string, v []float32) error {
	switch {
	case id == "":
		return errors.New("index: empty id")
	case strings.ContainsAny(id, "\n\r"):
		return fmt.Errorf("index: row id %q holds a line break", id)
	case len(v) != w.dims:
		return fmt.Errorf("%w: row %q has %d components, index has %d", ErrDimension, id, len(v), w.dims)
	}
	if prev, ok := w.seen[id]; ok {
		return fmt.Errorf("index: duplicate id %q (rows %d and %d)", id, prev, len(w.ids))
	}
	if err := normalizeInto(w.row, v); err != nil {
		return fmt.Errorf("row %q: %w", id, err)
	}
	s, _, _ := quantizeInto(w.codes, w.row)
	return w.addQuantized(id, w.codes, s)
}

// addQuantized appends a row given as its codes and scale.
func (w *Writer) addQuantized(id string, codes []int8, s float32) error {
	for j, c := range codes {
		w.row[j] = s * float32(c)
	}
	if _, err := w.vecBuf.Write(int8Bytes(codes)); err != nil {
		return fmt.Errorf("write %s: %w", vectorsFile, err)
	}
	w.vecBytes += int64(len(codes))
	w.norm = max(w.norm, normBound(w.row))
	w.seen[id] = len(w.ids)
	w.ids = append(w.ids, id)
	w.scales = append(w.scales, s)
	return nil
}

// Create starts file name of the generation (a plain file name, none of
// its own: manifest.json, vectors.i8, ids; corpus.json is the reader's to
// write), written until the next Create or Commit; its size and digest go
// into the manifest.
func (w *Writer) Create(name string) (io.Writer, error) {
	switch {
	case name == manifestFile || name == vectorsFile || name == idsFile:
		return nil, fmt.Errorf("index: generation file %q is the index's own", name)
	case name == "" || name != filepath.Base(name) || strings.HasPrefix(name, "."):
		return nil, fmt.Errorf("index: generation file %q is not a plain file name", name)
	}
	if _, dup := w.files[name]; dup || (w.open != nil && w.open.name == name) {
		return nil, fmt.Errorf("index: generation file %q written twice", name)
	}
	if err := w.closeOpen(); err != nil {
		return nil, err
	}
	fw, err := newFileWriter(filepath.Join(w.dir, name))
	if err != nil {
		return nil, err
	}
	fw.name = name
	w.open = fw
	return fw, nil
}

// closeOpen finishes the file Create last opened.
func (w *Writer) closeOpen() error {
	if w.open == nil {
		return nil
	}
	fi, err := w.open.finish()
	w.files[w.open.name] = fi
	w.open = nil
	return err
}

// Abort removes the staging directory. It is a no-op after Commit.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.open != nil {
		w.open.f.Close()
	}
	w.vec.Close()
	os.RemoveAll(w.dir)
	w.release()
}

// Commit writes the scales, the ids and the manifest (recording the
// corpus digest and the retrieval mode, which the index stores and never
// reads: package rag names the modes, "" records none), fsyncs, publishes the generation by renaming its staging
// directory, verifies it in full (Verify) and activates it, as Save
// documents. The Writer is done either way.
func (w *Writer) Commit(corpusDigest, retrieval string, emb EmbedderInfo, now time.Time) (Manifest, error) {
	if w.done {
		return Manifest{}, errors.New("index: generation already committed or aborted")
	}
	defer w.Abort()
	if len(w.ids) == 0 {
		return Manifest{}, errors.New("index: no rows")
	}
	if err := w.closeOpen(); err != nil {
		return Manifest{}, err
	}
	if err := writeVectors(w.vecBuf, w.scales); err != nil {
		return Manifest{}, fmt.Errorf("write %s: %w", vectorsFile, err)
	}
	w.vecBytes += 4 * int64(len(w.scales))
	if err := w.vecBuf.Flush(); err != nil {
		return Manifest{}, fmt.Errorf("write %s: %w", vectorsFile, err)
	}
	if err := w.vec.Sync(); err != nil {
		return Manifest{}, fmt.Errorf("sync %s: %w", vectorsFile, err)
	}
	if err := w.vec.Close(); err != nil {
		return Manifest{}, fmt.Errorf("close %s: %w", vectorsFile, err)
	}
	w.files[vectorsFile] = FileInfo{Bytes: w.vecBytes, SHA256: "sha256:" + hex.EncodeToString(w.vecHash.Sum(nil))}
	fi, err := writeSynced(filepath.Join(w.dir, idsFile), func(out io.Writer) error {
		for _, id := range w.ids {
			if _, err := io.WriteString(out, id+"\n"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Manifest{}, err
	}
	w.files[idsFile] = fi
	id, err := newGenerationID()
	if err != nil {
		return Manifest{}, err
	}
	m := Manifest{
		Format: manifestFormat, ID: id, CreatedAt: now.UTC(), DType: dTypeQuantized,
		Count: len(w.ids), Dims: w.dims, Embedder: emb, MaxNorm: w.norm,
		CorpusDigest: corpusDigest, Retrieval: retrieval, Files: w.files,
	}
	if !(m.MaxNorm > 0) || math.IsInf(m.MaxNorm, 0) {
		return Manifest{}, fmt.Errorf("index: rows of norm %g", m.MaxNorm)
	}
	m.Fingerprint = m.computeFingerprint()
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, fmt.Errorf("encode manifest: %w", err)
	}
	if _, err := writeSynced(filepath.Join(w.dir, manifestFile), func(out io.Writer) error {
		_, err := out.Write(append(mb, '\n'))
		return err
	}); err != nil {
		return Manifest{}, err
	}
	if err := syncDir(w.dir); err != nil {
		return Manifest{}, err
	}
	gens := filepath.Join(w.store.root, generationsDir)
	if err := os.Rename(w.dir, filepath.Join(gens, id)); err != nil {
		return Manifest{}, fmt.Errorf("publish generation %s: %w", id, err)
	}
	w.done = true
	w.release()
	if err := syncDir(gens); err != nil {
		return Manifest{}, err
	}
	if _, err := w.store.Verify(id); err != nil {
		return Manifest{}, fmt.Errorf("generation %s as written: %w", id, err)
	}
	if err := w.store.activate(id); err != nil {
		return Manifest{}, err
	}
	w.store.logger.Info("generation saved", "generation", id, "rows", m.Count, "dims", m.Dims, "embedder", emb.Name, "model", emb.Model)
	return m, nil
}

// fileWriter writes one generation file, counting and hashing its bytes.
type fileWriter struct {
	name string
	f    *os.File
	buf  *bufio.Writer
	h    hash.Hash
	n    int64
}

func newFileWriter(path string) (*fileWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	fw := &fileWriter{f: f, h: sha256.New()}
	fw.buf = bufio.NewWriterSize(io.MultiWriter(f, fw.h), 1<<20)
	return fw, nil
}

func (fw *fileWriter) Write(p []byte) (int, error) {
	n, err := fw.buf.Write(p)
	fw.n += int64(n)
	return n, err
}

// finish flushes, fsyncs and closes the file.
func (fw *fileWriter) finish() (FileInfo, error) {
	path := fw.f.Name()
	if err := fw.buf.Flush(); err != nil {
		fw.f.Close()
		return FileInfo{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := fw.f.Sync(); err != nil {
		fw.f.Close()
		return FileInfo{}, fmt.Errorf("sync %s: %w", path, err)
	}
	if err := fw.f.Close(); err != nil {
		return FileInfo{}, fmt.Errorf("close %s: %w", path, err)
	}
	return FileInfo{Bytes: fw.n, SHA256: "sha256:" + hex.EncodeToString(fw.h.Sum(nil))}, nil
}
