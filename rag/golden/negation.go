package golden

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// negators are the words and phrases that negate what follows them in
// their clause, as match keys split into words (so a lookalike letter or
// an invisible character does not hide them). A word ending in n't
// negates too.
var negators = sync.OnceValue(func() [][]string {
	var out [][]string
	for _, p := range []string{
		"not", "never", "no", "without", "nor", "neither", "none", "cannot", "un", "non", "nowhere",
		"avoid", "avoids", "avoided", "avoiding", "except", "excepting", "hardly", "barely", "scarcely", "seldom",
		"rarely", "instead of", "rather than", "wrong to say", "false to say", "untrue that", "fails to", "fail to",
		"failed to",
	} {
		out = append(out, strings.Fields(Key(p)))
	}
	return out
})

// keyWordSet returns the match keys of words, as a set.
func keyWordSet(words ...string) map[string]bool {
	m := map[string]bool{}
	for _, w := range words {
		m[Key(w)] = true
	}
	return m
}

// clauseWords are words that start a new clause: a negation before one
// does not reach what follows it.
var clauseWords = sync.OnceValue(func() map[string]bool {
	return keyWordSet("but", "and", "yet", "then", "while", "whereas")
})

// auxiliaries are the verbs that may stand between a qualifier and a
// negation after it ("vented in reduction is not required").
var auxiliaries = sync.OnceValue(func() map[string]bool {
	return keyWordSet("is", "are", "was", "were", "be", "been", "being", "does", "do", "did", "should", "must",
		"need", "needs", "can", "could", "will", "would", "may", "might", "has", "have", "had", "shall")
})

// comparatives after a negation make it a bound ("no less than").
var comparatives = sync.OnceValue(func() map[string]bool {
	return keyWordSet("less", "more", "fewer", "later", "earlier", "sooner", "longer", "shorter")
})

// untilWords after a negation make it a bound in time ("not pulled until").
var untilWords = sync.OnceValue(func() map[string]bool {
	return keyWordSet("until", "till", "before")
})

// multipliers are words that, right before a value, state another value
// ("twice 2 weeks").
var multipliers = sync.OnceValue(func() map[string]bool {
	return keyWordSet("twice", "thrice", "double", "triple", "treble", "quadruple", "times")
})

// negationWindow is how many words of its clause before a required
// qualifier are looked at for a negation; afterWindow how many after it;
// valueWindow how many before the expected value.
const (
	negationWindow = 5
	afterWindow    = 4
	valueWindow    = 8
)

// keyWords splits a match key into words (letters, digits, apostrophes).
func keyWords(k string) []string {
	return strings.FieldsFunc(k, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}

// clauseMarks returns the byte offsets in text of the marks that end a
// clause: , ; : . ! ? brackets, and a dash with spaces around it.
func clauseMarks(text string) [][2]int {
	var out [][2]int
	for i, r := range text {
		sz := utf8.RuneLen(r)
		switch {
		case strings.ContainsRune(",;:.!?()[]", r):
			out = append(out, [2]int{i, i + sz})
		case r == '-' || unicode.Is(unicode.Pd, r):
			b, _ := utf8.DecodeLastRuneInString(text[:i])
			a, _ := utf8.DecodeRuneInString(text[i+sz:])
			if unicode.IsSpace(b) && unicode.IsSpace(a) {
				out = append(out, [2]int{i, i + sz})
			}
		}
	}
	return out
}

// clauseBefore returns the words (match keys) of the clause that text ends
// in, at most n of them: from the last clause mark or clause word.
func clauseBefore(text string, n int) []string {
	if m := clauseMarks(text); len(m) > 0 {
		text = text[m[len(m)-1][1]:]
	}
	ws := keyWords(Key(text))
	for j := len(ws) - 1; j >= 0; j-- {
		if clauseWords()[ws[j]] {
			ws = ws[j+1:]
			break
		}
	}
	return ws[max(0, len(ws)-n):]
}

// clauseAfter returns the words (match keys) of the clause that text
// starts, at most n of them: up to the first clause mark or clause word.
func clauseAfter(text string, n int) []string {
	if m := clauseMarks(text); len(m) > 0 {
		text = text[:m[0][0]]
	}
	ws := keyWords(Key(text))
	for j, w := range ws {
		if clauseWords()[w] {
			ws = ws[:j]
			break
		}
	}
	return ws[:min(len(ws), n)]
}

// negationAt returns the length in words of the negator starting at
// ws[i], or 0.
func negationAt(ws []string, i int) int {
	if strings.HasSuffix(ws[i], "n't") {
		return 1
	}
	for _, p := range negators() {
		if i+len(p) <= len(ws) && slices.Equal(ws[i:i+len(p)], p) {
			return len(p)
		}
	}
	return 0
}

// negatedBefore reports a negation among the last n words of the clause
// that text ends in ("no doubt", "not only" affirm). With bounds, a
// negation followed by a comparative ("no less than", "not fired for
// less than") or by until ("not pulled until") is a bound on a value, not
// its denial.
func negatedBefore(text string, n int, bounds bool) bool {
	ws := clauseBefore(text, n)
	for i := range ws {
		m := negationAt(ws, i)
		if m == 0 || i+m < len(ws) && affirming()[ws[i+m]] {
			continue
		}
		if bounds && slices.ContainsFunc(ws[i+m:], func(w string) bool { return comparatives()[w] || untilWords()[w] }) {
			continue
		}
		return true
	}
	return false
}

// affirming are words that, right after a negation, make it affirm ("no
// doubt", "not only", "without question").
var affirming = sync.OnceValue(func() map[string]bool {
	return keyWordSet("doubt", "question", "wonder", "only")
})

// negatedAfter reports a negation right after a qualifier in its clause,
// behind auxiliaries ("is not required", "isn't needed"); "not in
// oxidation" right after the qualifier names an alternative, not a
// denial, and "is not pulled until" is a bound.
func negatedAfter(text string) bool {
	ws := clauseAfter(text, afterWindow+4)
	if slices.ContainsFunc(ws, func(w string) bool { return untilWords()[w] }) {
		return false
	}
	for i, w := range ws[:min(len(ws), afterWindow)] {
		if strings.HasSuffix(w, "n't") {
			return true
		}
		if i > 0 && negationAt(ws, i) > 0 {
			return true
		}
		if !auxiliaries()[w] {
			return false
		}
	}
	return false
}

// qualifierOccurrences reports whether qualifier q occurs in the answer
// (outside citations), as written or in natural form, and whether some
// occurrence is negated: preceded
// within negationWindow words of the same clause by a negation (not, never,
// no, without, avoid, except, rather than, instead of, a contraction in
// n't, ...), followed in its clause by one behind auxiliaries ("is not
// required"), or glued to an un-/non- prefix. Negations are read on the
// match key. An occurrence glued to other letters ("redistilled") does not
// count.
func qualifierOccurrences(a *analysis, q string) (found, negated bool) {
	kq := Key(q)
	for _, i := range keyMatchesIn(a.proseKey, a.prose, q, false) {
		start := a.proseKey.src[i]
		before := a.prose[:start]
		glued := ""
		for j := len(before); j > 0; {
			r, sz := utf8.DecodeLastRuneInString(before[:j])
			if invisible(r) {
				j -= sz
				continue
			}
			if !unicode.IsLetter(r) {
				break
			}
			j -= sz
			glued = before[j:]
		}
		if glued != "" {
			if g := Key(glued); g == "un" || g == "non" {
				found, negated = true, true
			}
			continue
		}
		found = true
		end := a.proseKey.src[i+len(kq)]
		if negatedBefore(before, negationWindow, false) || negatedAfter(a.prose[end:]) {
			negated = true
		}
	}
	if found {
		return found, negated
	}
	// In natural form: the qualifier's words in order in one clause, with
	// a few words between them ("distilled in a copper still"), inflected
	// ("in copper saggars"), determiners dropped. A negation between its
	// words negates it as one before or after it does.
	ws := a.wordList()
	for _, m := range orderedMatches(ws, pattern(q, false)) {
		found = true
		if a.gapNegated(ws, m) || negatedBefore(a.prose[:ws[m.first].start], negationWindow, false) || negatedAfter(a.prose[ws[m.last].end:]) {
			negated = true
		}
	}
	return found, negated
}

// valueNegated reports whether an occurrence of the expected value v is
// denied or changed by its clause: a negation before it within valueWindow
// words ("does not fire stoneware glaze for 9 hours"; "no less than" and
// "not ... until" are bounds, not denials), or a multiplier right before it
// ("twice 2 weeks").
func (k *Checker) valueNegated(a *analysis, v string) bool {
	var starts []int // offsets into the prose
	for _, i := range keyMatches(a.proseKey, a.prose, v) {
		starts = append(starts, a.proseKey.src[i])
	}
	if q, ok := k.quantityLiteral(v); ok {
		for _, aq := range a.quantities {
			if aq.Same(q) && (aq.Unit != "" || q.Unit == "") {
				starts = append(starts, a.folded.src[aq.Start])
			}
		}
	}
	for _, i := range starts {
		before := a.prose[:i]
		if negatedBefore(before, valueWindow, true) {
			return true
		}
		if ws := clauseBefore(before, 1); len(ws) == 1 && multipliers()[ws[0]] {
			return true
		}
	}
	return false
}
