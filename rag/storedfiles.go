package rag

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/verdryx/verdryx/index"
)

// The files a generation keeps beside its corpus.json (written through index.Writer.Create).
const (
	// chunksFile locates each entry in corpus.json (chunksMagic).
	chunksFile = "chunks.idx"
	// bm25File holds the BM25 statistics of the search texts (bm25Magic).
	bm25File = "bm25.bin"
)

// chunksMagic opens chunksFile: then a uint32 length and that many bytes
// of JSON (the corpus's id and citation schema, and every metadata key of
// some entry: chunksHeader), a uint32 entry count n and n pairs of a
// uint64 offset and a uint32 length, the bytes of each entry's JSON object
// in corpus.json, all little-endian.
const chunksMagic = "VXCHNK1\n"

// chunksHeader is what chunksFile records of the corpus besides where its
// entries are.
type chunksHeader struct {
	ID           string              `json:"id"`
	LabelFields  []string            `json:"label_fields"`
	SourceField  string              `json:"source_field"`
	SubjectField string              `json:"subject_field,omitempty"`
	Units        map[string][]string `json:"units,omitempty"`
	MetaKeys     []string            `json:"meta_keys"`
}

// span is where one entry's JSON object lies in corpus.json.
type span struct {
	off int64
	n   uint32
}

// storedChunks reads entries of a generation's corpus.json where its
// chunksFile says they are, opening the file for each read (so a pipeline
// holds no descriptor and a removed generation's space is freed).
type storedChunks struct {
	path   string
	spans  []span
	schema Corpus   // citation schema only, to validate entries
	ids    []string // the index's, by row
}

func (s *storedChunks) entry(row int) (Entry, error) {
	sp := s.spans[row]
	f, err := os.Open(s.path)
	if err != nil {
		return Entry{}, fmt.Errorf("read chunk %d: %w", row, err)
	}
	defer f.Close()
	b := make([]byte, sp.n)
	if _, err := f.ReadAt(b, sp.off); err != nil {
		return Entry{}, fmt.Errorf("read chunk %d of %s: %w", row, s.path, err)
	}
	e, err := parseEntry(b, s.schema)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %s entries[%d]: %v", index.ErrCorrupt, s.path, row, err)
	}
	if e.ID != s.ids[row] {
		return Entry{}, fmt.Errorf("%w: %s entries[%d] is %q, index row %d is %q", index.ErrCorrupt, s.path, row, e.ID, row, s.ids[row])
	}
	return e, nil
}

// readChunks reads a chunksFile: the corpus schema, its metadata keys and
// the entries' spans, each inside a file of corpusSize bytes.
func readChunks(path string, corpusSize int64, rows int) (Corpus, map[string]bool, []span, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Corpus{}, nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	bad := func(what string) error { return fmt.Errorf("%w: %s: %s", index.ErrCorrupt, path, what) }
	r := reader{b: b}
	if err := checkMagic(b, chunksMagic); err != nil {
		return Corpus{}, nil, nil, bad(err.Error())
	}
	r.next(len(chunksMagic))
	var h chunksHeader
	if hdr := r.next(int(r.u32())); r.err != nil || json.Unmarshal(hdr, &h) != nil {
		return Corpus{}, nil, nil, bad("corpus schema does not decode")
	}
	n := int(r.u32())
	if r.err != nil || n != rows || len(b)-r.off != 12*n {
		return Corpus{}, nil, nil, bad(fmt.Sprintf("%d entries in %d bytes for %d rows", n, len(b)-r.off, rows))
	}
	spans := make([]span, n)
	for i := range spans {
		spans[i] = span{off: int64(r.u64()), n: r.u32()}
		if spans[i].off < 0 || spans[i].off+int64(spans[i].n) > corpusSize {
			return Corpus{}, nil, nil, bad(fmt.Sprintf("entry %d lies outside corpus.json", i))
		}
	}
	keys := make(map[string]bool, len(h.MetaKeys))
	for _, k := range h.MetaKeys {
		keys[k] = true
	}
	c := Corpus{ID: h.ID, LabelFields: h.LabelFields, SourceField: h.SourceField, SubjectField: h.SubjectField, Units: h.Units}
	return c, keys, spans, nil
}
