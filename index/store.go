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
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
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
	// vectorsFile holds the rows in dTypeQuantized.
	vectorsFile = "vectors.i8"
	// idsFile holds the row ids, one a line, each ending in a newline.
	idsFile = "ids"
	// corpusFile is the copy of the corpus file a generation records, in its
	// generation directory.
	corpusFile = "corpus.json"
	// manifestFormat is the format tag of manifest.json.
	manifestFormat = "verdryx-index/v2"
	// dTypeQuantized is the only vector encoding: all rows' int8 codes
	// (dims a row, row-major), then every row's little-endian float32
	// scale; row r is float32(scale[r]*code[r][j]) component by component.
	dTypeQuantized = "int8-rowscale-v2"
)

// Errors, matched with errors.Is.
var (
	// ErrDimension reports a vector whose length differs from the index's.
	ErrDimension = errors.New("index: dimension mismatch")
	// ErrNonFinite reports a NaN or infinite component.
	ErrNonFinite = errors.New("index: non-finite value")
	// ErrZeroVector reports a vector with zero norm, which has no direction.
	ErrZeroVector = errors.New("index: zero vector")
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

// FileInfo is what a manifest records of one file of its generation.
type FileInfo struct {
	// Bytes is the file's size, checked on every open.
	Bytes int64 `json:"bytes"`
	// SHA256 is "sha256:<hex>" of the file, checked by Verify.
	SHA256 string `json:"sha256"`
}

// Manifest describes one generation. Fingerprint covers every field except
// ID and CreatedAt, so two builds of the same content share a fingerprint;
// through Files it covers every byte of the generation.
type Manifest struct {
	Format    string       `json:"format"`
	ID        string       `json:"id"`
	CreatedAt time.Time    `json:"created_at"`
	DType     string       `json:"dtype"`
	Count     int          `json:"count"`
	Dims      int          `json:"dims"`
	Embedder  EmbedderInfo `json:"embedder"`
	// MaxNorm bounds the L2 norm of every row from above.
	MaxNorm      float64 `json:"max_norm"`
	CorpusDigest string  `json:"corpus_digest"`
	// Retrieval is how questions rank the chunks (Corpus.Retrieval);
	// absent means "vector". Covered by the fingerprint.
	Retrieval string `json:"retrieval,omitempty"`
	// Files names every file of the generation but the manifest: vectors.i8,
	// ids, corpus.json when it records a corpus, and Corpus.Files.
	Files       map[string]FileInfo `json:"files"`
	Fingerprint string              `json:"fingerprint"`
}

func (m *Manifest) computeFingerprint() string {
	c := *m
	c.ID, c.CreatedAt, c.Fingerprint = "", time.Time{}, ""
	b, _ := json.Marshal(c) // map keys are sorted: the encoding is canonical
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

// preflight checks that the store's directories, where they exist, are real
// directories. Call it before paying for embeddings; Save repeats it.
func (s *Store) preflight() error {
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

// writeSynced creates path (which must not exist), writes it with write,
// fsyncs and closes it, and returns its size and digest.
func writeSynced(path string, write func(io.Writer) error) (FileInfo, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return FileInfo{}, fmt.Errorf("create %s: %w", path, err)
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return FileInfo{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return FileInfo{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return FileInfo{}, fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return FileInfo{}, fmt.Errorf("close %s: %w", path, err)
	}
	return FileInfo{Bytes: cw.n, SHA256: "sha256:" + hex.EncodeToString(h.Sum(nil))}, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
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

// writeQuantized writes red in dTypeQuantized: the codes, then the scales.
func writeQuantized(w io.Writer, red *reduced) error {
	if _, err := w.Write(int8Bytes(red.codes)); err != nil {
		return err
	}
	return writeVectors(w, red.scales)
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

// readManifest reads and validates the manifest of generation id and
// checks that every file it names is a regular file of the size it records
// (what is cheap; Verify reads them).
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
		return Manifest{}, bad("format %q, want %q (rebuild with verdryx index build)", m.Format, manifestFormat)
	case m.ID != id:
		return Manifest{}, bad("id %q does not match directory %s", m.ID, id)
	case m.DType != dTypeQuantized:
		return Manifest{}, bad("dtype %q, want %q", m.DType, dTypeQuantized)
	case m.Dims <= 0 || m.Dims > maxReducedDims:
		return Manifest{}, bad("dims %d is not in [1, %d]", m.Dims, maxReducedDims)
	case m.Count <= 0:
		return Manifest{}, bad("count %d is not positive", m.Count)
	case !(m.MaxNorm > 0) || math.IsInf(m.MaxNorm, 0):
		return Manifest{}, bad("max_norm %g is not a positive number", m.MaxNorm)
	case m.Fingerprint != m.computeFingerprint():
		return Manifest{}, bad("fingerprint %s does not match its content", m.Fingerprint)
	}
	for _, name := range []string{vectorsFile, idsFile} {
		if _, ok := m.Files[name]; !ok {
			return Manifest{}, bad("names no %s", name)
		}
	}
	if size := int64(m.Count) * (int64(m.Dims) + 4); m.Files[vectorsFile].Bytes != size {
		return Manifest{}, bad("%s of %d bytes, want %d (%d rows of %d int8 codes and a float32 scale)", vectorsFile, m.Files[vectorsFile].Bytes, size, m.Count, m.Dims)
	}
	for name, f := range m.Files {
		if name == "" || name != filepath.Base(name) || name == manifestFile {
			return Manifest{}, bad("file name %q", name)
		}
		fpath := filepath.Join(dir, name)
		fi, err := checkFile(fpath)
		if err != nil {
			return Manifest{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if fi.Size() != f.Bytes {
			return Manifest{}, fmt.Errorf("%w: %s has %d bytes, the manifest says %d", ErrCorrupt, fpath, fi.Size(), f.Bytes)
		}
	}
	return m, nil
}

// Verify reads every file of generation id ("active" or "" for the active
// one) in full: each must have the digest its manifest records, the ids
// must be Count distinct non-empty lines, every code in [-127, 127], every
// scale finite and not negative, and no row's norm above MaxNorm. It is
// what a save checks before activation and `verdryx index verify` runs;
// opening a generation checks only sizes and the manifest. It never writes.
func (s *Store) Verify(id string) (Manifest, error) {
	if id == "" || id == "active" {
		var err error
		if id, err = s.activeID(); err != nil {
			return Manifest{}, err
		}
	} else if !validGenerationID(id) {
		return Manifest{}, fmt.Errorf("%w: generation %q is not 32 lowercase hex digits", ErrCorrupt, id)
	}
	m, err := s.readManifest(id)
	if err != nil {
		return Manifest{}, err
	}
	dir := filepath.Join(s.root, generationsDir, id)
	for _, name := range slices.Sorted(maps.Keys(m.Files)) {
		path := filepath.Join(dir, name)
		f, err := os.Open(path)
		if err != nil {
			return m, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return m, fmt.Errorf("read %s: %w", path, err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != m.Files[name].SHA256 {
			return m, fmt.Errorf("%w: %s digest %s, the manifest says %s", ErrCorrupt, path, got, m.Files[name].SHA256)
		}
	}
	idx, err := s.LoadGeneration(m)
	if err != nil {
		return m, err
	}
	seen := make(map[string]bool, len(idx.ids))
	for r, rid := range idx.ids {
		if rid == "" || seen[rid] {
			return m, fmt.Errorf("%w: %s line %d: id %q is empty or repeated", ErrCorrupt, filepath.Join(dir, idsFile), r+1, rid)
		}
		seen[rid] = true
	}
	red, d := idx.red, m.Dims
	row := make([]float32, d)
	vpath := filepath.Join(dir, vectorsFile)
	for r, sc := range red.scales {
		if math.IsNaN(float64(sc)) || math.IsInf(float64(sc), 0) || sc < 0 {
			return m, fmt.Errorf("%w: %s row %d (%s): scale %g", ErrCorrupt, vpath, r, idx.ids[r], sc)
		}
		if slices.Contains(red.codes[r*d:(r+1)*d], -128) {
			return m, fmt.Errorf("%w: %s row %d (%s): a code of -128", ErrCorrupt, vpath, r, idx.ids[r])
		}
		if n := normBound(idx.rowOf(r, row)); n > m.MaxNorm {
			return m, fmt.Errorf("%w: %s row %d (%s): norm up to %g, above max_norm %g", ErrCorrupt, vpath, r, idx.ids[r], n, m.MaxNorm)
		}
	}
	runtime.KeepAlive(idx)
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
	if err := s.preflight(); err != nil {
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
	if _, err := s.Verify(m.ID); err != nil {
		return Manifest{}, err.Error(), nil
	}
	if _, ok := m.Files[corpusFile]; !ok {
		return Manifest{}, fmt.Errorf("%w: generation %s", ErrNoCorpus, m.ID).Error(), nil
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

// LoadGeneration reads the ids and vectors of generation m (a manifest
// Generation, Check or List returned) into a quantized Index, checking
// sizes and the ids' count, not digests (see Verify). It never writes.
func (s *Store) LoadGeneration(m Manifest) (*Index, error) {
	dir := filepath.Join(s.root, generationsDir, m.ID)
	ids, err := readIDs(filepath.Join(dir, idsFile), m.Count)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, vectorsFile)
	b, release, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	n, d := m.Count, m.Dims
	if int64(len(b)) != int64(n)*(int64(d)+4) {
		release()
		return nil, fmt.Errorf("%w: %s has %d bytes, want %d", ErrCorrupt, path, len(b), int64(n)*(int64(d)+4))
	}
	codes := unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), n*d)
	scales := make([]float32, n)
	for r, off := 0, n*d; r < n; r, off = r+1, off+4 {
		scales[r] = math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
	}
	x := newQuantized(d, ids, codes, scales, m.MaxNorm)
	// The codes are the mapping: it goes when the index does. Every
	// method reading them keeps x alive while it does (runtime.KeepAlive).
	runtime.AddCleanup(x, func(f func()) { f() }, release)
	return x, nil
}

// readIDs reads an ids file of want lines.
func readIDs(path string, want int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	text := unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("%w: %s does not end in a newline", ErrCorrupt, path)
	}
	ids := strings.Split(text[:len(text)-1], "\n")
	if len(ids) != want {
		return nil, fmt.Errorf("%w: %s has %d ids, the manifest says %d", ErrCorrupt, path, len(ids), want)
	}
	return ids, nil
}

// File returns the path of file name of generation m (one of m.Files),
// after checking its size, not its digest (see Verify).
func (s *Store) File(m Manifest, name string) (string, error) {
	f, ok := m.Files[name]
	if !ok {
		return "", fmt.Errorf("%w: generation %s has no file %q; rebuild with verdryx index build", ErrCorrupt, m.ID, name)
	}
	path := filepath.Join(s.root, generationsDir, m.ID, name)
	fi, err := checkFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if fi.Size() != f.Bytes {
		return "", fmt.Errorf("%w: %s has %d bytes, the manifest says %d", ErrCorrupt, path, fi.Size(), f.Bytes)
	}
	return path, nil
}

// recordedCorpus returns the path of the corpus file generation m records,
// its size checked (Verify checks its digest).
func (s *Store) recordedCorpus(m Manifest) (string, error) {
	if _, ok := m.Files[corpusFile]; !ok {
		return "", fmt.Errorf("%w: generation %s; run verdryx index build", ErrNoCorpus, m.ID)
	}
	return s.File(m, corpusFile)
}

// Load validates the active generation against want (see Check), then
// reads its ids and vectors (LoadGeneration).
func (s *Store) Load(want Expect) (*Index, Manifest, error) {
	m, err := s.Check(want)
	if err != nil {
		return nil, Manifest{}, err
	}
	idx, err := s.LoadGeneration(m)
	if err != nil {
		return nil, Manifest{}, err
	}
	return idx, m, nil
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
	if err := s.preflight(); err != nil {
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
