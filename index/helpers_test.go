package index

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"
)

// quantized reports whether the index keeps only its int8 copy.
func (x *Index) quantized() bool { return x.data == nil }

// row returns a copy of row i.
func (x *Index) row(i int) []float32 {
	defer runtime.KeepAlive(x) // x owns the rows (see Store.LoadGeneration)
	return append([]float32(nil), x.rowOf(i, make([]float32, x.dims))...)
}

// save writes idx as a new generation (through a Writer, row by row) and
// activates it, recording corpus (its file as corpusFile and its Files
// beside it, covered by the fingerprint; no corpus file when corpus.File
// is nil). The rows are stored as their int8 copy (dTypeQuantized): a
// quantized idx exactly, a float32 one as its quantisation. The files are
// written and fsynced in a writer-unique staging directory, locked for the
// save's life (RemoveStale removes it once no save holds it), which is
// fsynced, renamed to generations/<id> and the parent fsynced; the
// generation is then read back and verified in full (Verify) and only
// then is active.json replaced by an fsynced temporary file and the index
// directory fsynced. A crash before the final rename leaves the previous
// generation active.
func (s *Store) save(idx *Index, corpus savedCorpus, emb EmbedderInfo, now time.Time) (Manifest, error) {
	if idx.red == nil {
		return Manifest{}, fmt.Errorf("index: a stored generation has at most %d dimensions, have %d", maxReducedDims, idx.Dims())
	}
	w, err := s.NewWriter(idx.dims)
	if err != nil {
		return Manifest{}, err
	}
	defer w.Abort()
	d := idx.dims
	for r, id := range idx.ids {
		if strings.ContainsAny(id, "\n\r") {
			return Manifest{}, fmt.Errorf("index: row id %q holds a line break", id)
		}
		if err := w.addQuantized(id, idx.red.codes[r*d:(r+1)*d], idx.red.scales[r]); err != nil {
			return Manifest{}, err
		}
	}
	runtime.KeepAlive(idx)
	files := maps.Clone(corpus.Files)
	if corpus.File != nil {
		if files == nil {
			files = map[string][]byte{}
		}
		files[corpusFile] = corpus.File
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fw, err := w.Create(name)
		if err != nil {
			return Manifest{}, err
		}
		if _, err := fw.Write(files[name]); err != nil {
			return Manifest{}, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return w.Commit(corpus.Digest, corpus.Retrieval, emb, now)
}

// savedCorpus is what save records of the corpus a generation was built
// from: the digest its loader computed (compared by Check), the bytes of
// the corpus file, copied into the generation as corpusFile, and any files
// its reader keeps beside it (package rag writes them through a Writer).
type savedCorpus struct {
	Digest string
	File   []byte
	// Files are more files of the generation, by name (a plain file name,
	// none of the generation's own: manifest.json, vectors.i8, ids,
	// corpus.json); each is covered by the fingerprint like the others.
	Files map[string][]byte
	// Retrieval is how the generation's chunks are ranked for a question,
	// recorded as Manifest.Retrieval; the index stores it and never reads
	// it (package rag names the modes: "vector", "hybrid"). "" records
	// none, which readers take as "vector".
	Retrieval string
}
