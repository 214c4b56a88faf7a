package docs

import (
	"bytes"
	"errors"
	"fmt"
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

// Result is a folder read: its documents and the paths skipped.
type Result struct {
	// Corpus holds one entry per chunk, files in lexical path order and
	// chunks in document order, when a caller collects them; Walk leaves
	// it empty (it streams them).
	Corpus rag.Corpus
	// Files are the documents read, Skipped the paths that were not.
	Files   []File
	Skipped []Skipped
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
