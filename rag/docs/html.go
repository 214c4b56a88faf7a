package docs

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// htmlSkipped are the elements whose content is not document text.
func htmlSkipped(name string) bool {
	switch name {
	case "script", "style", "noscript", "template", "title":
		return true
	}
	return false
}

// htmlBlock reports whether an element starts and ends a block of text.
func htmlBlock(name string) bool {
	switch name {
	case "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog", "div",
		"dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "html", "li",
		"main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th",
		"thead", "tr", "ul", "head":
		return true
	}
	return false
}

// htmlHeading returns the level of h1..h6, else 0.
func htmlHeading(name string) int {
	if len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6' {
		return int(name[1] - '0')
	}
	return 0
}

// htmlParser accumulates the text of the current block while the
// tokenizer runs.
type htmlParser struct {
	units   []unit
	text    strings.Builder
	start   int // offset of the current block's first byte, -1 when none
	pending int // offset of the last block start tag, -1 when none
	end     int
	level   int // heading level of the current block
	pre     int
}

func (p *htmlParser) flush() {
	t := strings.TrimSpace(p.text.String())
	if p.pre == 0 {
		t = strings.Join(strings.Fields(t), " ")
	}
	if t != "" && p.start >= 0 {
		u := unit{level: p.level, text: t, start: p.start, end: p.end}
		if p.level > 0 {
			u.title = strings.Join(strings.Fields(t), " ")
		}
		p.units = append(p.units, u)
	}
	p.text.Reset()
	p.start, p.pending, p.level = -1, -1, 0
}

// parseHTML tokenizes src with golang.org/x/net/html and returns its text
// as units: h1..h6 are headings, block elements (p, li, td, pre, ...)
// delimit blocks, and the content of script, style, noscript, template and
// title is dropped. A unit's span runs from the start tag of the element
// its text came from (or its first text) to the end of its end tag (or
// its last text); its text is the decoded text, whitespace collapsed
// outside pre.
func parseHTML(src []byte) ([]unit, error) {
	z := html.NewTokenizer(bytes.NewReader(src))
	p := &htmlParser{start: -1, pending: -1}
	offset, skip := 0, 0
	for {
		tt := z.Next()
		tokStart := offset
		offset += len(z.Raw())
		switch tt {
		case html.ErrorToken:
			if err := z.Err(); !errors.Is(err, io.EOF) {
				return nil, err
			}
			p.flush()
			return p.units, nil
		case html.TextToken:
			if skip > 0 {
				continue
			}
			t := string(z.Text())
			if strings.TrimSpace(t) == "" {
				if p.start >= 0 {
					p.text.WriteByte(' ')
				}
				continue
			}
			if p.start < 0 {
				p.start = tokStart
				if p.pending >= 0 {
					p.start = p.pending
				}
			}
			p.text.WriteString(t)
			p.end = offset
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			n := string(name)
			if htmlSkipped(n) {
				if tt == html.StartTagToken {
					skip++
				}
				continue
			}
			if skip > 0 {
				continue
			}
			switch {
			case htmlHeading(n) > 0:
				p.flush()
				p.level, p.pending = htmlHeading(n), tokStart
			case htmlBlock(n):
				p.flush()
				p.pending = tokStart
				if n == "pre" && tt == html.StartTagToken {
					p.pre++
				}
			case n == "br" && p.start >= 0:
				p.text.WriteByte('\n')
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			n := string(name)
			if htmlSkipped(n) {
				skip = max(skip-1, 0)
				continue
			}
			if skip > 0 {
				continue
			}
			if htmlHeading(n) > 0 || htmlBlock(n) {
				if p.start >= 0 {
					p.end = offset
				}
				p.flush()
				if n == "pre" {
					p.pre = max(p.pre-1, 0)
				}
			}
		}
	}
}
