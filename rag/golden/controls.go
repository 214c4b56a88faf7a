package golden

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/internal/ragtext"
)

// Control names: rephrasings of a correct answer that must still pass.
const (
	CtlReordered     = "reordered-clauses"
	CtlSubjectAtEnd  = "subject-at-end"
	CtlPossessive    = "possessive-subject"
	CtlPrepositional = "prepositional-subject"
	CtlPlural        = "plural-subject"
	CtlSentenceSplit = "sentence-split"
	CtlValueAsWord   = "value-as-word"
	CtlUnitAbbrev    = "unit-abbreviated"
	CtlCitationAtEnd = "citation-at-end"
)

// ControlNames lists every control name in the order Controls derives
// them.
func ControlNames() []string {
	return []string{CtlReordered, CtlSubjectAtEnd, CtlPossessive, CtlPrepositional, CtlPlural, CtlSentenceSplit,
		CtlValueAsWord, CtlUnitAbbrev, CtlCitationAtEnd}
}

// Control is a correct answer rephrased: the graders must pass it.
type Control struct {
	// Name is one of the Ctl* constants.
	Name string
	// Target says what was rephrased.
	Target string
	// Answer is the rephrased answer.
	Answer string
}

// Controls derives, from the reference answer of an answerable case
// (ReferenceAnswer: the expected chunk's text, its citation and source
// id), the rephrasings a careful grader accepts:
//
//   - reordered-clauses: the first sentence's clauses swapped at its first
//     comma, or, without a comma, the source named first ("According to
//     SRC, ...");
//   - subject-at-end: the subject's first mention (with its determiner)
//     replaced by "it" and the subject named in a closing sentence;
//   - possessive-subject, prepositional-subject: a subject of two or more
//     words written "modifiers's head" and "head of the modifiers";
//   - plural-subject: the subject's head word in the plural;
//   - sentence-split: the first sentence split in two at its first comma
//     or before its first subordinating word (when, while, after, ...),
//     the citation on the second part;
//   - value-as-word: the expected value's number in words ("twelve
//     newton-metres");
//   - unit-abbreviated: the expected value's unit in its shortest declared
//     abbreviation ("12 nm");
//   - citation-at-end: the citation after the source id.
//
// A control is derived only when its edit applies and keeps the expected
// value and every required qualifier as written (but for letter case);
// none equals the
// reference answer. Everything is derived from the case and the corpus.
func Controls(gc Case, c rag.Corpus) []Control {
	ref := ReferenceAnswer(gc, c)
	if gc.ExpectAbstention || ref == "" {
		return nil
	}
	e, _ := c.Entry(gc.ExpectedRetrievedID)
	text := strings.TrimSpace(e.Text)
	cite := rag.Cite(e.ID)
	field := c.SourceField
	if field == "" {
		field = "source"
	}
	src := "(" + field + ": " + gc.ExpectedSourceID + ")"
	trailer := " " + cite + " " + src
	var out []Control
	keeps := func(t string) bool {
		lt := strings.ToLower(t)
		for _, lit := range append([]string{gc.ExpectedValue}, gc.RequiredQualifiers...) {
			if lit != "" && strings.Contains(text, lit) && !strings.Contains(lt, strings.ToLower(lit)) {
				return false
			}
		}
		return true
	}
	add := func(name, target, answer string, check bool) {
		if answer == ref || (check && !keeps(answer)) {
			return
		}
		for _, o := range out {
			if o.Answer == answer {
				return
			}
		}
		out = append(out, Control{Name: name, Target: target, Answer: answer})
	}

	sents := ragtext.SplitSentences(text)
	first, rest := sents[0], strings.Join(sents[1:], " ")
	withRest := func(s string) string {
		if rest == "" {
			return s
		}
		return s + " " + rest
	}
	body, punct := strings.TrimRight(first, ".!?"), first[len(strings.TrimRight(first, ".!?")):]
	if punct == "" {
		punct = "."
	}

	// Reordered clauses.
	if a, b, ok := strings.Cut(body, ", "); ok && a != "" && b != "" {
		add(CtlReordered, "clauses of the first sentence swapped", withRest(upperFirst(b)+", "+lowerFirst(a)+punct)+trailer, true)
	} else {
		add(CtlReordered, "source named first", withRest("According to "+gc.ExpectedSourceID+", "+lowerFirst(body)+punct)+trailer, true)
	}

	// Subject forms.
	subject := c.Subject(e)
	if i := indexFold(text, subject); subject != "" && i >= 0 {
		j := i + len(subject)
		start := determinerBefore(text, i)
		pronoun := "it"
		if start == 0 || sentenceStart(text, start) {
			pronoun = "It"
		}
		add(CtlSubjectAtEnd, subject+" named last", text[:start]+pronoun+text[j:]+trailer+" This is about the "+subject+".", true)
		written := text[i:j]
		words := strings.Fields(written)
		if len(words) >= 2 {
			mods, head := strings.Join(words[:len(words)-1], " "), words[len(words)-1]
			add(CtlPossessive, mods+"'s "+head, text[:i]+mods+"'s "+head+text[j:]+trailer, true)
			prep := head + " of the " + lowerFirst(mods)
			if i == 0 || sentenceStart(text, i) {
				prep = upperFirst(prep)
			}
			before := text[:i]
			if d := determinerBefore(text, i); d < i && strings.EqualFold(strings.TrimSpace(text[d:i]), "a") && strings.ContainsRune("aeiouAEIOU", firstRuneOf(prep)) {
				before = text[:d] + text[d:d+1] + "n" + text[d+1:i] // "A orchid" -> "An orchid"
			}
			add(CtlPrepositional, prep, before+prep+text[j:]+trailer, true)
		}
		if len(words) > 0 {
			pl := strings.Join(append(words[:len(words)-1:len(words)-1], plural(words[len(words)-1])), " ")
			add(CtlPlural, pl, text[:i]+pl+text[j:]+trailer, true)
		}
	}

	// Sentence split, the citation on the second part.
	if a, b, ok := strings.Cut(body, ", "); ok && a != "" && b != "" {
		add(CtlSentenceSplit, "split at the first comma", withRest(a+". "+upperFirst(b)+punct)+trailer, true)
	} else if k := subordinate(body); k > 0 {
		add(CtlSentenceSplit, "split before "+strings.Fields(body[k:])[0], withRest(strings.TrimSpace(body[:k])+". This is "+strings.TrimSpace(body[k:])+punct)+trailer, true)
	}

	// The expected value as a word and with its unit abbreviated.
	if gc.ExpectedValue != "" && strings.Contains(text, gc.ExpectedValue) {
		u := newUnits(c.Units)
		u.observe(c)
		f := foldText(gc.ExpectedValue).s
		if qs := u.parse(f); len(qs) == 1 {
			q := qs[0]
			num := numberPart(q.Text)
			unitText := strings.TrimSpace(gc.ExpectedValue[min(len(gc.ExpectedValue), strings.Index(gc.ExpectedValue, num)+len(num)):])
			if w, ok := numberInWords(q.Value); ok && unitText != "" && num != "" {
				add(CtlValueAsWord, gc.ExpectedValue+" as "+w+" "+unitText, strings.Replace(text, gc.ExpectedValue, w+" "+unitText, 1)+trailer, false)
			}
			if ab := u.abbreviation(q.Unit); ab != "" && num != "" {
				add(CtlUnitAbbrev, gc.ExpectedValue+" as "+num+" "+ab, strings.Replace(text, gc.ExpectedValue, num+" "+ab, 1)+trailer, false)
			}
		}
	}

	add(CtlCitationAtEnd, cite+" after the source id", text+" "+src+" "+cite, true)
	return out
}

// indexFold returns the byte offset of the first case-insensitive
// occurrence of sub in s that starts a word, or -1.
func indexFold(s, sub string) int {
	if sub == "" {
		return -1
	}
	ls, lsub := strings.ToLower(s), strings.ToLower(sub)
	if len(ls) != len(s) {
		return -1
	}
	for off := 0; ; {
		i := strings.Index(ls[off:], lsub)
		if i < 0 {
			return -1
		}
		i += off
		if r, _ := utf8.DecodeLastRuneInString(s[:i]); i == 0 || !unicode.IsLetter(r) {
			return i
		}
		off = i + 1
	}
}

// determinerBefore returns the offset of a determiner word right before
// offset i of s (the, a, an, each, every, this), or i.
func determinerBefore(s string, i int) int {
	before := strings.TrimRight(s[:i], " ")
	k := strings.LastIndexAny(before, " \n\t") + 1
	if w := strings.ToLower(before[k:]); w == "the" || w == "a" || w == "an" || w == "each" || w == "every" || w == "this" {
		return k
	}
	return i
}

// sentenceStart reports whether offset i of s starts a sentence.
func sentenceStart(s string, i int) bool {
	before := strings.TrimRight(s[:i], " \n\t")
	return before == "" || strings.ContainsAny(before[len(before)-1:], ".!?")
}

// subordinate returns the offset in s of its first subordinating word
// after the first word (when, while, after, before, if, until, during,
// once), or 0.
func subordinate(s string) int {
	best := 0
	for _, w := range []string{" when ", " while ", " after ", " before ", " if ", " until ", " during ", " once "} {
		if k := strings.Index(s, w); k > 0 && (best == 0 || k < best) {
			best = k
		}
	}
	if best == 0 {
		return 0
	}
	return best + 1
}

// plural writes an English noun in the plural (wick -> wicks, glass ->
// glasses, body -> bodies).
func plural(w string) string {
	lw := strings.ToLower(w)
	switch {
	case strings.HasSuffix(lw, "s"), strings.HasSuffix(lw, "x"), strings.HasSuffix(lw, "z"),
		strings.HasSuffix(lw, "ch"), strings.HasSuffix(lw, "sh"):
		return w + "es"
	case strings.HasSuffix(lw, "y") && len(lw) > 1 && !strings.ContainsRune("aeiou", rune(lw[len(lw)-2])):
		return w[:len(w)-1] + "ies"
	}
	return w + "s"
}

// firstRuneOf returns the first rune of s.
func firstRuneOf(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// upperFirst and lowerFirst change the case of the first letter of s.
func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n < len(s) {
		if r2, _ := utf8.DecodeRuneInString(s[n:]); unicode.IsUpper(r2) {
			return s // an acronym or id keeps its case
		}
	}
	return string(unicode.ToLower(r)) + s[n:]
}
