package docs

import (
	"bytes"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// frontMatterLen returns the length of the front matter block that
// begins src, or 0 if there is none. Front matter (Jekyll, Hugo, MkDocs)
// is a first line of exactly "---" (YAML) or "+++" (TOML) and the lines up
// to and including the next line that is the same marker ("..." also
// closes YAML). Without a closing line, the first line is Markdown (a
// thematic break) and nothing is skipped. Front matter is metadata for a
// site generator, not text a reader asks about, so it is never chunked.
func frontMatterLen(src []byte) int {
	first, rest, ok := bytes.Cut(src, []byte("\n"))
	if !ok {
		return 0
	}
	marker := string(bytes.TrimRight(first, " \t\r"))
	if marker != "---" && marker != "+++" {
		return 0
	}
	off := len(first) + 1
	for len(rest) > 0 {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		n := len(line) + 1
		if n > len(rest) {
			n = len(rest)
		}
		l := string(bytes.TrimRight(line, " \t\r"))
		if l == marker || (marker == "---" && l == "...") {
			return off + n
		}
		off += n
		rest = next
	}
	return 0
}

// parseMarkdown parses src as CommonMark (goldmark) and returns its
// units: each heading of the document's top level, each list item of a
// top-level list and each other top-level block. A unit's span is the
// bytes from the start of its first line to the start of the next unit's
// first line (the end of src for the last), trimmed of trailing
// whitespace; so it holds the unit's markup (list markers, fences,
// quote markers) and the spans of consecutive units tile the document
// but for the whitespace between them. A block without any source
// position (a thematic break, an empty fence) joins the unit before it.
func parseMarkdown(src []byte) []unit {
	md := goldmark.New()
	doc := md.Parser().Parse(text.NewReader(src))
	var marks []unit // start set, end unset
	add := func(n ast.Node, level int, title string) {
		if s, ok := firstOffset(n, src); ok {
			marks = append(marks, unit{level: level, title: title, start: lineStart(src, s)})
		}
	}
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		switch n := n.(type) {
		case *ast.Heading:
			add(n, n.Level, plainText(n, src))
		case *ast.List:
			for item := n.FirstChild(); item != nil; item = item.NextSibling() {
				add(item, 0, "")
			}
		default:
			add(n, 0, "")
		}
	}
	units := marks[:0]
	for i, u := range marks {
		end := len(src)
		if i+1 < len(marks) {
			end = marks[i+1].start
		}
		if end < u.start { // two units on one line: keep the first
			continue
		}
		end = u.start + len(bytes.TrimRight(src[u.start:end], " \t\r\n\f\v"))
		if end <= u.start {
			continue
		}
		u.end = end
		u.text = string(src[u.start:end])
		units = append(units, u)
	}
	return units
}

// firstOffset returns the offset of the first source byte of n, found in
// document order among n and its descendants; a fenced code block starts
// on its opening fence, the line before its first content line.
func firstOffset(n ast.Node, src []byte) (int, bool) {
	if f, ok := n.(*ast.FencedCodeBlock); ok {
		if f.Info != nil {
			return f.Info.Segment.Start, true
		}
		if f.Lines().Len() > 0 {
			s := lineStart(src, f.Lines().At(0).Start)
			if s > 0 {
				return lineStart(src, s-1), true
			}
		}
		return 0, false
	}
	if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
		return n.Lines().At(0).Start, true
	}
	if t, ok := n.(*ast.Text); ok {
		return t.Segment.Start, true
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if s, ok := firstOffset(c, src); ok {
			return s, true
		}
	}
	return 0, false
}

// lineStart returns the offset of the start of the line holding offset i.
func lineStart(src []byte, i int) int {
	return bytes.LastIndexByte(src[:i], '\n') + 1
}

// plainText is the text of n's inline content without markup: text,
// code spans, link and image texts, autolink addresses; raw HTML is
// left out and line breaks become spaces.
func plainText(n ast.Node, src []byte) string {
	var b bytes.Buffer
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.AutoLink:
			b.Write(c.URL(src))
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return string(bytes.Join(bytes.Fields(b.Bytes()), []byte(" ")))
}
