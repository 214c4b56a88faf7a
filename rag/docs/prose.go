package docs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"

	"github.com/verdryx/verdryx/rag"
)

// Prose returns, for each entry of c cut from a Markdown document (its
// "source" a Markdown path and its "span" the bytes its text covers, as
// Walk writes them), the byte ranges [start, end) of its text that are
// prose: the text of paragraphs, list items and block quotes, link texts
// included. Headings, fenced and indented code (console output too), HTML
// blocks, inline code spans, images, autolinks, raw HTML and what an HTML
// caption element (<figcaption>, <caption>, a class naming "caption")
// encloses are not prose, and neither is a caption paragraph (one whose
// text opens with Listing, Figure, Table, Example ... and a number:
// "Listing 2-1: ..."). Entries of other kinds, or without a usable span,
// are absent: their whole text is theirs to read.
//
// The chunks of one document are put back at their spans (the bytes no
// chunk holds become line breaks: they are whitespace between blocks, a
// heading alone or front matter) and parsed once with goldmark, so a
// chunk that starts inside a code block is still read as code.
func Prose(c rag.Corpus) map[string][][2]int {
	type placed struct {
		id         string
		text       string
		start, end int
	}
	bySource := map[string][]placed{}
	var order []string
	for _, e := range c.Entries {
		src, _ := e.Metadata["source"].(string)
		if Kind(src) != "markdown" {
			continue
		}
		s, end, ok := spanOf(e.Metadata["span"])
		if !ok || end-s != len(e.Text) {
			continue
		}
		if _, seen := bySource[src]; !seen {
			order = append(order, src)
		}
		bySource[src] = append(bySource[src], placed{e.ID, e.Text, s, end})
	}
	out := map[string][][2]int{}
	for _, src := range order {
		ps := bySource[src]
		size := 0
		for _, p := range ps {
			size = max(size, p.end)
		}
		doc := bytes.Repeat([]byte{'\n'}, size)
		for _, p := range ps {
			copy(doc[p.start:p.end], p.text)
		}
		segs := proseSegments(doc)
		for _, p := range ps {
			var rs [][2]int
			for _, sg := range segs {
				s, e := max(sg[0], p.start), min(sg[1], p.end)
				if s < e {
					rs = append(rs, [2]int{s - p.start, e - p.start})
				}
			}
			out[p.id] = rs
		}
	}
	return out
}

// spanOf reads a span metadata value: two integers, as Load writes them
// (json.Number) or as a decoder gives them (int64, float64).
func spanOf(v any) (int, int, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return 0, 0, false
	}
	var n [2]int
	for i, x := range arr {
		switch x := x.(type) {
		case json.Number:
			k, err := strconv.Atoi(x.String())
			if err != nil {
				return 0, 0, false
			}
			n[i] = k
		case int64:
			n[i] = int(x)
		case float64:
			n[i] = int(x)
		case int:
			n[i] = x
		default:
			return 0, 0, false
		}
	}
	return n[0], n[1], n[0] >= 0 && n[0] <= n[1]
}

// proseSegments returns the prose ranges of a Markdown document (see
// Prose), in order, adjacent text runs separated only by white space
// joined.
func proseSegments(src []byte) [][2]int {
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	var segs [][2]int
	add := func(s, e int) {
		if s >= e {
			return
		}
		if n := len(segs); n > 0 && s >= segs[n-1][1] && len(bytes.TrimSpace(src[segs[n-1][1]:s])) == 0 {
			segs[n-1][1] = e
			return
		}
		segs = append(segs, [2]int{s, e})
	}
	var block func(n ast.Node)
	block = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c.(type) {
			case *ast.Paragraph, *ast.TextBlock:
				if !caption(plainText(c, src)) {
					inline(c, src, add)
				}
			case *ast.Blockquote, *ast.List, *ast.ListItem:
				block(c)
			}
		}
	}
	block(doc)
	slices.SortFunc(segs, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	return segs
}

// inline adds the text runs of block n's inline content that are prose.
func inline(n ast.Node, src []byte, add func(s, e int)) {
	inCaption := false
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.CodeSpan, *ast.Image, *ast.AutoLink:
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			var raw []byte
			for i := 0; i < c.Segments.Len(); i++ {
				seg := c.Segments.At(i)
				raw = append(raw, seg.Value(src)...)
			}
			switch tag := strings.ToLower(string(raw)); {
			case strings.HasPrefix(tag, "</"):
				inCaption = false
			case strings.Contains(tag, "caption"):
				inCaption = true
			}
			return ast.WalkSkipChildren, nil
		case *ast.Text:
			if !inCaption {
				add(c.Segment.Start, c.Segment.Stop)
			}
		}
		return ast.WalkContinue, nil
	})
}

// captionWords open a caption paragraph when a number follows them.
var captionWords = map[string]bool{
	"listing": true, "figure": true, "fig": true, "table": true, "example": true, "exhibit": true,
	"diagram": true, "chart": true, "illustration": true, "plate": true, "snippet": true,
}

// caption reports whether a paragraph's plain text is a caption: a
// caption word, then a label holding a digit ("2-1", "4", "A.3"), then
// ':', '.', a dash or nothing.
func caption(t string) bool {
	f := strings.Fields(t)
	if len(f) < 2 || !captionWords[strings.ToLower(strings.TrimSuffix(f[0], "."))] {
		return false
	}
	label := strings.TrimRight(f[1], ":.")
	if !strings.ContainsFunc(label, unicode.IsDigit) {
		return false
	}
	rest := f[1][len(label):]
	return rest != "" || len(f) == 2 || f[2] == "-" || f[2] == "\u2013" || f[2] == "\u2014"
}
