package golden

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// What counts as a citation. The context payload labels each block with
// its chunk id ([CONTEXT id=<id> ...]) and the generator is told to cite
// blocks as [id]; everything else in square brackets is text: Markdown
// links and reference labels ([text][label]), footnotes ([^1]), console
// output ([unoptimized + debuginfo]), code (parts[0]). A bracket group of
// an answer is a citation group when
//
//  1. one of its tokens names a chunk id of the corpus (under the match
//     key: a citation of a real chunk, retrieved or not); else
//  2. it is not a group the corpus's own texts write in brackets (quoted
//     content, whatever its form); and one of its tokens has the form of
//     the corpus's ids (idForm) or begins with an id and a separator (a
//     made-up variant of a real id).
//
// Every token of a citation group is a citation, so a group that mixes a
// real id with a made-up one still fails citation_known. Any other group
// is content: it stays in the prose the literal checks read.

// bracketGroup is one [...] of a text: body is what stands between the
// first '[' and the first ']' after it; start and end span the brackets.
type bracketGroup struct {
	start, end int
	body       string
}

// bracketGroups returns the bracket groups of s in order. A '[' without a
// later ']' opens no group.
func bracketGroups(s string) []bracketGroup {
	var out []bracketGroup
	for i := 0; i < len(s); i++ {
		if s[i] != '[' {
			continue
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			break
		}
		out = append(out, bracketGroup{start: i, end: i + j + 1, body: s[i+1 : i+j]})
		i += j
	}
	return out
}

// citationTokens splits a group's body into its tokens: separated by
// commas, semicolons, white space and inner '[' ("[[id]]" cites id).
func citationTokens(body string) []string {
	return strings.FieldsFunc(body, func(r rune) bool { return r == ',' || r == ';' || r == '[' || unicode.IsSpace(r) })
}

// Sentinel classes of idForm: a letter and a digit of any script.
const (
	classLetter rune = -1
	classDigit  rune = -2
)

// idForm is the form of a corpus's chunk ids, learnt from the ids: the
// character classes every id has (a letter, a digit, each punctuation
// rune: "guide.md#setup-1" and "a.md#3" share '.', '#', a letter and a
// digit) and the punctuation some id has. A token has the form when it
// is made of letters, digits and that punctuation only and has every
// class all ids have. Classes are read after NFKC with format characters
// dropped and dashes as '-', so an invisible or fullwidth spelling of a
// made-up id still has the form.
type idForm struct {
	need    map[rune]bool
	allowed map[rune]bool
}

// newIDForm learns the form of ids.
func newIDForm(ids []string) idForm {
	f := idForm{need: map[rune]bool{}, allowed: map[rune]bool{}}
	for i, id := range ids {
		cs := idClasses(id)
		for c := range cs {
			if c >= 0 {
				f.allowed[c] = true
			}
		}
		if i == 0 {
			for c := range cs {
				f.need[c] = true
			}
			continue
		}
		for c := range f.need {
			if !cs[c] {
				delete(f.need, c)
			}
		}
	}
	return f
}

// idClasses returns the character classes of s (see idForm).
func idClasses(s string) map[rune]bool {
	out := map[rune]bool{}
	for _, r := range norm.NFKC.String(s) {
		switch {
		case invisible(r):
		case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r):
			out[classLetter] = true
		case unicode.IsDigit(r) || digitLookalike(r) != 0:
			out[classDigit] = true
		case unicode.Is(unicode.Pd, r) || r == '\u2212':
			out['-'] = true
		default:
			out[r] = true
		}
	}
	return out
}

// has reports whether tok has the form of the corpus's ids.
func (f idForm) has(tok string) bool {
	cs := idClasses(tok)
	if len(cs) == 0 {
		return false
	}
	for c := range cs {
		if c >= 0 && !f.allowed[c] {
			return false
		}
	}
	for c := range f.need {
		if !cs[c] {
			return false
		}
	}
	return true
}

// citationGroup reports whether the bracket group body is a citation
// group (see the rules above) and returns its tokens.
func (k *Checker) citationGroup(body string) ([]string, bool) {
	toks := citationTokens(body)
	for _, t := range toks {
		if k.resolve(t) != "" {
			return toks, true
		}
	}
	if len(toks) == 0 || k.quoted[Key(body)] {
		return nil, false
	}
	for _, t := range toks {
		if k.form.has(t) || k.variant(t) {
			return toks, true
		}
	}
	return nil, false
}

// variant reports whether tok, under the match key, is a chunk id of the
// corpus followed by a separator and more ("<id>-appendix").
// Ids are few enough to scan: only a token that is no citation of a
// real id and has not the corpus's id form comes here.
func (k *Checker) variant(tok string) bool {
	key := Key(tok)
	for _, id := range k.keys {
		if len(key) > len(id)+1 && strings.HasPrefix(key, id) && !isKeyWord(key[len(id)]) {
			return true
		}
	}
	return false
}

// isKeyWord reports whether byte b of a match key is part of a word.
func isKeyWord(b byte) bool {
	return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b >= 0x80
}
