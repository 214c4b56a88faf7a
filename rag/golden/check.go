package golden

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/internal/ragtext"
)

// Check is the outcome of one golden check on one record.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Names of the golden checks, in the order Checker.Check reports them.
const (
	CheckRankedIDs          = "ranked_ids"
	CheckCollisionInContext = "collision_sibling_in_context"
	CheckExpectedValue      = "expected_value"
	CheckValueNegated       = "value_negated"
	CheckMustContain        = "must_contain"
	CheckForbiddenAbsent    = "forbidden_absent"
	CheckSourceCited        = "source_cited"
	CheckAbstention         = "abstention"
	CheckQualifiers         = "required_qualifiers"
	CheckQualifierNegated   = "qualifier_negated"
	CheckSubjectNamed       = "subject_named"
	CheckSiblingSubject     = "sibling_subject_absent"
	CheckNumericGrounding   = "numeric_grounding"
	CheckCitationKnown      = "citation_known"
	CheckCitationRetrieved  = "citation_retrieved"
	CheckSiblingCited       = "sibling_cited"
	CheckMixedScript        = "mixed_script"
)

// Checker grades records against golden cases of one corpus. Build it with
// NewChecker; it is read-only afterwards and safe for concurrent use.
type Checker struct {
	corpus rag.Corpus
	units  *units
	byKey  map[string]string     // Key(id) -> id
	held   map[string][]Quantity // chunk id -> quantities of its text
	form   idForm                // the form of the corpus's ids
	keys   []string              // Key of each id
	quoted map[string]bool       // Key of each bracket group the chunk texts write
}

// NewChecker prepares the checks for corpus c: its unit table (defaults
// plus the corpus's "units"), the quantities each chunk holds, the
// citation keys and the form of its ids, and the bracket groups its texts
// write (content, not citations: see citationGroup).
func NewChecker(c rag.Corpus) *Checker {
	k := &Checker{corpus: c, units: newUnits(c.Units), byKey: map[string]string{}, held: map[string][]Quantity{},
		form: newIDForm(c.IDs()), quoted: map[string]bool{}}
	k.units.observe(c)
	for _, e := range c.Entries {
		key := Key(e.ID)
		if _, dup := k.byKey[key]; !dup {
			k.byKey[key] = e.ID
			k.keys = append(k.keys, key)
		}
		k.held[e.ID] = k.units.parse(foldText(e.Text).s)
		for _, g := range bracketGroups(e.Text) {
			k.quoted[Key(g.body)] = true
		}
	}
	return k
}

// citation is one id cited in square brackets.
type citation struct {
	written string // as the answer wrote it
	id      string // the corpus id it names, "" when none
	start   int    // byte offset of the marker in the answer
}

// sentence is a span of the answer with the chunk ids that support it.
type sentence struct {
	start, end int
	cited      []string
}

// analysis is an answer read once for every check.
type analysis struct {
	raw        string
	key        mapped // match key of the whole answer
	proseKey   mapped // match key with citation markers blanked
	prose      string // the answer with citation markers blanked
	cites      []citation
	sentences  []sentence
	quantities []Quantity // of the folded prose; Start/End index folded
	folded     mapped     // folded prose
	values     []Quantity // parseValues of the folded prose, when asked
	words      []stemmed  // the prose's words with stems, when asked
}

func (k *Checker) analyse(answer string) *analysis {
	a := &analysis{raw: answer, key: keyText(answer)}
	// Citation markers: [id] or [id, id], read by citationGroup; blanked
	// in the prose. Other bracket groups are content and stay.
	prose := []byte(answer)
	for _, g := range bracketGroups(answer) {
		toks, ok := k.citationGroup(g.body)
		if !ok {
			continue
		}
		for _, tok := range toks {
			a.cites = append(a.cites, citation{written: tok, id: k.resolve(tok), start: g.start})
		}
		for p := g.start; p < g.end; p++ {
			prose[p] = ' '
		}
	}
	a.prose = string(prose)
	a.proseKey = keyText(a.prose)
	a.folded = foldText(a.prose)
	a.quantities = k.units.parse(a.folded.s)

	// Sentences end at . ! ? followed by a space, a bracket or the end
	// (not a decimal point). A citation supports the sentence it stands in;
	// a sentence without one is supported by the next citation that closes
	// it (the marker after its end, before any other cited sentence), and
	// sentences after the last citation by the citation of the cited
	// sentence before them.
	var spans [][2]int
	last := 0
	for i := 0; i < len(answer); i++ {
		c := answer[i]
		if c != '.' && c != '!' && c != '?' {
			continue
		}
		if i+1 < len(answer) && !unicode.IsSpace(rune(answer[i+1])) && answer[i+1] != '[' {
			continue
		}
		spans = append(spans, [2]int{last, i + 1})
		last = i + 1
	}
	if strings.TrimSpace(answer[last:]) != "" || len(spans) == 0 {
		spans = append(spans, [2]int{last, len(answer)})
	}
	var pending []int
	var lastCited []string
	for _, sp := range spans {
		s := sentence{start: sp[0], end: sp[1]}
		for _, c := range a.cites {
			if c.start >= sp[0] && c.start < sp[1] && !slices.Contains(s.cited, c.written) {
				s.cited = append(s.cited, c.written)
			}
		}
		a.sentences = append(a.sentences, s)
		if len(s.cited) == 0 {
			pending = append(pending, len(a.sentences)-1)
			continue
		}
		for _, p := range pending {
			a.sentences[p].cited = s.cited
		}
		pending, lastCited = nil, s.cited
	}
	// Sentences after the last citation go on from the cited sentence
	// before them ("... [id]. That holds while the feed stays below 3
	// bar."): the same chunks support them.
	for _, p := range pending {
		a.sentences[p].cited = lastCited
	}
	return a
}

// resolve returns the corpus id a cited token names under the match key.
func (k *Checker) resolve(tok string) string {
	if _, ok := k.corpus.Entry(tok); ok {
		return tok
	}
	return k.byKey[Key(tok)]
}

// sentenceAt returns the sentence holding answer byte i.
func (a *analysis) sentenceAt(i int) sentence {
	for _, s := range a.sentences {
		if i >= s.start && i < s.end {
			return s
		}
	}
	if len(a.sentences) > 0 {
		return a.sentences[len(a.sentences)-1]
	}
	return sentence{}
}

// cited reports whether the answer cites id.
func (a *analysis) cited(id string) bool {
	return slices.ContainsFunc(a.cites, func(c citation) bool { return c.id == id })
}

// contains reports whether literal lit occurs in the answer: under the
// match key; a citation literal "[id]" also when id is cited in a group;
// a literal that is one quantity also when the answer states that value.
func (k *Checker) contains(a *analysis, lit string) bool {
	if containsKey(a.key, a.raw, lit) {
		return true
	}
	if id, ok := citationLiteral(lit); ok {
		if rid := k.resolve(id); rid != "" && a.cited(rid) {
			return true
		}
	}
	return k.statesQuantity(a, lit)
}

// statesQuantity reports whether lit is one quantity and the answer
// states that value.
func (k *Checker) statesQuantity(a *analysis, lit string) bool {
	if q, ok := k.quantityLiteral(lit); ok {
		for _, aq := range a.quantities {
			if aq.Same(q) && (aq.Unit != "" || q.Unit == "") {
				return true
			}
		}
	}
	return false
}

// containsRequired is contains for a must_contain literal, which also
// matches in natural form when it is words: the case's subject as
// subject_named finds it (modifiers between its words, possessive,
// prepositional, inflected, reordered in its sentence), a required
// qualifier as required_qualifiers finds it, and any other phrase as its
// words in order with at most phraseGap words between them, inflected.
// Other literals with digits and ids of the corpus (entry or source ids) match
// only as written (under the match key). A citation literal is read as
// contains reads it; any other literal only in the prose, so the words of
// a cited id ("[argent-wick-trim]") do not name "argent wick".
func (k *Checker) containsRequired(a *analysis, gc Case, lit string) bool {
	if _, ok := citationLiteral(lit); ok {
		return k.contains(a, lit)
	}
	if containsKey(a.proseKey, a.prose, lit) || k.statesQuantity(a, lit) {
		return true
	}
	if slices.Contains(gc.RequiredQualifiers, lit) {
		found, _ := qualifierOccurrences(a, lit)
		return found
	}
	if strings.ContainsFunc(lit, func(r rune) bool { return digitLookalike(r) != 0 }) || k.isID(lit) {
		return false
	}
	if gc.Subject != "" && Key(lit) == Key(gc.Subject) {
		named, _ := a.subjectUse(gc.Subject)
		return named
	}
	return a.phraseFound(lit)
}

// isID reports whether lit is, under the match key, a chunk id or a
// source id of the corpus.
func (k *Checker) isID(lit string) bool {
	if k.resolve(lit) != "" {
		return true
	}
	return slices.ContainsFunc(k.sources(), func(s string) bool { return Key(s) == Key(lit) })
}

// otherSubject returns a subject of another chunk of the corpus (one whose
// match key differs from the case's) that the answer names, or "": written
// as it is (under the match key, outside the words the case's own subject
// uses), its words that the case's subject lacks standing together in one
// sentence ("the mantle" names "lamp mantle" for a "lamp wick" case), or
// two or more of those words written as one ("CapeRock").
func (k *Checker) otherSubject(a *analysis, gc Case, used []bool) string {
	own := pattern(gc.Subject, true)
	seen := map[string]bool{Key(gc.Subject): true}
	for _, e := range k.corpus.Entries {
		s := k.corpus.Subject(e)
		if s == "" || seen[Key(s)] {
			continue
		}
		seen[Key(s)] = true
		if containsKey(a.proseKey, a.prose, s) {
			return s
		}
		var distinct []string
		for _, st := range pattern(s, true) {
			if !slices.Contains(own, st) {
				distinct = append(distinct, st)
			}
		}
		if len(distinct) > 0 && a.namesNatural(distinct, used) {
			return s
		}
		// Its distinct words written as one ("CapeRock" for "cape rock
		// lamp" in a "gull point lamp" case).
		var joined strings.Builder
		for _, sp := range wordSpans(s) {
			if st := stemWord(sp.w); slices.Contains(distinct, st) && !slices.Contains(own, st) {
				joined.WriteString(strings.ReplaceAll(Key(sp.w), " ", ""))
			}
		}
		if j := joined.String(); len(distinct) > 1 && j != "" && strings.Contains(strings.ReplaceAll(a.proseKey.s, " ", ""), j) {
			return s
		}
	}
	return ""
}

// containsForbidden is contains for forbidden literals: a bare number in
// the answer also matches a forbidden quantity, and so do numbers the
// answer states without a unit word (see parseValues: "twelve", "12th",
// "a dozen", "three quarters"); a literal with digits also matches its
// numbers written in words ("cone six" for "cone 6").
func (k *Checker) containsForbidden(a *analysis, lit string) bool {
	if k.contains(a, lit) {
		return true
	}
	q, ok := k.quantityLiteral(lit)
	if !ok {
		q, ok = k.labelledNumber(lit)
	}
	if ok {
		for _, aq := range a.valueQuantities(k.units) {
			if aq.Same(q) {
				return true
			}
		}
	}
	if strings.ContainsFunc(lit, func(r rune) bool { return digitLookalike(r) != 0 }) {
		d := digitizeWords(a.folded.s)
		if d != a.folded.s && containsKey(keyText(d), d, lit) {
			return true
		}
	}
	return false
}

// valueQuantities returns the quantities of the prose read with
// parseValues, computed once.
func (a *analysis) valueQuantities(u *units) []Quantity {
	if a.values == nil {
		a.values = u.parseValues(a.folded.s)
	}
	return a.values
}

func citationLiteral(lit string) (string, bool) {
	lit = strings.TrimSpace(lit)
	if len(lit) > 2 && lit[0] == '[' && lit[len(lit)-1] == ']' {
		return lit[1 : len(lit)-1], true
	}
	return "", false
}

// quantityLiteral returns the quantity a literal states when the literal is
// one number with its unit ("9 drams", "nine drams") and nothing else.
func (k *Checker) quantityLiteral(lit string) (Quantity, bool) {
	f := foldText(lit).s
	qs := k.units.parse(f)
	if len(qs) != 1 {
		return Quantity{}, false
	}
	rest := strings.TrimSpace(f[:qs[0].Start] + f[qs[0].End:])
	return qs[0], rest == ""
}

// labelledNumber returns the number of a literal that is one word and then
// one bare number ("cone 6", "grade 3"), as a quantity without a unit: in
// a forbidden literal the number alone is the sibling's value, so the
// answer may not state it however it is labelled or spelled ("six
// elsewhere", "the 6th").
func (k *Checker) labelledNumber(lit string) (Quantity, bool) {
	f := foldText(lit).s
	qs := k.units.parse(f)
	if len(qs) != 1 || qs[0].Unit != "" {
		return Quantity{}, false
	}
	rest := strings.Fields(strings.TrimSpace(f[:qs[0].Start] + f[qs[0].End:]))
	if len(rest) != 1 {
		return Quantity{}, false
	}
	q := qs[0]
	q.Prev = ""
	return q, true
}

// forbiddenQuantities are the quantities of the case's forbidden values
// and of its forbidden literals that are one quantity.
func (k *Checker) forbiddenQuantities(gc Case) []Quantity {
	var out []Quantity
	for _, lit := range forbiddenLiterals(gc) {
		if q, ok := k.quantityLiteral(lit); ok {
			out = append(out, q)
		}
	}
	return out
}

func forbiddenLiterals(gc Case) []string {
	out := slices.Clone(gc.Forbidden)
	for _, v := range gc.ForbiddenValues {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// textHolds reports whether chunk id's text contains literal v under the
// match key.
func (k *Checker) textHolds(rec rag.Record, id, v string) bool {
	text := ""
	if e, ok := k.corpus.Entry(id); ok {
		text = e.Text
	} else {
		for _, c := range rec.Chunks {
			if c.ID == id {
				text = c.Text
			}
		}
	}
	return text != "" && containsKey(keyText(text), text, v)
}

// holds reports whether chunk id states q, in its text or (for a bare
// number) as one of its label values.
func (k *Checker) holds(rec rag.Record, id string, q Quantity) bool {
	qs, ok := k.held[id]
	if !ok {
		for _, c := range rec.Chunks {
			if c.ID == id {
				qs = k.units.parse(foldText(c.Text).s)
			}
		}
	}
	for _, h := range qs {
		if q.Same(h) {
			return true
		}
	}
	if q.Unit != "" {
		return false
	}
	if e, ok := k.corpus.Entry(id); ok {
		for _, f := range k.corpus.LabelFields {
			if v, err := strconv.ParseFloat(ragtext.LabelText(e.Metadata[f]), 64); err == nil && v == q.Value {
				return true
			}
		}
	}
	return false
}

// Check grades rec against gc. Literal checks (must_contain, forbidden,
// source id, qualifiers, subjects, citations) compare match keys: NFKC,
// case folding and the TR39 confusable skeleton, so a literal written in
// another case or with lookalike letters still matches. Values compare as
// quantities ("four pints" = "4 pints" = "4-pint"). Abstention alone is
// byte-for-byte. Checks that do not apply to the case are omitted, so
// every returned check constrains something. gc should have been through
// Validate (which derives its subjects); Check derives them itself when
// it was not.
func (k *Checker) Check(gc Case, rec rag.Record) []Check {
	if gc.Subject == "" && !gc.ExpectAbstention {
		gc = deriveSubjects(gc, k.corpus)
	}
	var out []Check
	add := func(name string, ok bool, detail string) {
		if ok && detail == "" {
			detail = "ok"
		}
		out = append(out, Check{Name: name, OK: ok, Detail: detail})
	}
	a := k.analyse(rec.Answer)

	if n := len(gc.ExpectedRankedIDs); n > 0 {
		ok := len(rec.RetrievedIDs) >= n && slices.Equal(rec.RetrievedIDs[:n], gc.ExpectedRankedIDs)
		add(CheckRankedIDs, ok, detailIf(!ok, "retrieved %v, expected to begin with %v", rec.RetrievedIDs, gc.ExpectedRankedIDs))
	}

	if len(gc.CollisionSiblingIDs) > 0 {
		var present, missing []string
		for _, id := range gc.CollisionSiblingIDs {
			if slices.Contains(rec.RetrievedIDs, id) && strings.Contains(rec.ContextPayload, "[CONTEXT id="+id+" ") {
				present = append(present, id)
			} else {
				missing = append(missing, id)
			}
		}
		add(CheckCollisionInContext, len(present) > 0, detailIf(len(present) == 0, "no collision sibling in the context: %q", missing))
	}

	if gc.ExpectedValue != "" {
		ok := k.contains(a, gc.ExpectedValue)
		add(CheckExpectedValue, ok, detailIf(!ok, "answer lacks %q", gc.ExpectedValue))
		neg := ok && k.valueNegated(a, gc.ExpectedValue)
		add(CheckValueNegated, !neg, detailIf(neg, "the value %q is negated or multiplied in its clause", gc.ExpectedValue))
	}

	if len(gc.MustContain) > 0 {
		var missing []string
		for _, s := range gc.MustContain {
			if !k.containsRequired(a, gc, s) {
				missing = append(missing, s)
			}
		}
		add(CheckMustContain, len(missing) == 0, detailList("missing", missing))
	}

	if forbidden := forbiddenLiterals(gc); len(forbidden) > 0 {
		var present []string
		for _, s := range forbidden {
			if k.containsForbidden(a, s) {
				present = append(present, s)
			}
		}
		add(CheckForbiddenAbsent, len(present) == 0, detailList("present", present))
	}

	if gc.ExpectAbstention {
		ok := rec.Answer == rag.Abstention
		add(CheckAbstention, ok, detailIf(!ok, "answer %q is not exactly %q", clip(rec.Answer), rag.Abstention))
	} else {
		ok := rec.Answer != rag.Abstention
		add(CheckAbstention, ok, detailIf(!ok, "abstained on an answerable question"))

		var missing []string
		if !a.cited(gc.ExpectedRetrievedID) {
			missing = append(missing, rag.Cite(gc.ExpectedRetrievedID))
		}
		if !containsKey(a.proseKey, a.prose, gc.ExpectedSourceID) {
			missing = append(missing, gc.ExpectedSourceID)
		}
		add(CheckSourceCited, len(missing) == 0, detailList("not cited", missing))
	}

	if len(gc.RequiredQualifiers) > 0 {
		var missing, negated []string
		for _, q := range gc.RequiredQualifiers {
			found, neg := qualifierOccurrences(a, q)
			if !found {
				missing = append(missing, q)
			}
			if neg {
				negated = append(negated, q)
			}
		}
		add(CheckQualifiers, len(missing) == 0, detailList("dropped", missing))
		add(CheckQualifierNegated, len(negated) == 0, detailList("negated", negated))
	}

	if gc.Subject != "" {
		named, used := a.subjectUse(gc.Subject)
		ok, detail := named, ""
		if !named {
			if other := k.otherSubject(a, gc, used); other != "" {
				detail = fmt.Sprintf("answer names %q and not the subject %q", other, gc.Subject)
			} else {
				ok, detail = true, "names no subject: the question's subject stands"
			}
		}
		add(CheckSubjectNamed, ok, detail)
		if len(gc.SiblingSubjects) > 0 {
			// The case's own subject is masked first, so a sibling subject
			// that is part of it ("lamp" in "lamp wick") is not counted.
			masked := maskKey(a.proseKey.s, Key(gc.Subject))
			var named []string
			for _, s := range gc.SiblingSubjects {
				if slices.ContainsFunc(gc.AllowedSubjects, func(x string) bool { return Key(x) == Key(s) }) {
					continue
				}
				if strings.Contains(masked, Key(s)) || a.namesNatural(pattern(s, true), used) {
					named = append(named, s)
				}
			}
			add(CheckSiblingSubject, len(named) == 0, detailList("names a collision sibling's subject", named))
		}
	}

	ungrounded := k.ungrounded(a, rec)
	add(CheckNumericGrounding, len(ungrounded) == 0, detailList("not held by a chunk cited in its sentence", ungrounded))

	var unknown, unretrieved, mixed []string
	for _, c := range a.cites {
		if c.id == "" {
			unknown = append(unknown, c.written)
		}
		if c.id == "" || !slices.Contains(rec.RetrievedIDs, c.id) {
			unretrieved = append(unretrieved, c.written)
		}
		if mixedScript(c.written) || hasInvisible(c.written) || (c.id != "" && lookalike(c.written, c.id)) {
			mixed = append(mixed, rag.Cite(c.written))
		}
	}
	add(CheckCitationKnown, len(unknown) == 0, detailList("not in the corpus", unknown))
	add(CheckCitationRetrieved, len(unretrieved) == 0, detailList("not among the retrieved ids", unretrieved))

	if fq := k.forbiddenQuantities(gc); len(fq) > 0 || len(gc.ForbiddenValues) > 0 {
		var bad []string
		for _, c := range a.cites {
			if c.id == "" || c.id == gc.ExpectedRetrievedID || slices.Contains(bad, c.id) {
				continue
			}
			if slices.ContainsFunc(fq, func(q Quantity) bool { return k.holds(rec, c.id, q) }) ||
				slices.ContainsFunc(gc.ForbiddenValues, func(v string) bool { return k.textHolds(rec, c.id, v) }) {
				bad = append(bad, c.id)
			}
		}
		add(CheckSiblingCited, len(bad) == 0, detailList("cites a chunk holding a forbidden value", bad))
	}

	for _, src := range k.sources() {
		for _, i := range keyMatches(a.key, a.raw, src) {
			written := a.key.span(a.raw, i, i+len(Key(src)))
			if (lookalike(written, src) || hasInvisible(written)) && !slices.Contains(mixed, written) {
				mixed = append(mixed, written)
			}
		}
	}
	add(CheckMixedScript, len(mixed) == 0, detailList("lookalike letters or invisible characters in a cited or source id", mixed))
	return out
}

// sources returns the distinct source ids of the corpus.
func (k *Checker) sources() []string {
	var out []string
	for _, e := range k.corpus.Entries {
		if s := k.corpus.Source(e); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// maskKey blanks every occurrence of sub in key.
func maskKey(key, sub string) string {
	if sub == "" {
		return key
	}
	return strings.ReplaceAll(key, sub, strings.Repeat("\x00", len(sub)))
}

func detailList(prefix string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %q", prefix, items)
}

func detailIf(cond bool, format string, args ...any) string {
	if !cond {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// ungrounded returns the quantities of a that no chunk supporting their
// sentence holds.
func (k *Checker) ungrounded(a *analysis, rec rag.Record) []string {
	var out []string
	for _, q := range a.quantities {
		s := a.sentenceAt(a.folded.src[q.Start])
		held := slices.ContainsFunc(s.cited, func(w string) bool {
			id := k.resolve(w)
			return id != "" && k.holds(rec, id, q)
		})
		if !held && !slices.Contains(out, q.Text) {
			out = append(out, q.Text)
		}
	}
	return out
}
