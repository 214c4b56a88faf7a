package golden

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/internal/ragtext"
)

// Mutation names, one per trap family of the golden set.
const (
	MutWrongSourceNumber = "wrong-source-number"
	MutSwappedSynonym    = "swapped-near-synonym"
	MutWrongSourceID     = "wrong-source-id"
	MutDroppedQualifier  = "dropped-qualifier"
	MutDroppedCitation   = "dropped-citation"
	MutFalseAbstention   = "false-abstention"
	MutInventedAnswer    = "invented-answer"

	// Spelling dodges: a forbidden literal, sibling source id or citation
	// written in another letter case, or with Unicode lookalike letters
	// (which also covers the expected ids written with lookalikes).
	MutCaseChange = "case-change"
	MutLookalike  = "lookalike"
	// A sibling's number written another way.
	MutNumberWord        = "number-as-word"
	MutNumberHyphenated  = "number-hyphenated"
	MutNumberAbbreviated = "number-abbreviated"
	// A number attributed to the wrong chunk: the sibling cited beside the
	// expected chunk and its number taken, or the expected value cited to a
	// sibling that does not hold it.
	MutWrongChunk = "wrong-chunk-attribution"
	// A citation of a corpus chunk that was not retrieved, or of an id that
	// is not in the corpus.
	MutUnretrievedCitation = "unretrieved-citation"
	MutUnknownCitation     = "unknown-citation"
	// The first mention of the subject swapped for a collision sibling's.
	MutSiblingSubject = "sibling-subject-swap"
	// A required qualifier kept but negated.
	MutNegatedQualifier = "negated-qualifier"
	// Sibling literals (forbidden literals, source id, citation, subject)
	// with an invisible format character inside.
	MutInvisibleChars = "invisible-chars"
	// A sibling's number written with another script's digits.
	MutOtherScriptDigits = "other-script-digits"
	// A sibling's number beside the expected value as a bare word, an
	// ordinal or an ordinal word.
	MutBareNumber = "bare-number-word"
	// A required qualifier negated after it ("... is not required").
	MutNegatedAfter = "negated-qualifier-after"
	// The expected value negated or multiplied in its clause.
	MutValueNegated = "value-negated"
)

// MutationNames lists every mutation name in the order Mutations derives
// them.
func MutationNames() []string {
	return []string{MutWrongSourceNumber, MutSwappedSynonym, MutWrongSourceID, MutDroppedQualifier, MutDroppedCitation,
		MutFalseAbstention, MutInventedAnswer, MutCaseChange, MutLookalike, MutNumberWord, MutNumberHyphenated,
		MutNumberAbbreviated, MutWrongChunk, MutUnretrievedCitation, MutUnknownCitation, MutSiblingSubject, MutNegatedQualifier,
		MutInvisibleChars, MutOtherScriptDigits, MutBareNumber, MutNegatedAfter, MutValueNegated}
}

// Mutation is a deliberately wrong answer derived from a correct one.
type Mutation struct {
	// Name is one of the Mut* constants.
	Name string
	// Target says what was changed ("9 drams for 3 drams", a qualifier).
	Target string
	// Answer is the mutated answer.
	Answer string
}

// Mutations derives, from the correct record rec of case gc and the corpus,
// every named mutation that applies to the case:
//
//   - wrong-source-number: the expected value replaced by each forbidden
//     value (a sibling source's number);
//   - swapped-near-synonym: the expected chunk's subject replaced by a
//     collision sibling's different subject (where the answer names it
//     only in natural form, "the Gull Point Fresnel lamp", that span);
//   - wrong-source-id: the expected source id replaced by a sibling's;
//   - dropped-qualifier: each required qualifier deleted;
//   - dropped-citation: the [chunk-id] marker deleted;
//   - false-abstention: the answer replaced by the abstention string;
//   - invented-answer (abstention cases): a confident answer assembled from
//     the top retrieved chunk's text, citation and source;
//   - case-change, lookalike: each forbidden literal injected before the
//     citation, the sibling's source id and citation swapped in, written
//     in inverted case or with a Cyrillic twin letter; lookalike also
//     writes the expected citation and source id with a twin letter;
//   - number-as-word, number-hyphenated, number-abbreviated: each
//     forbidden value written "nine drams", "9-dram", "9dr" in place of the
//     expected value;
//   - wrong-chunk-attribution: a retrieved sibling's own number taken with
//     the sibling cited beside the expected chunk, and the expected value
//     cited to the sibling;
//   - unretrieved-citation, unknown-citation: a sentence citing a corpus
//     chunk that was not retrieved, or an id not in the corpus;
//   - sibling-subject-swap: the subject replaced by a collision sibling's
//     (different) subject at its first mention, and everywhere in inverted
//     case;
//   - negated-qualifier: each required qualifier preceded by "never" or
//     "not";
//   - invisible-chars: each forbidden literal injected, the sibling's
//     source id and citation swapped in and its subject swapped in at the
//     first mention, each with a soft hyphen or a zero-width space inside;
//   - other-script-digits: each forbidden value written with
//     Arabic-Indic or Devanagari digits in place of the expected value;
//   - bare-number-word: each forbidden value's number added beside the
//     expected value as a bare cardinal word, an ordinal (12th) and an
//     ordinal word (twelfth);
//   - negated-qualifier-after: each required qualifier followed by "is not
//     required" or "isn't needed";
//   - value-negated: the expected value preceded by "not" or "twice".
//
// Everything is derived from the case fields and the corpus; nothing names
// a fixture literal. A mutation whose edit would not change the answer is
// not returned.
func Mutations(gc Case, rec rag.Record, c rag.Corpus) []Mutation {
	var out []Mutation
	add := func(name, target, answer string) {
		if answer == rec.Answer {
			return
		}
		for _, m := range out {
			if m.Answer == answer {
				return
			}
		}
		out = append(out, Mutation{Name: name, Target: target, Answer: answer})
	}
	a := rec.Answer
	if gc.ExpectAbstention {
		if len(rec.Chunks) > 0 {
			top := rec.Chunks[0]
			invented := firstSentence(top.Text) + " " + rag.Cite(top.ID)
			if src := ragtext.LabelText(top.Metadata[c.SourceField]); src != "" {
				invented += " (" + c.SourceField + ": " + src + ")"
			}
			add(MutInventedAnswer, "answer from "+top.ID, invented)
		}
		return out
	}
	target, _ := c.Entry(gc.ExpectedRetrievedID)
	if gc.ExpectedValue != "" && strings.Contains(a, gc.ExpectedValue) {
		for _, v := range gc.ForbiddenValues {
			add(MutWrongSourceNumber, v+" for "+gc.ExpectedValue, strings.ReplaceAll(a, gc.ExpectedValue, v))
		}
	}
	subject := c.Subject(target)
	for _, id := range gc.CollisionSiblingIDs {
		sib, _ := c.Entry(id)
		if s := c.Subject(sib); subject != "" && s != "" && !strings.EqualFold(s, subject) {
			add(MutSwappedSynonym, s+" for "+subject, orNatural(a, subject, s, outsideCitations(a, func(t string) string { return replaceFold(t, subject, s) })))
		}
		if src := c.Source(sib); src != "" && src != gc.ExpectedSourceID && gc.ExpectedSourceID != "" {
			add(MutWrongSourceID, src+" for "+gc.ExpectedSourceID, strings.ReplaceAll(a, gc.ExpectedSourceID, src))
		}
	}
	for _, q := range gc.RequiredQualifiers {
		add(MutDroppedQualifier, q, squeeze(strings.ReplaceAll(a, q, "")))
	}
	add(MutDroppedCitation, rag.Cite(gc.ExpectedRetrievedID), squeeze(strings.ReplaceAll(a, rag.Cite(gc.ExpectedRetrievedID), "")))
	add(MutFalseAbstention, rag.Abstention, rag.Abstention)
	for _, m := range dodges(gc, rec, c) {
		add(m.Name, m.Target, m.Answer)
	}
	return out
}

// dodges derives the mutations that dodge literal checks by spelling,
// restate values in other forms, misattribute, miscite, swap the subject
// or negate a qualifier. All are derived from the case, the record and the
// corpus.
func dodges(gc Case, rec rag.Record, c rag.Corpus) []Mutation {
	var out []Mutation
	add := func(name, target, answer string) {
		out = append(out, Mutation{Name: name, Target: target, Answer: answer})
	}
	a := rec.Answer
	cite := rag.Cite(gc.ExpectedRetrievedID)
	hasCite := strings.Contains(a, cite)
	// inject puts text right before the expected citation, so it is part of
	// what that citation supports; else at the end.
	inject := func(text string) string {
		if hasCite {
			return strings.Replace(a, cite, text+" "+cite, 1)
		}
		return a + " " + text
	}
	spellings := []struct {
		name string
		f    func(string) string
	}{{MutCaseChange, swapCase}, {MutLookalike, lookalikeLetters}}
	for _, sp := range spellings {
		for _, lit := range forbiddenLiterals(gc) {
			if w := sp.f(lit); w != lit {
				add(sp.name, "forbidden "+lit, inject(w))
			}
		}
		for _, id := range gc.CollisionSiblingIDs {
			sib, _ := c.Entry(id)
			if src := c.Source(sib); src != "" && gc.ExpectedSourceID != "" && src != gc.ExpectedSourceID && strings.Contains(a, gc.ExpectedSourceID) {
				add(sp.name, "source "+src, strings.ReplaceAll(a, gc.ExpectedSourceID, sp.f(src)))
			}
			if hasCite {
				add(sp.name, "citation "+rag.Cite(id), strings.ReplaceAll(a, cite, sp.f(rag.Cite(id))))
			}
		}
	}
	// The expected ids themselves written with lookalike letters.
	if hasCite {
		if w := lookalikeLetters(gc.ExpectedRetrievedID); w != gc.ExpectedRetrievedID {
			add(MutLookalike, "expected citation", strings.ReplaceAll(a, cite, rag.Cite(w)))
		}
	}
	if gc.ExpectedSourceID != "" && strings.Contains(a, gc.ExpectedSourceID) {
		if w := lookalikeLetters(gc.ExpectedSourceID); w != gc.ExpectedSourceID {
			add(MutLookalike, "expected source id", strings.ReplaceAll(a, gc.ExpectedSourceID, w))
		}
	}

	u := newUnits(c.Units)
	u.observe(c)
	// Sibling values in other forms, in place of the expected value (or
	// injected when the case has none).
	place := func(text string) string {
		if gc.ExpectedValue != "" && strings.Contains(a, gc.ExpectedValue) {
			return strings.ReplaceAll(a, gc.ExpectedValue, text)
		}
		return inject(text)
	}
	for _, v := range gc.ForbiddenValues {
		qs := u.parse(foldText(v).s)
		if len(qs) != 1 {
			continue
		}
		q, f := qs[0], foldText(v).s
		unitText := strings.TrimSpace(f[q.Start+len(numberPart(q.Text)):])
		if w, ok := numberInWords(q.Value); ok && unitText != "" {
			add(MutNumberWord, v+" as "+w+" "+unitText, place(w+" "+unitText))
		}
		if unitText != "" {
			h := numberPart(q.Text) + "-" + hyphenUnit(unitText)
			add(MutNumberHyphenated, v+" as "+h, place(h))
		}
		if ab := u.abbreviation(q.Unit); ab != "" {
			h := numberPart(q.Text) + ab
			add(MutNumberAbbreviated, v+" as "+h, place(h))
		}
	}

	// Attribution: the sibling's number with the sibling cited too; the
	// expected value cited to a sibling.
	expected, _ := c.Entry(gc.ExpectedRetrievedID)
	ownQs := u.parse(foldText(expected.Text).s)
	for _, id := range gc.CollisionSiblingIDs {
		if !slices.Contains(rec.RetrievedIDs, id) {
			continue
		}
		sib, _ := c.Entry(id)
		for _, sq := range u.parse(foldText(sib.Text).s) {
			if slices.ContainsFunc(ownQs, func(o Quantity) bool { return o.Same(sq) }) {
				continue
			}
			if hasCite && gc.ExpectedValue != "" && strings.Contains(a, gc.ExpectedValue) {
				m := strings.ReplaceAll(a, gc.ExpectedValue, sq.Text)
				add(MutWrongChunk, sq.Text+" from "+rag.Cite(id)+" cited beside "+cite, strings.Replace(m, cite, cite+" "+rag.Cite(id), 1))
			} else {
				add(MutWrongChunk, sq.Text+" from "+rag.Cite(id), a+" It is "+sq.Text+" "+rag.Cite(id)+".")
			}
		}
		if gc.ExpectedValue != "" && strings.Contains(a, gc.ExpectedValue) {
			add(MutWrongChunk, gc.ExpectedValue+" cited to "+rag.Cite(id), strings.Replace(a, gc.ExpectedValue, gc.ExpectedValue+" "+rag.Cite(id), 1))
		}
	}

	// Citations of a chunk that was not retrieved and of an unknown id, in
	// a sentence of their own that holds no number.
	for _, e := range c.Entries {
		if !slices.Contains(rec.RetrievedIDs, e.ID) {
			add(MutUnretrievedCitation, rag.Cite(e.ID), a+" See also "+rag.Cite(e.ID)+".")
			break
		}
	}
	unknown := gc.ExpectedRetrievedID + "-appendix"
	for _, ok := c.Entry(unknown); ok; _, ok = c.Entry(unknown) {
		unknown += "-x"
	}
	add(MutUnknownCitation, rag.Cite(unknown), a+" See also "+rag.Cite(unknown)+".")

	// The subject swapped for a sibling's: at its first mention only, and
	// everywhere in inverted case.
	if subject := c.Subject(expected); subject != "" {
		for _, s := range deriveSubjects(gc, c).SiblingSubjects {
			add(MutSiblingSubject, s+" for "+subject+" (first mention)", orNatural(a, subject, s, outsideCitationsOnce(a, subject, s)))
			add(MutSiblingSubject, swapCase(s)+" for "+subject, orNatural(a, subject, swapCase(s), outsideCitations(a, func(t string) string { return replaceFold(t, subject, swapCase(s)) })))
		}
	}

	for _, q := range gc.RequiredQualifiers {
		if !strings.Contains(a, q) {
			continue
		}
		for _, neg := range []string{"never", "not"} {
			add(MutNegatedQualifier, neg+" "+q, strings.Replace(a, q, neg+" "+q, 1))
		}
		for _, neg := range []string{"is not required", "isn't needed"} {
			add(MutNegatedAfter, q+" "+neg, strings.Replace(a, q, q+" "+neg, 1))
		}
	}

	// Invisible characters inside the sibling literals.
	for _, z := range []string{"\u00ad", "\u200b"} {
		for _, lit := range forbiddenLiterals(gc) {
			if w := withInvisible(lit, z); w != lit {
				add(MutInvisibleChars, "forbidden "+lit, inject(w))
			}
		}
		for _, id := range gc.CollisionSiblingIDs {
			sib, _ := c.Entry(id)
			if src := c.Source(sib); src != "" && gc.ExpectedSourceID != "" && src != gc.ExpectedSourceID && strings.Contains(a, gc.ExpectedSourceID) {
				add(MutInvisibleChars, "source "+src, strings.ReplaceAll(a, gc.ExpectedSourceID, withInvisible(src, z)))
			}
			if hasCite {
				add(MutInvisibleChars, "citation "+rag.Cite(id), strings.ReplaceAll(a, cite, rag.Cite(withInvisible(id, z))))
			}
		}
		if subject := c.Subject(expected); subject != "" {
			for _, sub := range deriveSubjects(gc, c).SiblingSubjects {
				add(MutInvisibleChars, "subject "+sub, orNatural(a, subject, withInvisible(sub, z), outsideCitationsOnce(a, subject, withInvisible(sub, z))))
			}
		}
	}

	// Sibling numbers in other digits and as bare words beside the value.
	hasValue := gc.ExpectedValue != "" && strings.Contains(a, gc.ExpectedValue)
	for _, v := range gc.ForbiddenValues {
		qs := u.parse(foldText(v).s)
		if len(qs) != 1 {
			continue
		}
		q := qs[0]
		for _, zero := range []rune{'\u0660', '\u0966'} {
			if w := otherDigits(v, zero); w != v {
				add(MutOtherScriptDigits, v+" as "+w, place(w))
			}
		}
		if !hasValue || q.Value < 2 || q.Value != math.Trunc(q.Value) {
			continue
		}
		beside := func(text string) string {
			return strings.Replace(a, gc.ExpectedValue, gc.ExpectedValue+" ("+text+" elsewhere)", 1)
		}
		if w, ok := numberInWords(q.Value); ok {
			add(MutBareNumber, v+" as "+w, beside(w))
		}
		add(MutBareNumber, v+" as ordinal", beside("the "+ordinalDigits(int(q.Value))))
		if w, ok := ordinalInWords(q.Value); ok {
			add(MutBareNumber, v+" as "+w, beside("the "+w))
		}
	}

	if hasValue {
		for _, w := range []string{"not", "twice"} {
			add(MutValueNegated, w+" "+gc.ExpectedValue, strings.Replace(a, gc.ExpectedValue, w+" "+gc.ExpectedValue, 1))
		}
	}
	return out
}

// orNatural returns swapped when the swap changed answer a; otherwise
// (the answer names subject only in natural form, "the Gull Point Fresnel
// lamp" for `gull point lamp`) a with the words of subject's first
// natural-form occurrence, and those between them, replaced by repl.
func orNatural(a, subject, repl, swapped string) string {
	if swapped != a {
		return swapped
	}
	if i, j, ok := naturalSpan(a, subject); ok {
		return a[:i] + repl + a[j:]
	}
	return a
}

// withInvisible puts the format character z in the middle of s, between
// two letters or digits, or returns s.
func withInvisible(s, z string) string {
	rs := []rune(s)
	for d := 0; d < len(rs); d++ {
		for _, i := range []int{len(rs)/2 + d, len(rs)/2 - d} {
			if i > 0 && i < len(rs) && isAlnum(rs[i-1]) && isAlnum(rs[i]) {
				return string(rs[:i]) + z + string(rs[i:])
			}
		}
	}
	return s
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// otherDigits writes the ASCII digits of s with the digits of the script
// whose zero is zero.
func otherDigits(s string, zero rune) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return zero + r - '0'
		}
		return r
	}, s)
}

// ordinalDigits writes n as 12th, 21st, 3rd.
func ordinalDigits(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}

// ordinalInWords writes a whole number in English ordinal words
// ("twelfth", "forty-fifth", "four hundredth"); false when it ends in
// first or second, which parseValues does not read alone.
func ordinalInWords(v float64) (string, bool) {
	w, ok := numberInWords(v)
	if !ok {
		return "", false
	}
	i := strings.LastIndexAny(w, " -") + 1
	last := w[i:]
	irregular := map[string]string{"three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
	switch {
	case last == "one" || last == "two" || last == "zero":
		return "", false
	case irregular[last] != "":
		last = irregular[last]
	case strings.HasSuffix(last, "y"):
		last = strings.TrimSuffix(last, "y") + "ieth"
	default:
		last += "th"
	}
	return w[:i] + last, true
}

// numberPart returns the leading number of a quantity as written.
func numberPart(text string) string {
	i := 0
	for i < len(text) && (isDigit(text[i]) || ((text[i] == '.' || text[i] == ',') && i+1 < len(text) && isDigit(text[i+1]))) {
		i++
	}
	return text[:i]
}

// hyphenUnit writes a unit as the second half of a hyphenated compound
// ("drams" -> "dram", "moon-phases" -> "moon-phase").
func hyphenUnit(u string) string {
	parts := strings.Fields(u)
	last := parts[len(parts)-1]
	if s := unitStem(last); s != "" {
		parts[len(parts)-1] = s
	}
	return strings.Join(parts, "-")
}

// abbreviation returns the shortest declared spelling of canonical unit
// canon that is shorter than the canonical name, or "".
func (u *units) abbreviation(canon string) string {
	best := ""
	for a, c := range u.alias {
		if c != canon || len(a) >= len(canon) || strings.ContainsAny(a, " %°") {
			continue
		}
		if best == "" || len(a) < len(best) || (len(a) == len(best) && a < best) {
			best = a
		}
	}
	return best
}

// numberInWords writes a whole number below 10000 in English words.
func numberInWords(v float64) (string, bool) {
	if v != math.Trunc(v) || v < 0 || v >= 10000 {
		return "", false
	}
	n := int(v)
	ones := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
		"twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
	tens := []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
	below100 := func(n int) string {
		if n < 20 {
			return ones[n]
		}
		if n%10 == 0 {
			return tens[n/10]
		}
		return tens[n/10] + "-" + ones[n%10]
	}
	if n < 100 {
		return below100(n), true
	}
	var parts []string
	if n >= 1000 {
		parts = append(parts, ones[n/1000]+" thousand")
		n %= 1000
	}
	if n >= 100 {
		parts = append(parts, ones[n/100]+" hundred")
		n %= 100
	}
	if n > 0 {
		parts = append(parts, "and "+below100(n))
	}
	return strings.Join(parts, " "), true
}

// swapCase inverts the letter case of s.
func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsUpper(r) {
			return unicode.ToLower(r)
		}
		return unicode.ToUpper(r)
	}, s)
}

// lookalikeLetters replaces the first Latin letter of s that has a Cyrillic
// twin with that twin (Cyrillic а for Latin a), or returns s unchanged.
func lookalikeLetters(s string) string {
	twins := map[rune]rune{
		'a': 'а', 'c': 'с', 'e': 'е', 'o': 'о', 'p': 'р', 'x': 'х', 'y': 'у', 'i': 'і', 'j': 'ј', 's': 'ѕ',
		'A': 'А', 'B': 'В', 'C': 'С', 'E': 'Е', 'H': 'Н', 'I': 'І', 'J': 'Ј', 'K': 'К', 'M': 'М', 'O': 'О',
		'P': 'Р', 'S': 'Ѕ', 'T': 'Т', 'X': 'Х', 'Y': 'У',
	}
	for i, r := range s {
		if t, ok := twins[r]; ok {
			return s[:i] + string(t) + s[i+utf8.RuneLen(r):]
		}
	}
	return s
}

// outsideCitationsOnce replaces the first case-insensitive occurrence of
// old outside citation markers with repl.
func outsideCitationsOnce(s, old, repl string) string {
	done := false
	return outsideCitations(s, func(t string) string {
		if done {
			return t
		}
		i := strings.Index(strings.ToLower(t), strings.ToLower(old))
		if i < 0 || len(strings.ToLower(t)) != len(t) {
			return t
		}
		done = true
		r := repl
		if first, _ := utf8.DecodeRuneInString(t[i:]); unicode.IsUpper(first) {
			fr, n := utf8.DecodeRuneInString(repl)
			r = string(unicode.ToUpper(fr)) + repl[n:]
		}
		return t[:i] + r + t[i+len(old):]
	})
}

// replaceFold replaces every case-insensitive occurrence of old in s with
// repl, capitalising repl where the occurrence was capitalised.
func replaceFold(s, old, repl string) string {
	if old == "" {
		return s
	}
	lower, lold := strings.ToLower(s), strings.ToLower(old)
	if len(lower) != len(s) {
		return strings.ReplaceAll(s, old, repl) // case folding changed byte offsets
	}
	var sb strings.Builder
	for {
		i := strings.Index(lower, lold)
		if i < 0 {
			sb.WriteString(s)
			return sb.String()
		}
		sb.WriteString(s[:i])
		r := repl
		if first, _ := utf8.DecodeRuneInString(s[i:]); unicode.IsUpper(first) {
			fr, n := utf8.DecodeRuneInString(repl)
			r = string(unicode.ToUpper(fr)) + repl[n:]
		}
		sb.WriteString(r)
		s, lower = s[i+len(old):], lower[i+len(old):]
	}
}

// outsideCitations applies f to the parts of s outside [..] citation
// markers, so a swap of prose keeps the citation the answer made.
func outsideCitations(s string, f func(string) string) string {
	var sb strings.Builder
	for {
		i := strings.IndexByte(s, '[')
		if i < 0 {
			sb.WriteString(f(s))
			return sb.String()
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			sb.WriteString(f(s))
			return sb.String()
		}
		sb.WriteString(f(s[:i]))
		sb.WriteString(s[i : i+j+1])
		s = s[i+j+1:]
	}
}

// squeeze collapses runs of spaces left by a deletion and trims the ends.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func firstSentence(text string) string {
	if s := ragtext.SplitSentences(text); len(s) > 0 {
		return s[0]
	}
	return text
}
