package docs

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// BytesPerToken is the approximation by which chunk sizes are counted:
// a token is 4 bytes of UTF-8 text (OpenAI's rule of thumb for English),
// so --chunk-tokens 300 allows 1,200 bytes of chunk text.
const BytesPerToken = 4

// unit is one parsed element of a document: a heading (level 1..6, with
// its plain title) or a block of text (level 0). text is the unit's
// chunk text: for Markdown and text files exactly src[start:end].
type unit struct {
	level      int
	title      string
	text       string
	start, end int
}

// Chunk is one retrieval unit cut from a document.
type Chunk struct {
	// ID is unique within its document and stable while its section is
	// unchanged: "<source>#<heading slugs>-<ordinal>" (see package doc).
	ID string
	// Text is the chunk's text: for Markdown and text files exactly the
	// source bytes Span covers; for HTML the text extracted from them.
	Text string
	// Headings are the titles of the headings above the chunk, outermost
	// first; empty before a document's first heading.
	Headings []string
	// Span is [start, end) in bytes of the source file.
	Span [2]int
}

// section is a run of units under one heading path. A section that
// starts at a heading holds that heading as its first unit.
type section struct {
	headings []string
	units    []unit
}

// openHeading is a heading whose section is still open.
type openHeading struct {
	level int
	title string
}

// sectionsFrom groups units by heading (a heading of level L closes every
// open heading of level >= L), for units that follow a part of the
// document whose open headings are stack, returning the headings open
// after them. Units before the first heading of units are a section under
// stack.
func sectionsFrom(stack []openHeading, units []unit) ([]section, []openHeading) {
	titles := func() []string {
		hs := make([]string, len(stack))
		for i, o := range stack {
			hs[i] = o.title
		}
		return hs
	}
	out := []section{{}}
	if len(stack) > 0 {
		out[0].headings = titles()
	}
	for _, u := range units {
		if u.level == 0 {
			out[len(out)-1].units = append(out[len(out)-1].units, u)
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].level >= u.level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, openHeading{u.level, u.title})
		out = append(out, section{headings: titles(), units: []unit{u}})
	}
	return out, stack
}

// atom is the smallest piece a chunk is made of: a sentence of a unit, or
// part of a sentence longer than a chunk. s and e are offsets in the
// unit's text.
type atom struct {
	u, s, e int
}

// atomize splits every unit of sec into sentences, and a sentence longer
// than limit bytes at word boundaries (a word longer than limit at rune
// boundaries), so no atom is longer than limit.
func atomize(units []unit, limit int) []atom {
	var atoms []atom
	for ui, u := range units {
		for _, sn := range sentenceSpans(u.text) {
			if sn[1]-sn[0] <= limit {
				atoms = append(atoms, atom{ui, sn[0], sn[1]})
				continue
			}
			for _, p := range wordPieces(u.text, sn[0], sn[1], limit) {
				atoms = append(atoms, atom{ui, p[0], p[1]})
			}
		}
	}
	return atoms
}

// sentenceSpans returns the [start, end) of each sentence of t: a
// sentence ends after a run of . ! or ? (and any closing quotes or
// brackets) followed by whitespace or the end of t. Spans exclude the
// whitespace between sentences.
func sentenceSpans(t string) [][2]int {
	var out [][2]int
	i := 0
	for i < len(t) {
		for i < len(t) && isSpace(t[i]) {
			i++
		}
		if i >= len(t) {
			break
		}
		start, j := i, i
		for j < len(t) {
			c := t[j]
			j++
			if c != '.' && c != '!' && c != '?' {
				continue
			}
			for j < len(t) && strings.IndexByte(".!?\"')]", t[j]) >= 0 {
				j++
			}
			if strings.HasPrefix(t[j:], "\u2019") || strings.HasPrefix(t[j:], "\u201d") {
				j += 3
			}
			if j >= len(t) || isSpace(t[j]) {
				break
			}
		}
		end := j
		for end > start && isSpace(t[end-1]) {
			end--
		}
		out = append(out, [2]int{start, end})
		i = j
	}
	return out
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// wordPieces splits t[s:e] into pieces of at most limit bytes, ending at
// whitespace where one is within reach, else at a rune boundary.
func wordPieces(t string, s, e, limit int) [][2]int {
	var out [][2]int
	for s < e {
		if e-s <= limit {
			out = append(out, [2]int{s, e})
			break
		}
		cut := -1
		for k := s + limit; k > s; k-- {
			if isSpace(t[k]) {
				cut = k
				break
			}
		}
		if cut < 0 {
			cut = s + limit
			for cut > s && !utf8.RuneStart(t[cut]) {
				cut--
			}
			if cut == s { // limit shorter than one rune
				_, n := utf8.DecodeRuneInString(t[s:])
				cut = s + n
			}
		}
		end := cut
		for end > s && isSpace(t[end-1]) {
			end--
		}
		out = append(out, [2]int{s, end})
		s = cut
		for s < e && isSpace(t[s]) {
			s++
		}
	}
	return out
}

// packer cuts one section into chunks.
type packer struct {
	units []unit
	atoms []atom
	raw   bool // chunk text is a contiguous source range (Markdown, text)
}

// size is the length in bytes of the text of atoms [i, j).
func (p *packer) size(i, j int) int {
	if p.raw {
		a, b := p.atoms[i], p.atoms[j-1]
		return p.units[b.u].start + b.e - (p.units[a.u].start + a.s)
	}
	n := 0
	for k := i; k < j; {
		l := k
		for l+1 < j && p.atoms[l+1].u == p.atoms[k].u {
			l++
		}
		if n > 0 {
			n += 2
		}
		n += p.atoms[l].e - p.atoms[k].s
		k = l + 1
	}
	return n
}

// heading reports whether atoms [i, j) are all of heading units (a
// chunk is never a heading alone when text follows it).
func (p *packer) heading(i, j int) bool {
	for k := i; k < j; k++ {
		if p.units[p.atoms[k].u].level == 0 {
			return false
		}
	}
	return true
}

// text returns the chunk text of atoms [i, j) and its source span.
func (p *packer) text(src []byte, i, j int) (string, [2]int) {
	a, b := p.atoms[i], p.atoms[j-1]
	if p.raw {
		s, e := p.units[a.u].start+a.s, p.units[b.u].start+b.e
		return string(src[s:e]), [2]int{s, e}
	}
	var sb strings.Builder
	span := [2]int{p.units[a.u].start, p.units[b.u].end}
	for k := i; k < j; {
		l := k
		for l+1 < j && p.atoms[l+1].u == p.atoms[k].u {
			l++
		}
		if sb.Len() > 0 {
			sb.WriteString("\n\n")
		}
		u := p.units[p.atoms[k].u]
		sb.WriteString(u.text[p.atoms[k].s:p.atoms[l].e])
		span[0], span[1] = min(span[0], u.start), max(span[1], u.end)
		k = l + 1
	}
	return sb.String(), span
}

// pack returns the atom ranges [start, end) of the section's chunks:
// whole units are packed while the chunk stays within limit bytes; a unit
// that does not fit in an otherwise empty chunk is cut between atoms.
// Each chunk after the first starts with the trailing atoms of the one
// before, as many as fit in overlap bytes (never the whole of it); they
// are dropped, first to last, when they keep out a next unit that would
// fit whole, or even its first atom.
func (p *packer) pack(limit, overlap int) [][2]int {
	var out [][2]int
	n := len(p.atoms)
	start, pos := 0, 0
	for pos < n {
		end := pos
		for end < n {
			ue := end + 1
			for ue < n && p.atoms[ue].u == p.atoms[end].u {
				ue++
			}
			if p.size(start, ue) <= limit {
				end = ue
				continue
			}
			if end > pos && !p.heading(start, end) {
				break
			}
			if end == pos && start < pos && p.atoms[pos-1].u != p.atoms[pos].u && p.size(pos, ue) <= limit {
				start++ // the unit fits whole without the overlap
				continue
			}
			for end < ue && p.size(start, end+1) <= limit {
				end++
			}
			if end == pos && start < pos {
				start++
				continue
			}
			if end == pos {
				end = pos + 1
			}
			break
		}
		out = append(out, [2]int{start, end})
		pos = end
		k := end
		for k-1 > start && p.size(k-1, end) <= overlap {
			k--
		}
		start = k
	}
	return out
}

// hasWord reports whether t holds a letter or a digit.
func hasWord(t string) bool {
	return strings.IndexFunc(t, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// chunkUnits cuts the units of one document (source path src) into
// chunks. raw says whether unit texts are source bytes.
func chunkUnits(source string, src []byte, units []unit, raw bool, opts Options) []Chunk {
	var out []Chunk
	newChunker(source, opts).add(src, 0, units, raw, func(c Chunk) error {
		out = append(out, c)
		return nil
	})
	return out
}

// chunker cuts one document into chunks a part at a time (parts split at
// line starts, each parsed alone), carrying the open headings and the
// section keys seen from part to part, so the chunks are those of the
// whole document but for sections cut where a part ends.
type chunker struct {
	source string
	opts   Options
	stack  []openHeading
	seen   map[string]int
}

func newChunker(source string, opts Options) *chunker {
	return &chunker{source: source, opts: opts, seen: map[string]int{}}
}

// add cuts the units of part src, which starts at byte base of the
// document, and emits its chunks in order (spans in document offsets).
func (c *chunker) add(src []byte, base int, units []unit, raw bool, emit func(Chunk) error) error {
	limit, overlap := c.opts.ChunkTokens*BytesPerToken, c.opts.ChunkOverlap*BytesPerToken
	var secs []section
	secs, c.stack = sectionsFrom(c.stack, units)
	for _, sec := range secs {
		if len(sec.units) == 0 || (len(sec.units) == 1 && sec.units[0].level > 0) {
			continue
		}
		key := slugPath(sec.headings)
		c.seen[key]++
		if k := c.seen[key]; k > 1 {
			key += "~" + itoa(k)
		}
		p := &packer{units: sec.units, atoms: atomize(sec.units, limit), raw: raw}
		ord := 0
		for _, r := range p.pack(limit, overlap) {
			t, span := p.text(src, r[0], r[1])
			if !hasWord(t) {
				continue
			}
			ord++
			span[0], span[1] = span[0]+base, span[1]+base
			if err := emit(Chunk{ID: chunkID(c.source, key, ord), Text: t, Headings: sec.headings, Span: span}); err != nil {
				return err
			}
		}
	}
	return nil
}
