package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/verdryx/verdryx/rag"
)

// PartBytes is the size past which a Markdown or text document is read and
// parsed a part at a time rather than whole, so memory holds a part and
// its parse, not the document's: a part ends before the first line at or
// after PartBytes that begins a heading (ATX, outside a fenced block), or,
// past 4*PartBytes, a blank line outside a fenced block, or, past
// 16*PartBytes, any line. A section cut where a part ends (no heading
// there) continues as "<its key>~2".
const PartBytes = 4 << 20

// Walker reads a folder of documents into corpus entries one chunk at a
// time (Walk), holding one document (or one part of a large one) in
// memory, never the corpus.
type Walker struct {
	root string
	dir  string
	opts Options
}

// NewWalker returns the walker of the documents under dir (which may be a
// symbolic link; nothing under it is followed).
func NewWalker(dir string, opts Options) (*Walker, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("docs: %s is not a directory", dir)
	}
	return &Walker{root: root, dir: dir, opts: opts}, nil
}

// Schema returns the corpus the folder's entries belong to, without
// entries: id "docs-<folder slug>", label fields source and section,
// source field source.
func (w *Walker) Schema() rag.Corpus {
	return rag.Corpus{ID: corpusID(w.root), LabelFields: []string{"source", "section"}, SourceField: "source"}
}

// Walk reads the documents (files in lexical path order, chunks in
// document order) and calls fn with each chunk's entry, in order; an
// error from fn stops the walk and is returned. Symbolic links, hidden
// directories (a name starting with '.'), files that are not regular,
// files of no known Kind and files whose path a context label cannot
// carry (a quote, ']' or a line break) are listed in Skipped. A document
// that is not UTF-8 or cannot be read is an error naming it. It only
// reads. Entry ids are unique across the folder: an id repeated by a
// later document (two paths of one slug) gets "~2", "~3", ... Metadata
// has the types rag.ParseCorpus gives (span numbers as json.Number,
// headings as []any).
func (w *Walker) Walk(fn func(rag.Entry) error) (Result, error) {
	var res Result
	seen := map[string]int{}
	chunks := 0
	err := filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("docs: %w", err)
		}
		if p == w.root {
			return nil
		}
		rel, err := filepath.Rel(w.root, p)
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
		file := File{Source: rel, Kind: Kind(rel)}
		err = readDocument(p, rel, w.opts, PartBytes, func(c Chunk) error {
			file.Chunks++
			chunks++
			return fn(entryOf(rel, c, seen))
		}, &file.Bytes)
		if err != nil {
			return err
		}
		res.Files = append(res.Files, file)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if chunks == 0 {
		return Result{}, fmt.Errorf("docs: no text found under %s (%d documents read, %d paths skipped)", w.dir, len(res.Files), len(res.Skipped))
	}
	return res, nil
}

// entryOf is the corpus entry of chunk c of document source, its id made
// unique among those seen (which it joins).
func entryOf(source string, c Chunk, seen map[string]int) rag.Entry {
	cid := c.ID
	if seen[cid] > 0 {
		for k := 2; ; k++ {
			if alt := fmt.Sprintf("%s~%d", c.ID, k); seen[alt] == 0 {
				cid = alt
				break
			}
		}
	}
	seen[cid]++
	hs := make([]any, len(c.Headings))
	for j, h := range c.Headings {
		hs[j] = h
	}
	span := []any{json.Number(itoa(c.Span[0])), json.Number(itoa(c.Span[1]))}
	return rag.Entry{ID: cid, Text: c.Text, Metadata: map[string]any{
		"source": source, "section": sectionLabel(c.Headings), "headings": hs, "span": span}}
}

// readDocument reads the document at path (source, its slash path) and
// emits its chunks, counting its bytes into size: whole, or a part at a
// time (readParts, parts of partBytes) when it is Markdown or text of more
// than partBytes.
func readDocument(path, source string, opts Options, partBytes int, emit func(Chunk) error, size *int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("docs: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("docs: %w", err)
	}
	kind := Kind(source)
	if fi.Size() <= int64(partBytes) || kind == "html" {
		src, err := io.ReadAll(f)
		if err != nil {
			return fmt.Errorf("docs: %w", err)
		}
		*size = len(src)
		cs, err := Split(source, src, opts)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	}
	ch := newChunker(source, opts)
	return readParts(f, partBytes, func(part []byte, base int) error {
		*size = base + len(part)
		if !utf8.Valid(part) {
			off := 0
			for off < len(part) {
				r, n := utf8.DecodeRune(part[off:])
				if r == utf8.RuneError && n <= 1 {
					break
				}
				off += n
			}
			return fmt.Errorf("%w: %s at byte %d", ErrNotUTF8, source, base+off)
		}
		skip := 0
		if base == 0 {
			if bytes.HasPrefix(part, []byte("\uFEFF")) {
				skip = 3
			}
			if kind == "markdown" {
				skip += frontMatterLen(part[skip:])
			}
		}
		var units []unit
		if kind == "markdown" {
			units = parseMarkdown(part[skip:])
		} else {
			units = parseText(part[skip:])
		}
		for i := range units {
			units[i].start += skip
			units[i].end += skip
		}
		return ch.add(part, base, units, true, emit)
	})
}

// readParts reads r a line at a time into parts (as PartBytes describes,
// for parts of partBytes) and calls fn with each part and its offset.
func readParts(r io.Reader, partBytes int, fn func(part []byte, base int) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	var part []byte
	base := 0
	var fence []byte // the open fence's marker run, nil outside a fence
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: read the rest of it.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("docs: read: %w", err)
		}
		if len(line) > 0 {
			cut := false
			if fence == nil && len(part) >= partBytes {
				switch {
				case isATXHeading(line):
					cut = true
				case len(part) >= 4*partBytes && len(bytes.TrimSpace(line)) == 0:
					cut = true
				case len(part) >= 16*partBytes:
					cut = true
				}
			} else if len(part) >= 16*partBytes {
				cut = true
			}
			if cut {
				if err := fn(part, base); err != nil {
					return err
				}
				base += len(part)
				part = part[:0]
			}
			fence = fenceAfter(fence, line)
			part = append(part, line...)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(part) > 0 {
		return fn(part, base)
	}
	return nil
}

// isATXHeading reports whether line opens an ATX heading: up to three
// spaces, one to six '#', then a space, a tab or the line's end.
func isATXHeading(line []byte) bool {
	i := 0
	for i < 3 && i < len(line) && line[i] == ' ' {
		i++
	}
	n := 0
	for i+n < len(line) && line[i+n] == '#' {
		n++
	}
	if n == 0 || n > 6 {
		return false
	}
	return i+n == len(line) || line[i+n] == ' ' || line[i+n] == '\t' || line[i+n] == '\n' || line[i+n] == '\r'
}

// fenceAfter returns the fence open after line, given the one open before
// (nil for none): a line of up to three spaces and three or more '`' or
// '~' opens one; a line of at least as many of the same character and
// nothing else closes it.
func fenceAfter(open []byte, line []byte) []byte {
	t := bytes.TrimRight(line, " \t\r\n")
	i := 0
	for i < 3 && i < len(t) && t[i] == ' ' {
		i++
	}
	t = t[i:]
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return open
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 {
		return open
	}
	if open == nil {
		if t[0] == '`' && bytes.IndexByte(t[n:], '`') >= 0 {
			return nil // an info string with a backtick: not a fence
		}
		return bytes.Repeat(t[:1], n)
	}
	if t[0] == open[0] && n >= len(open) && n == len(t) {
		return nil
	}
	return open
}
