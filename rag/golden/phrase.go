package golden

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/verdryx/verdryx/rag/internal/ragtext"
)

// stemmed is one word of an answer's prose as the natural-form matchers read
// it: its stem and where it stands.
type stemmed struct {
	stem       string
	start, end int // byte offsets in the prose
	sentence   int // index of the sentence holding it
	clause     int // count of clause marks before it in the prose
}

// Slack is how many extra words a natural-form match may span beyond the
// words of its pattern: subjectSlack for the case's own subject (modifiers,
// a preposition, an auxiliary: "the lamp at Gull Point", "the great lens
// may be polished"), siblingSlack for another subject's words (tighter,
// so a sibling is found only where its words stand together), and
// phraseGap the words allowed between two consecutive words of a
// qualifier or must_contain phrase ("distilled in a copper still").
const (
	subjectSlack = 4
	siblingSlack = 2
	phraseGap    = 2
)

// stemWord returns the comparison form of one folded word: its Snowball
// English stem (github.com/kljensen/snowball), a possessive 's or ’s
// already cut off by the tokenizer, and one final s dropped from stems
// longer than three letters (Snowball stems "lens" to "len" but "lenses"
// to "lens"; dropping it on both sides makes them meet).
func stemWord(w string) string {
	s := english.Stem(w, true)
	if len(s) > 3 && strings.HasSuffix(s, "s") && !strings.HasSuffix(s, "ss") {
		s = s[:len(s)-1]
	}
	return s
}

// isApostrophe reports the runes written as an apostrophe.
func isApostrophe(r rune) bool { return r == '\'' || r == '’' || r == 'ʼ' || r == '‘' }

// wordSpans returns the words of text with their byte offsets: runs of
// letters, digits and combining marks, folded (NFKC, case folding, no
// combining marks, a non-ASCII letter as its TR39 confusable skeleton),
// format characters inside a word dropped, an apostrophe kept only
// inside a word. A possessive ('s, ’s,
// or a final apostrophe after s) is cut off.
func wordSpans(text string) (out []struct {
	w          string
	start, end int
}) {
	caser := cases.Fold()
	var sb strings.Builder
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := strings.TrimRightFunc(sb.String(), isApostrophe)
		for _, p := range []string{"'s", "’s", "ʼs", "‘s"} {
			if strings.HasSuffix(w, p) {
				w = strings.TrimSuffix(w, p)
				break
			}
		}
		if w != "" {
			out = append(out, struct {
				w          string
				start, end int
			}{w, start, end})
		}
		sb.Reset()
		start = -1
	}
	for i, r := range text {
		switch {
		case invisible(r):
			continue
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			if start < 0 {
				start = i
			}
			f := norm.NFKC.String(string(r))
			if r >= utf8.RuneSelf {
				// A lookalike letter reads as the letter it imitates
				// (Cyrillic а as a), as in the match key.
				f = confusables.Skeleton(f)
			}
			for _, q := range norm.NFD.String(caser.String(f)) {
				if !unicode.Is(unicode.Mn, q) && (unicode.IsLetter(q) || unicode.IsDigit(q)) {
					sb.WriteRune(q)
				}
			}
		case isApostrophe(r) && start >= 0:
			sb.WriteRune('\'')
		default:
			flush(i)
		}
	}
	flush(len(text))
	return out
}

// readWords returns the words of an answer's prose, each with its
// sentence (from the analysis's sentence spans) and clause.
func (a *analysis) readWords() []stemmed {
	marks := clauseMarks(a.prose)
	var out []stemmed
	for _, sp := range wordSpans(a.prose) {
		w := stemmed{stem: stemWord(sp.w), start: sp.start, end: sp.end}
		for i, s := range a.sentences {
			if sp.start >= s.start && sp.start < s.end {
				w.sentence = i
			}
		}
		for _, m := range marks {
			if m[0] < sp.start {
				w.clause++
			}
		}
		out = append(out, w)
	}
	return out
}

// determiners are dropped from a pattern: "the harvest window" and "this
// harvest window" name the same thing.
var determiners = keyWordSetFolded("a", "an", "the", "this", "that", "these", "those", "its", "their", "each", "every")

// subjectLinks are the function words a subject's name may hold that a
// natural form moves or drops ("oil of cloves" / "clove oil").
var subjectLinks = keyWordSetFolded("of", "at", "in", "on", "for", "from", "by", "with", "to", "and")

// keyWordSetFolded returns a constant set of folded words. It is a
// function so the package keeps no mutable state.
func keyWordSetFolded(words ...string) func(string) bool {
	return func(w string) bool { return slices.Contains(words, w) }
}

// pattern returns the stems of phrase's words, without determiners and,
// when subject is set, without the subject's link words.
func pattern(phrase string, subject bool) []string {
	var out []string
	for _, sp := range wordSpans(phrase) {
		if determiners(sp.w) || (subject && subjectLinks(sp.w)) {
			continue
		}
		out = append(out, stemWord(sp.w))
	}
	return out
}

// windowMatches returns every set of word indexes (one per pattern stem)
// that names pat in natural order or in any order: all of pat's stems on
// distinct unused words of one sentence, within len(pat)+slack words of
// each other. Matches do not share words; each match marks its words used.
func windowMatches(ws []stemmed, pat []string, slack int, used []bool) [][]int {
	if len(pat) == 0 {
		return nil
	}
	var out [][]int
	for i := range ws {
		if used[i] || !slices.Contains(pat, ws[i].stem) {
			continue
		}
		var got []int
		need := slices.Clone(pat)
		for j := i; j < len(ws) && j < i+len(pat)+slack && ws[j].sentence == ws[i].sentence && len(need) > 0; j++ {
			if used[j] {
				continue
			}
			if k := slices.Index(need, ws[j].stem); k >= 0 {
				need = slices.Delete(need, k, k+1)
				got = append(got, j)
			}
		}
		if len(need) == 0 {
			for _, j := range got {
				used[j] = true
			}
			out = append(out, got)
		}
	}
	return out
}

// orderedMatch is one in-order occurrence of a phrase: the indexes of its
// first and last words (whether a word between them negates is
// analysis.gapNegated's to say).
type orderedMatch struct {
	first, last int
}

// gapBreakers are words that may not stand inside a phrase's match: they
// offer an alternative or an exception to what follows.
var gapBreakers = keyWordSetFolded("or", "nor", "but", "unless", "except", "instead", "rather", "either")

// orderedMatches returns the occurrences of pat as words in its order, in
// one clause, with at most phraseGap other words between two consecutive
// words of pat ("distilled in a copper still" for "distilled in copper"),
// none of them a gapBreaker ("distilled in glass or copper" does not
// match).
func orderedMatches(ws []stemmed, pat []string) []orderedMatch {
	if len(pat) == 0 {
		return nil
	}
	var out []orderedMatch
	for i := range ws {
		if ws[i].stem != pat[0] {
			continue
		}
		m := orderedMatch{first: i, last: i}
		ok := true
		for _, p := range pat[1:] {
			next := -1
			for j := m.last + 1; j < len(ws) && j <= m.last+1+phraseGap && ws[j].clause == ws[i].clause; j++ {
				if ws[j].stem == p {
					next = j
					break
				}
				if gapBreakers(ws[j].stem) {
					break // "distilled in glass or copper" offers another vessel
				}
			}
			if next < 0 {
				ok = false
				break
			}
			m.last = next
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// gapNegated reports a negation among the words strictly inside an
// ordered match ("distilled not in copper").
func (a *analysis) gapNegated(ws []stemmed, m orderedMatch) bool {
	if m.last <= m.first+1 {
		return false
	}
	gap := keyWords(Key(a.prose[ws[m.first].end:ws[m.last].start]))
	for i := range gap {
		if negationAt(gap, i) > 0 {
			return true
		}
	}
	return false
}

// wordList returns the answer's words, read once.
func (a *analysis) wordList() []stemmed {
	if a.words == nil {
		a.words = a.readWords()
		if a.words == nil {
			a.words = []stemmed{}
		}
	}
	return a.words
}

// usedBy marks the words of ws that overlap a key match of lit in the
// prose, and returns how many key matches there were.
func (a *analysis) usedBy(ws []stemmed, used []bool, lit string) int {
	ms := keyMatches(a.proseKey, a.prose, lit)
	for _, i := range ms {
		s, e := a.proseKey.src[i], a.proseKey.src[i+len(Key(lit))]
		for j, w := range ws {
			if w.start < e && w.end > s {
				used[j] = true
			}
		}
	}
	return len(ms)
}

// subjectUse finds where the answer names subject: under the match key as
// written, or in natural form (windowMatches of its stems, link words and
// determiners dropped: "the Gull Point Fresnel lamp", "Gull Point's
// lamp", "the lamp at Gull Point", "Argent wicks", "the lens may be
// polished" for "lens polishing"). It returns whether it is named and the
// words its occurrences as written use: only those are kept from another
// subject's natural form, so "Cape Rock's lamp, not Gull Point's" still
// names `cape rock lamp` in a `gull point lamp` case.
func (a *analysis) subjectUse(subject string) (bool, []bool) {
	ws := a.wordList()
	written := make([]bool, len(ws))
	n := a.usedBy(ws, written, subject)
	n += len(windowMatches(ws, pattern(subject, true), subjectSlack, slices.Clone(written)))
	return n > 0, written
}

// namesNatural reports whether the answer names a subject in natural form
// on words the case's own subject as written does not use: pat's stems
// standing together in one sentence (windowMatches with siblingSlack).
func (a *analysis) namesNatural(pat []string, used []bool) bool {
	return len(windowMatches(a.wordList(), pat, siblingSlack, slices.Clone(used))) > 0
}

// phraseFound reports whether phrase lit occurs in the answer's prose in
// order with at most phraseGap words inside (stems, determiners dropped).
func (a *analysis) phraseFound(lit string) bool {
	return len(orderedMatches(a.wordList(), pattern(lit, false))) > 0
}

// naturalSpan returns the byte span of text from the first to the last
// word of the first natural-form occurrence of subject outside citation
// markers (as subject_named finds it), or ok false.
func naturalSpan(text, subject string) (start, end int, ok bool) {
	prose := []byte(text)
	for i := 0; i < len(prose); i++ {
		if prose[i] != '[' {
			continue
		}
		j := strings.IndexByte(text[i:], ']')
		if j < 0 {
			break
		}
		for p := i; p <= i+j; p++ {
			prose[p] = ' '
		}
		i += j
	}
	var ws []stemmed
	for _, sp := range wordSpans(string(prose)) {
		ws = append(ws, stemmed{stem: stemWord(sp.w), start: sp.start, end: sp.end, sentence: sentenceEnds(prose[:sp.start])})
	}
	ms := windowMatches(ws, pattern(subject, true), subjectSlack, make([]bool, len(ws)))
	if len(ms) == 0 {
		return 0, 0, false
	}
	m := slices.Clone(ms[0])
	slices.Sort(m)
	return ws[m[0]].start, ws[m[len(m)-1]].end, true
}

// sentenceEnds counts the sentence ends in b: . ! or ? followed by a
// space.
func sentenceEnds(b []byte) int {
	n := 0
	for i := 0; i+1 < len(b); i++ {
		if strings.IndexByte(".!?", b[i]) >= 0 && ragtext.IsSpace(b[i+1]) {
			n++
		}
	}
	return n
}
