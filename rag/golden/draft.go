package golden

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/docs"
)

// DraftMarker opens the question of every case Draft writes. Parse
// refuses a question that still holds it (naming the case and the field),
// so a drafted golden file grades nothing until someone has written each
// question.
const DraftMarker = "TODO(golden draft)"

// Draft returns a skeleton golden case for each chunk id of c, in the order
// given: case_id, expected_retrieved_id and expected_ranked_ids are the
// chunk's id; expected_source_id is its source (c.Source); must_contain
// holds that source, the citation [id] and, as candidates to keep or
// delete, each number with a unit the chunk's prose states, written as the
// text writes it and read the way the checks read quantities (the default
// units, the corpus's "units", and the words the corpus writes after
// digits). For a chunk of a Markdown document the prose is docs.Prose's:
// no code, console output, inline code, HTML or caption; in any text a
// number glued to an identifier (THREE_HOURS, v2_5mb) is no candidate.
// The question is a placeholder opening with DraftMarker, quoting
// the start of the chunk's text. Once its question is written a drafted
// case passes Parse and Validate: every literal it requires is the
// chunk's own text, its citation or its source. Errors name an id that is
// not in c, a repeated id, and a chunk without a source.
func Draft(c rag.Corpus, ids []string) ([]Case, error) {
	u := newUnits(c.Units)
	u.observe(c)
	prose := docs.Prose(c)
	seen := map[string]bool{}
	out := make([]Case, 0, len(ids))
	for _, id := range ids {
		e, ok := c.Entry(id)
		if !ok {
			return nil, fmt.Errorf("chunk %q is not in corpus %q", id, c.ID)
		}
		if seen[id] {
			return nil, fmt.Errorf("chunk %q is asked for twice", id)
		}
		seen[id] = true
		src := c.Source(e)
		if src == "" {
			return nil, fmt.Errorf("chunk %q has no source (its %q is null): a golden case names the source an answer repeats", id, c.SourceField)
		}
		out = append(out, Case{
			CaseID:              id,
			Question:            fmt.Sprintf("%s: write the question chunk %s answers. It reads: %s", DraftMarker, id, excerpt(e.Text, 120)),
			ExpectedRetrievedID: id,
			ExpectedRankedIDs:   []string{id},
			ExpectedSourceID:    src,
			MustContain:         append([]string{src, rag.Cite(id)}, u.writtenIn(e.Text, prose, id)...),
		})
	}
	return out, nil
}

// writtenIn returns the quantities of chunk id's text (written), read
// only in its prose ranges when prose has them.
func (u *units) writtenIn(text string, prose map[string][][2]int, id string) []string {
	rs, ok := prose[id]
	if !ok {
		return u.written(text, nil)
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		out = append(out, u.written(text[r[0]:r[1]], seen)...)
	}
	return out
}

// written returns each quantity of text that has a unit, as text writes it
// (one per match key not in seen, in text order; seen records them), but
// not one glued to an identifier: holding '_', or with a letter, digit or
// '_' right before or after it.
func (u *units) written(text string, seen map[string]bool) []string {
	f := foldText(text)
	var out []string
	if seen == nil {
		seen = map[string]bool{}
	}
	for _, q := range u.parse(f.s) {
		if q.Unit == "" {
			continue
		}
		s, e := f.src[q.Start], f.src[q.End]
		lit := strings.TrimSpace(text[s:e])
		if lit == "" || seen[Key(lit)] || strings.ContainsRune(lit, '_') || identRune(text[:s], true) || identRune(text[e:], false) {
			continue
		}
		seen[Key(lit)] = true
		out = append(out, lit)
	}
	return out
}

// identRune reports whether the rune at the end (last) or the start of s
// is a letter, a digit or '_'.
func identRune(s string, last bool) bool {
	var r rune
	if last {
		r, _ = utf8.DecodeLastRuneInString(s)
	} else {
		r, _ = utf8.DecodeRuneInString(s)
	}
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// excerpt returns the first n runes of s with its whitespace collapsed,
// with "..." when it was cut.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}
