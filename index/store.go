package index

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"
	"unsafe"
)

// Layout of a store under its data directory.
const (
	// storeDirName is the directory under the data directory that holds the
	// index: <data>/index.
	storeDirName   = "index"
	generationsDir = "generations"
	activeFile     = "active.json"
	manifestFile   = "manifest.json"
	vectorsFile    = "vectors.f32"
	reducedFile    = "vectors.i8"
	// corpusFile is the copy of the corpus file a generation records, in its
	// generation directory.
	corpusFile = "corpus.json"
	// manifestFormat is the format tag of manifest.json.
	manifestFormat = "verdryx-index/v1"
	// dTypeFloat32LE is the only vector encoding: little-endian IEEE 754
	// binary32, row-major, no header.
	dTypeFloat32LE = "float32le"
	// unitNormTolerance is how far from 1 the norm of a stored row may be.
	unitNormTolerance = 1e-5
)

// Store errors, matched with errors.Is.
var (
	// ErrNoActive reports a store without an active generation.
	ErrNoActive = errors.New("index: no active generation")
	// ErrStale reports an active generation built from another corpus or
	// with another embedder than the caller's.
	ErrStale = errors.New("index: stale generation")
	// ErrCorrupt reports a generation that fails validation.
	ErrCorrupt = errors.New("index: invalid generation")
	// ErrUnsafePath reports a store path that is a symbolic link or not a
	// directory (or, for files, not a regular file).
	ErrUnsafePath = errors.New("index: unsafe path")
	// ErrNoCorpus reports a generation that records no corpus (one saved
	// before generations recorded theirs).
	ErrNoCorpus = errors.New("index: generation records no corpus")
)

// EmbedderInfo identifies the embedder a generation was built with.
type EmbedderInfo struct {
	Name  string `json:"name"`
	Model string `json:"model"`
}

// InfoOf returns the EmbedderInfo of e.
func InfoOf(e Embedder) EmbedderInfo { return EmbedderInfo{Name: e.Name(), Model: e.Model()} }

// Corpus is what a generation records of the corpus it was built from: the
// digest its loader computed (compared by Check) and the bytes of the corpus
// file, copied into the generation as corpusFile so that the generation can
// be asked from any working directory.
type Corpus struct {
	Digest string
	File   []byte
	// Retrieval is how the generation's chunks are ranked for a question,
	// recorded as Manifest.Retrieval; the index stores it and never reads
	// it (package rag names the modes: "vector", "hybrid"). "" records
	// none, which readers take as "vector".
	Retrieval string
}

// Manifest describes one generation. Fingerprint covers every field except
// ID and CreatedAt, so two builds of the same content share a fingerprint.
type Manifest struct {
	Format       string       `json:"format"`
	ID           string       `json:"id"`
	CreatedAt    time.Time    `json:"created_at"`
	DType        string       `json:"dtype"`
	Count        int          `json:"count"`
	Dims         int          `json:"dims"`
	Embedder     EmbedderInfo `json:"embedder"`
	CorpusDigest string       `json:"corpus_digest"`
	// CorpusSHA256 is the SHA-256 of the recorded corpus file (corpusFile);
	// empty for a generation that records none.
	CorpusSHA256  string `json:"corpus_sha256,omitempty"`
	VectorsSHA256 string `json:"vectors_sha256"`
	// Reduced describes the int8 copy of the vectors (vectors.i8) that
	// single-query searches scan first; nil for a generation saved before
	// generations stored one, whose copy is rebuilt at load.
	Reduced *ReducedInfo `json:"reduced,omitempty"`
	// Retrieval is how questions rank the chunks (Corpus.Retrieval);
	// absent means "vector". Covered by the fingerprint.
	Retrieval   string   `json:"retrieval,omitempty"`
	IDs         []string `json:"ids"`
	Fingerprint string   `json:"fingerprint"`
}

// ReducedInfo names the encoding and digest of a generation's int8 copy.
type ReducedInfo struct {
	// DType is dTypeInt8RowScale.
	DType string `json:"dtype"`
	// SHA256 is "sha256:<hex>" of vectors.i8.
	SHA256 string `json:"sha256"`
}

func (m *Manifest) computeFingerprint() string {
	b, _ := json.Marshal(struct {
		Format        string       `json:"format"`
		DType         string       `json:"dtype"`
		Count         int          `json:"count"`
		Dims          int          `json:"dims"`
		Embedder      EmbedderInfo `json:"embedder"`
		CorpusDigest  string       `json:"corpus_digest"`
		CorpusSHA256  string       `json:"corpus_sha256,omitempty"`
		VectorsSHA256 string       `json:"vectors_sha256"`
		Reduced       *ReducedInfo `json:"reduced,omitempty"`
		Retrieval     string       `json:"retrieval,omitempty"`
		IDs           []string     `json:"ids"`
	}{m.Format, m.DType, m.Count, m.Dims, m.Embedder, m.CorpusDigest, m.CorpusSHA256, m.VectorsSHA256, m.Reduced, m.Retrieval, m.IDs})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Expect is what a caller requires of the active generation: the digest of
// its current corpus and the embedder it will embed queries with.
type Expect struct {
	CorpusDigest string
	Embedder     EmbedderInfo
	// Retrieval is compared by Reusable only ("" and "vector" are the
	// same); Check and Load ignore it, since a generation is asked with
	// the retrieval it records.
	Retrieval string
}

// Store persists indexes as immutable generations under <data>/index. Saves
// by concurrent writers use disjoint staging paths; the last activation wins.
// Loads never write. A Store holds no open resources.
type Store struct {
	root   string
	logger *slog.Logger
}

// StoreOptions configure a Store.
type StoreOptions struct {
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// NewStore returns the store under dataDir (it creates nothing).
func NewStore(dataDir string, opts StoreOptions) *Store {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Store{root: filepath.Join(dataDir, storeDirName), logger: logger.With("component", "index")}
}

// Dir returns <data>/index.
func (s *Store) Dir() string { return s.root }

// checkDir verifies that path, if it exists, is a real directory. It
// reports whether it exists.
func checkDir(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return false, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafePath, path)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%w: %s is not a directory", ErrUnsafePath, path)
	}
	return true, nil
}

// checkFile verifies that path is a regular file, not a symbolic link.
func checkFile(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafePath, path)
	}
	return fi, nil
}

// Preflight checks that the store's directories, where they exist, are real
// directories. Call it before paying for embeddings; Save repeats it.
func (s *Store) Preflight() error {
	for _, p := range []string{s.root, filepath.Join(s.root, generationsDir)} {
		if _, err := checkDir(p); err != nil {
			return err
		}
	}
	return nil
}

func newGenerationID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generation id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func validGenerationID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Save writes idx as a new generation and activates it, recording corpus
// (its file as corpusFile, covered by the fingerprint; nothing when
// corpus.File is nil). The files are written and fsynced in a writer-unique staging directory, locked
// for the save's life (RemoveStale removes it once no save holds it), which is fsynced,
// renamed to generations/<id> and the parent fsynced; then active.json is
// replaced by an fsynced temporary file and the index directory fsynced.
// A crash before the final rename leaves the previous generation active.
func (s *Store) Save(idx *Index, corpus Corpus, emb EmbedderInfo, now time.Time) (Manifest, error) {
	if err := s.Preflight(); err != nil {
		return Manifest{}, err
	}
	gens := filepath.Join(s.root, generationsDir)
	if err := os.MkdirAll(gens, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("create %s: %w", gens, err)
	}
	if err := s.Preflight(); err != nil { // the tree may have changed under us
		return Manifest{}, err
	}
	id, err := newGenerationID()
	if err != nil {
		return Manifest{}, err
	}
	m := Manifest{
		Format:        manifestFormat,
		ID:            id,
		CreatedAt:     now.UTC(),
		DType:         dTypeFloat32LE,
		Count:         idx.Len(),
		Dims:          idx.Dims(),
		Embedder:      emb,
		CorpusDigest:  corpus.Digest,
		VectorsSHA256: vectorsDigest(idx.data),
		Retrieval:     corpus.Retrieval,
		IDs:           idx.IDs(),
	}
	if idx.red != nil {
		h := sha256.New()
		_ = writeReduced(h, idx.red) // a hash never fails to write
		m.Reduced = &ReducedInfo{DType: dTypeInt8RowScale, SHA256: "sha256:" + hex.EncodeToString(h.Sum(nil))}
	}
	if corpus.File != nil {
		sum := sha256.Sum256(corpus.File)
		m.CorpusSHA256 = "sha256:" + hex.EncodeToString(sum[:])
	}
	m.Fingerprint = m.computeFingerprint()

	staging, release, err := newStaging(gens)
	if err != nil {
		return Manifest{}, err
	}
	published := false
	defer func() {
		if !published {
			os.RemoveAll(staging)
		}
		release()
	}()
	if err := writeSynced(filepath.Join(staging, vectorsFile), func(w io.Writer) error {
		return writeVectors(w, idx.data)
	}); err != nil {
		return Manifest{}, err
	}
	if idx.red != nil {
		if err := writeSynced(filepath.Join(staging, reducedFile), func(w io.Writer) error {
			return writeReduced(w, idx.red)
		}); err != nil {
			return Manifest{}, err
		}
	}
	if corpus.File != nil {
		if err := writeSynced(filepath.Join(staging, corpusFile), func(w io.Writer) error {
			_, err := w.Write(corpus.File)
			return err
		}); err != nil {
			return Manifest{}, err
		}
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, fmt.Errorf("encode manifest: %w", err)
	}
	if err := writeSynced(filepath.Join(staging, manifestFile), func(w io.Writer) error {
		_, err := w.Write(append(mb, '\n'))
		return err
	}); err != nil {
		return Manifest{}, err
	}
	if err := syncDir(staging); err != nil {
		return Manifest{}, err
	}
	final := filepath.Join(gens, id)
	if err := os.Rename(staging, final); err != nil {
		return Manifest{}, fmt.Errorf("publish generation %s: %w", id, err)
	}
	published = true
	if err := syncDir(gens); err != nil {
		return Manifest{}, err
	}
	if err := s.activate(id); err != nil {
		return Manifest{}, err
	}
	s.logger.Info("generation saved", "generation", id, "rows", m.Count, "dims", m.Dims, "embedder", emb.Name, "model", emb.Model)
	return m, nil
}

// activate atomically points active.json at id.
func (s *Store) activate(id string) error {
	b, _ := json.Marshal(struct {
		Generation string `json:"generation"`
	}{id})
	tmp, err := os.CreateTemp(s.root, ".active-*.tmp")
	if err != nil {
		return fmt.Errorf("create active pointer: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // no-op after the rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write active pointer: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync active pointer: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close active pointer: %w", err)
	}
	if err := os.Rename(tmpName, filepath.Join(s.root, activeFile)); err != nil {
		return fmt.Errorf("activate generation %s: %w", id, err)
	}
	return syncDir(s.root)
}

func writeSynced(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", path, err)
	}
	return nil
}

func writeVectors(w io.Writer, data []float32) error {
	buf := make([]byte, 0, 1<<16)
	for _, f := range data {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
		if len(buf) == cap(buf) {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err := w.Write(buf)
	return err
}

// writeReduced writes red in the dTypeInt8RowScale encoding: the codes,
// then the scales, then the error bounds.
func writeReduced(w io.Writer, red *reduced) error {
	if _, err := w.Write(int8Bytes(red.codes)); err != nil {
		return err
	}
	if err := writeVectors(w, red.scales); err != nil {
		return err
	}
	return writeVectors(w, red.errs)
}

// int8Bytes views codes as bytes.
func int8Bytes(codes []int8) []byte {
	if len(codes) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&codes[0])), len(codes))
}

// activeID returns the id named by active.json, or ErrNoActive.
func (s *Store) activeID() (string, error) {
	if _, err := checkDir(s.root); err != nil {
		return "", err
	}
	path := filepath.Join(s.root, activeFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w in %s", ErrNoActive, s.root)
	}
	if _, err := checkFile(path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	var p struct {
		Generation string `json:"generation"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if !validGenerationID(p.Generation) {
		return "", fmt.Errorf("%w: %s: generation %q is not 32 lowercase hex digits", ErrCorrupt, path, p.Generation)
	}
	return p.Generation, nil
}

// readManifest reads and validates the manifest of generation id (not its
// vectors).
func (s *Store) readManifest(id string) (Manifest, error) {
	dir := filepath.Join(s.root, generationsDir, id)
	ok, err := checkDir(dir)
	if err != nil {
		return Manifest{}, err
	}
	if !ok {
		return Manifest{}, fmt.Errorf("%w: generation %s does not exist", ErrCorrupt, id)
	}
	path := filepath.Join(dir, manifestFile)
	if _, err := checkFile(path); err != nil {
		return Manifest{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", path, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, path, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Format != manifestFormat:
		return Manifest{}, bad("format %q, want %q", m.Format, manifestFormat)
	case m.ID != id:
		return Manifest{}, bad("id %q does not match directory %s", m.ID, id)
	case m.DType != dTypeFloat32LE:
		return Manifest{}, bad("dtype %q, want %q", m.DType, dTypeFloat32LE)
	case m.Dims <= 0:
		return Manifest{}, bad("dims %d is not positive", m.Dims)
	case m.Count <= 0 || m.Count != len(m.IDs):
		return Manifest{}, bad("count %d does not match %d ids", m.Count, len(m.IDs))
	case m.Reduced != nil && (m.Reduced.DType != dTypeInt8RowScale || m.Reduced.SHA256 == ""):
		return Manifest{}, bad("reduced copy dtype %q, want %q with a digest", m.Reduced.DType, dTypeInt8RowScale)
	case m.Reduced != nil && m.Dims > maxReducedDims:
		return Manifest{}, bad("reduced copy of %d dims, at most %d", m.Dims, maxReducedDims)
	case m.Fingerprint != m.computeFingerprint():
		return Manifest{}, bad("fingerprint %s does not match its content", m.Fingerprint)
	}
	seen := make(map[string]bool, len(m.IDs))
	for i, rid := range m.IDs {
		if rid == "" || seen[rid] {
			return Manifest{}, bad("ids[%d] %q is empty or repeated", i, rid)
		}
		seen[rid] = true
	}
	return m, nil
}

// Check reads and validates the active generation's manifest and compares it
// with want, without reading the vectors. It returns ErrStale when the
// corpus digest or the embedder differs. Call it before any provider call.
func (s *Store) Check(want Expect) (Manifest, error) {
	id, err := s.activeID()
	if err != nil {
		return Manifest{}, err
	}
	m, err := s.readManifest(id)
	if err != nil {
		return Manifest{}, err
	}
	if m.CorpusDigest != want.CorpusDigest {
		return m, fmt.Errorf("%w: generation %s was built from corpus %s, the corpus is now %s; run verdryx index build",
			ErrStale, id, m.CorpusDigest, want.CorpusDigest)
	}
	if m.Embedder != want.Embedder {
		return m, fmt.Errorf("%w: generation %s was built with embedder %s/%s, configured is %s/%s; run verdryx index build",
			ErrStale, id, m.Embedder.Name, m.Embedder.Model, want.Embedder.Name, want.Embedder.Model)
	}
	return m, nil
}

// Reusable reports whether the active generation can stand for a new build
// of the same corpus with the same embedder: its corpus digest and embedder
// (name and model, which for the built-in embedders encodes the dimensions)
// equal want's, dims (when positive) equals its dimensions, its retrieval
// equals want's ("" meaning "vector"), it records its
// corpus file, and that file and its vectors verify (Generation, Load).
// When it cannot, why says so (no active generation, stale, corrupt, ...)
// and a new build is in order; err is only for failures to read the store
// that a new build would hit too. It never writes.
func (s *Store) Reusable(want Expect, dims int) (m Manifest, why string, err error) {
	if err := s.Preflight(); err != nil {
		return Manifest{}, "", err
	}
	if _, m, err = s.Load(want); err != nil {
		return Manifest{}, err.Error(), nil
	}
	if dims > 0 && m.Dims != dims {
		return Manifest{}, fmt.Sprintf("generation %s has %d dimensions, want %d", m.ID, m.Dims, dims), nil
	}
	if retrievalOrVector(m.Retrieval) != retrievalOrVector(want.Retrieval) {
		return Manifest{}, fmt.Sprintf("generation %s retrieves by %s, want %s", m.ID, retrievalOrVector(m.Retrieval), retrievalOrVector(want.Retrieval)), nil
	}
	if _, _, err := s.Generation(""); err != nil {
		return Manifest{}, err.Error(), nil
	}
	return m, "", nil
}

// retrievalOrVector is r, or "vector" for a generation that records none.
func retrievalOrVector(r string) string {
	if r == "" {
		return "vector"
	}
	return r
}

// Generation returns the validated manifest of generation id ("active",
// or "", for the one active.json names) and the path of the corpus file it
// records, after checking that it is a regular file whose SHA-256 is the
// one the manifest (and so its fingerprint) names: ErrNoCorpus for a
// generation that records none. An id that is
// not 32 lowercase hex digits or names no generation is ErrCorrupt,
// ErrNoActive without an active generation when the active one is asked
// for. It reads no vectors and never writes.
func (s *Store) Generation(id string) (Manifest, string, error) {
	if id == "" || id == "active" {
		var err error
		if id, err = s.activeID(); err != nil {
			return Manifest{}, "", err
		}
	} else if !validGenerationID(id) {
		return Manifest{}, "", fmt.Errorf("%w: generation %q is not 32 lowercase hex digits", ErrCorrupt, id)
	}
	m, err := s.readManifest(id)
	if err != nil {
		return Manifest{}, "", err
	}
	path, err := s.recordedCorpus(m)
	return m, path, err
}

// LoadGeneration reads the vectors of the generation m (a manifest
// Generation returned) and verifies them as Load does.
func (s *Store) LoadGeneration(m Manifest) (*Index, error) {
	return s.loadVectors(m)
}

// recordedCorpus returns the path of the corpus file generation m records,
// verified against its manifest.
func (s *Store) recordedCorpus(m Manifest) (string, error) {
	id := m.ID
	if m.CorpusSHA256 == "" {
		return "", fmt.Errorf("%w: generation %s; run verdryx index build", ErrNoCorpus, id)
	}
	path := filepath.Join(s.root, generationsDir, id, corpusFile)
	if _, err := checkFile(path); err != nil {
		return "", fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if sum := sha256.Sum256(b); "sha256:"+hex.EncodeToString(sum[:]) != m.CorpusSHA256 {
		return "", fmt.Errorf("%w: %s does not match the manifest's corpus_sha256 %s", ErrCorrupt, path, m.CorpusSHA256)
	}
	return path, nil
}

// Load validates the active generation against want (see Check), then reads
// its vectors and verifies their size, digest, finiteness and unit norm
// (within unitNormTolerance) without transforming or rewriting them.
func (s *Store) Load(want Expect) (*Index, Manifest, error) {
	m, err := s.Check(want)
	if err != nil {
		return nil, Manifest{}, err
	}
	idx, err := s.loadVectors(m)
	if err != nil {
		return nil, Manifest{}, err
	}
	return idx, m, nil
}

func (s *Store) loadVectors(m Manifest) (*Index, error) {
	path := filepath.Join(s.root, generationsDir, m.ID, vectorsFile)
	fi, err := checkFile(path)
	if err != nil {
		return nil, err
	}
	want := int64(m.Count) * int64(m.Dims) * 4
	if fi.Size() != want {
		return nil, fmt.Errorf("%w: %s has %d bytes, want %d (%d x %d float32)", ErrCorrupt, path, fi.Size(), want, m.Count, m.Dims)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	data := make([]float32, m.Count*m.Dims)
	h := sha256.New()
	r := io.TeeReader(bufio.NewReaderSize(f, 1<<20), h)
	buf := make([]byte, 4*m.Dims)
	for row := range m.Count {
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("read %s row %d: %w", path, row, err)
		}
		v := data[row*m.Dims : (row+1)*m.Dims]
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
		}
		dev, err := unitNormError(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s row %d (%s): %v", ErrCorrupt, path, row, m.IDs[row], err)
		}
		if dev > unitNormTolerance {
			return nil, fmt.Errorf("%w: %s row %d (%s) has norm off 1 by %.3g (tolerance %g)", ErrCorrupt, path, row, m.IDs[row], dev, unitNormTolerance)
		}
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != m.VectorsSHA256 {
		return nil, fmt.Errorf("%w: %s digest %s, manifest says %s", ErrCorrupt, path, got, m.VectorsSHA256)
	}
	idx := &Index{dims: m.Dims, ids: append([]string(nil), m.IDs...), data: data, kernels: kernel()}
	switch {
	case m.Reduced != nil:
		red, err := s.loadReduced(m, data)
		if err != nil {
			return nil, err
		}
		idx.red = red
	case m.Dims <= maxReducedDims:
		idx.red = buildReduced(data, m.Dims)
	}
	return idx, nil
}

// loadReduced reads the int8 copy of generation m and verifies its size,
// its digest and, row by row against data, that its codes are in range and
// its error bounds hold, so a search's intervals hold whatever wrote it.
func (s *Store) loadReduced(m Manifest, data []float32) (*reduced, error) {
	path := filepath.Join(s.root, generationsDir, m.ID, reducedFile)
	fi, err := checkFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the manifest names a reduced copy: %v", ErrCorrupt, err)
	}
	if err != nil {
		return nil, err
	}
	n, d := m.Count, m.Dims
	want := int64(n)*int64(d) + 8*int64(n)
	if fi.Size() != want {
		return nil, fmt.Errorf("%w: %s has %d bytes, want %d (%d x %d int8 and %d scales and error bounds)", ErrCorrupt, path, fi.Size(), want, n, d, n)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	red := &reduced{codes: make([]int8, n*d), scales: make([]float32, n), errs: make([]float32, n)}
	h := sha256.New()
	r := io.TeeReader(bufio.NewReaderSize(f, 1<<20), h)
	if _, err := io.ReadFull(r, int8Bytes(red.codes)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	buf := make([]byte, 4*n)
	for _, dst := range [][]float32{red.scales, red.errs} {
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != m.Reduced.SHA256 {
		return nil, fmt.Errorf("%w: %s digest %s, manifest says %s", ErrCorrupt, path, got, m.Reduced.SHA256)
	}
	for row := range n {
		v := data[row*d : (row+1)*d]
		if !verifyRow(red.codes[row*d:(row+1)*d], v, red.scales[row], red.errs[row]) {
			return nil, fmt.Errorf("%w: %s row %d (%s): codes out of range or error bound %g does not hold", ErrCorrupt, path, row, m.IDs[row], red.errs[row])
		}
		red.norm = max(red.norm, normBound(v))
	}
	return red, nil
}

// Listing describes one retained generation.
type Listing struct {
	Manifest
	// Active marks the generation active.json points at.
	Active bool
	// Err is set when the generation's manifest does not validate.
	Err error
}

// List returns the retained generations, newest first. Entries of
// generations/ that are not 32-hex directories (a staging directory and
// its lock file, see RemoveStale) are skipped.
func (s *Store) List() ([]Listing, error) {
	if err := s.Preflight(); err != nil {
		return nil, err
	}
	gens := filepath.Join(s.root, generationsDir)
	entries, err := os.ReadDir(gens)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gens, err)
	}
	active, err := s.activeID()
	if err != nil && !errors.Is(err, ErrNoActive) {
		return nil, err
	}
	var out []Listing
	for _, e := range entries {
		if !validGenerationID(e.Name()) {
			continue
		}
		m, err := s.readManifest(e.Name())
		m.ID = e.Name()
		out = append(out, Listing{Manifest: m, Active: e.Name() == active, Err: err})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Prune removes retained generations, keeping the active one and the keep
// most recent others, and any a running process holds a lease on (Lease;
// reported in Kept with why). A reader that selected a removed generation
// before the prune without a lease may fail its load.
func (s *Store) Prune(keep int) (PruneResult, error) {
	var res PruneResult
	if keep < 0 {
		return res, fmt.Errorf("index: keep must not be negative, have %d", keep)
	}
	list, err := s.List()
	if err != nil {
		return res, err
	}
	kept := 0
	for _, l := range list {
		if l.Active {
			continue
		}
		if kept < keep && l.Err == nil {
			kept++
			continue
		}
		// Re-read the pointer right before removing: never delete the
		// generation a concurrent save just activated.
		active, err := s.activeID()
		if err != nil && !errors.Is(err, ErrNoActive) {
			return res, err
		}
		if active == l.ID {
			continue
		}
		leased, err := s.removeUnleased(l.ID)
		if err != nil {
			return res, err
		}
		if leased {
			res.Kept = append(res.Kept, Kept{ID: l.ID, Reason: reasonLeased})
			s.logger.Info("generation kept", "generation", l.ID, "reason", reasonLeased)
			continue
		}
		res.Removed = append(res.Removed, l.ID)
		s.logger.Info("generation removed", "generation", l.ID)
	}
	if len(res.Removed) > 0 {
		if err := syncDir(filepath.Join(s.root, generationsDir)); err != nil {
			return res, err
		}
	}
	return res, nil
}
