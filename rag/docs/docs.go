package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/verdryx/verdryx/rag"
)

// Defaults of Options.
const (
	// DefaultChunkTokens is the default chunk size limit in tokens.
	DefaultChunkTokens = 300
	// DefaultChunkOverlap is the default overlap between consecutive
	// chunks of a section, in tokens.
	DefaultChunkOverlap = 40
)

// ErrNotUTF8 marks a document that is not valid UTF-8.
var ErrNotUTF8 = errors.New("docs: not valid UTF-8")

// Options configure chunking.
type Options struct {
	// ChunkTokens is the most tokens (BytesPerToken bytes each) of one
	// chunk's text; at least 8.
	ChunkTokens int
	// ChunkOverlap is the most tokens a chunk repeats of the one before it
	// in the same section; 0 <= ChunkOverlap < ChunkTokens.
	ChunkOverlap int
}

// DefaultOptions returns DefaultChunkTokens and DefaultChunkOverlap.
func DefaultOptions() Options {
	return Options{ChunkTokens: DefaultChunkTokens, ChunkOverlap: DefaultChunkOverlap}
}

func (o Options) validate() error {
	if o.ChunkTokens < 8 {
		return fmt.Errorf("chunk tokens %d: want at least 8", o.ChunkTokens)
	}
	if o.ChunkOverlap < 0 || o.ChunkOverlap >= o.ChunkTokens {
		return fmt.Errorf("chunk overlap %d: want at least 0 and less than chunk tokens %d", o.ChunkOverlap, o.ChunkTokens)
	}
	return nil
}

// Kind returns the document kind a file name's extension selects
// (case-insensitively): "markdown" (.md, .markdown), "html" (.html,
// .htm), "text" (.txt), or "" for any other file.
func Kind(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown":
		return "markdown"
	case ".html", ".htm":
		return "html"
	case ".txt":
		return "text"
	}
	return ""
}

// Split parses one document (its kind chosen by Kind(source), source being
// its slash path relative to the folder) and cuts it into chunks. A
// document that is not valid UTF-8 is refused with ErrNotUTF8 naming the
// byte offset; one of no known kind is an error.
func Split(source string, src []byte, opts Options) ([]Chunk, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if !utf8.Valid(src) {
		off := 0
		for off < len(src) {
			r, n := utf8.DecodeRune(src[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return nil, fmt.Errorf("%w: %s at byte %d", ErrNotUTF8, source, off)
	}
	// A byte order mark is not text: parse after it, spans stay file offsets.
	base := 0
	if bytes.HasPrefix(src, []byte("\uFEFF")) {
		base = 3
	}
	var units []unit
	raw := true
	switch Kind(source) {
	case "markdown":
		base += frontMatterLen(src[base:])
		units = parseMarkdown(src[base:])
	case "text":
		units = parseText(src[base:])
	case "html":
		var err error
		if units, err = parseHTML(src[base:]); err != nil {
			return nil, fmt.Errorf("docs: %s: parse HTML: %w", source, err)
		}
		raw = false
	default:
		return nil, fmt.Errorf("docs: %s: not a Markdown, HTML or text file", source)
	}
	for i := range units {
		units[i].start += base
		units[i].end += base
	}
	return chunkUnits(source, src, units, raw, opts), nil
}

// File is a document read.
type File struct {
	// Source is the slash path relative to the folder.
	Source string `json:"source"`
	// Kind is markdown, html or text.
	Kind string `json:"kind"`
	// Bytes is the file's size.
	Bytes int `json:"bytes"`
	// Chunks is how many chunks it gave.
	Chunks int `json:"chunks"`
}

// Skipped is a path under the folder that was not read, and why.
type Skipped struct {
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Result is a folder read into a corpus.
type Result struct {
	// Corpus holds one entry per chunk, files in lexical path order and
	// chunks in document order.
	Corpus rag.Corpus
	// JSON is the corpus file of Corpus: rag.ParseCorpus of it equals
	// Corpus.
	JSON []byte
	// Files are the documents read, Skipped the paths that were not.
	Files   []File
	Skipped []Skipped
}

// Load reads the documents under dir (recursively; dir itself may be a
// symbolic link, nothing under it is followed) and returns their chunks as
// a corpus. Symbolic links, hidden directories (a name starting with '.'),
// files that are not regular, files of no known Kind and files whose path
// a context label cannot carry (a quote, ']' or a line break) are listed
// in Skipped. A document that is not UTF-8 or cannot be read is an error
// naming it. It only reads.
func Load(dir string, opts Options) (Result, error) {
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Result{}, fmt.Errorf("docs: %w", err)
	}
	if fi, err := os.Stat(root); err != nil {
		return Result{}, fmt.Errorf("docs: %w", err)
	} else if !fi.IsDir() {
		return Result{}, fmt.Errorf("docs: %s is not a directory", dir)
	}
	var res Result
	var chunks []sourced
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("docs: %w", err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		skip := func(reason string) error {
			res.Skipped = append(res.Skipped, Skipped{Source: rel, Reason: reason})
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return skip("symbolic link, not followed")
		case d.IsDir() && strings.HasPrefix(d.Name(), "."):
			_ = skip("hidden directory, not read")
			return fs.SkipDir
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return skip("not a regular file")
		case Kind(rel) == "":
			return skip("not .md, .markdown, .txt, .html or .htm")
		case strings.ContainsAny(rel, "'\n\r]"):
			return skip("path holds a quote, ] or line break, which a context label cannot carry")
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("docs: %w", err)
		}
		cs, err := Split(rel, src, opts)
		if err != nil {
			return err
		}
		res.Files = append(res.Files, File{Source: rel, Kind: Kind(rel), Bytes: len(src), Chunks: len(cs)})
		for _, c := range cs {
			chunks = append(chunks, sourced{rel, c})
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if len(chunks) == 0 {
		return Result{}, fmt.Errorf("docs: no text found under %s (%d documents read, %d paths skipped)", dir, len(res.Files), len(res.Skipped))
	}
	res.Corpus, res.JSON, err = buildCorpus(corpusID(root), chunks)
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// sourced is a chunk and its document.
type sourced struct {
	source string
	chunk  Chunk
}

// corpusID is the slug of the folder's base name.
func corpusID(root string) string {
	return "docs-" + slug(filepath.Base(root))
}

// sectionLabel is the heading path as a context label value: titles
// joined by " > ", with quotes, ']' and line breaks replaced (a label
// cannot carry them); nil without headings.
func sectionLabel(headings []string) any {
	if len(headings) == 0 {
		return nil
	}
	r := strings.NewReplacer("'", "\u2019", "]", ")", "\n", " ", "\r", " ")
	return r.Replace(strings.Join(headings, " > "))
}

// buildCorpus returns the corpus of chunks and its file: label fields
// source and section, source field source, one entry per chunk with id,
// text, source, section, headings and span. Ids repeated across
// documents (two paths of one slug) get "~2", "~3", ... in order. The
// entries' metadata has the types rag.ParseCorpus gives the file's
// (span numbers as json.Number, headings as []any), so the corpus equals
// the file's and has its digest without decoding it again.
func buildCorpus(id string, chunks []sourced) (rag.Corpus, []byte, error) {
	c := rag.Corpus{ID: id, LabelFields: []string{"source", "section"}, SourceField: "source", Entries: make([]rag.Entry, 0, len(chunks))}
	var b bytes.Buffer
	head, _ := json.Marshal(struct {
		ID          string   `json:"id"`
		LabelFields []string `json:"label_fields"`
		SourceField string   `json:"source_field"`
	}{c.ID, c.LabelFields, c.SourceField})
	b.Write(head[:len(head)-1])
	b.WriteString(`,"entries":[`)
	seen := make(map[string]int, len(chunks))
	for i, sc := range chunks {
		ch := sc.chunk
		cid := ch.ID
		if seen[cid] > 0 {
			for k := 2; ; k++ {
				if alt := fmt.Sprintf("%s~%d", ch.ID, k); seen[alt] == 0 {
					cid = alt
					break
				}
			}
		}
		seen[cid]++
		hs := make([]any, len(ch.Headings))
		for j, h := range ch.Headings {
			hs[j] = h
		}
		span := []any{json.Number(itoa(ch.Span[0])), json.Number(itoa(ch.Span[1]))}
		section := sectionLabel(ch.Headings)
		eb, err := json.Marshal(struct {
			ID       string `json:"id"`
			Text     string `json:"text"`
			Source   string `json:"source"`
			Section  any    `json:"section"`
			Headings []any  `json:"headings"`
			Span     []any  `json:"span"`
		}{cid, ch.Text, sc.source, section, hs, span})
		if err != nil {
			return rag.Corpus{}, nil, fmt.Errorf("docs: encode chunk %s: %w", cid, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n")
		b.Write(eb)
		c.Entries = append(c.Entries, rag.Entry{ID: cid, Text: ch.Text, Metadata: map[string]any{
			"source": sc.source, "section": section, "headings": hs, "span": span}})
	}
	b.WriteString("\n]}\n")
	return c, b.Bytes(), nil
}
