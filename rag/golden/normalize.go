package golden

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// mapped is a text transformed rune by rune, remembering for every output
// byte which byte of the source text produced it, so a match found in the
// transformed text can be traced back to what the answer actually wrote.
type mapped struct {
	s string
	// src[i] is the byte offset in the source of the rune that produced
	// s[i]; src[len(s)] is the source length.
	src []int
}

// span returns the source bytes [src[i], src[j]) for a match s[i:j].
func (m mapped) span(source string, i, j int) string {
	return source[m.src[i]:m.src[j]]
}

// digitLookalike returns the ASCII digit r is a confusable of (Cyrillic З
// for 3, fullwidth digits after NFKC, ...) or the value of a decimal digit
// of another script (Arabic-Indic ١٢, Devanagari १२, which NFKC keeps),
// or 0.
func digitLookalike(r rune) byte {
	if r < utf8.RuneSelf {
		if r >= '0' && r <= '9' {
			return byte(r)
		}
		return 0
	}
	n := norm.NFKC.String(string(r))
	if q, sz := utf8.DecodeRuneInString(n); sz == len(n) && unicode.Is(unicode.Nd, q) {
		return '0' + ndValue(q)
	}
	sk := confusables.Skeleton(n)
	if len(sk) == 1 && sk[0] >= '0' && sk[0] <= '9' {
		return sk[0]
	}
	return 0
}

// ndValue returns the value of decimal digit r (Unicode Nd). Unicode
// encodes every decimal digit set as ten contiguous code points from 0 to
// 9, so the offset from the start of r's run of digits, modulo 10, is its
// value.
func ndValue(r rune) byte {
	start := r
	for unicode.Is(unicode.Nd, start-1) {
		start--
	}
	return byte((r - start) % 10)
}

// invisible reports a format character (Unicode Cf: zero-width space,
// soft hyphen, word joiner, bidi marks, ZWJ/ZWNJ, BOM), which renders as
// nothing and is dropped from folded text and match keys.
func invisible(r rune) bool { return r >= utf8.RuneSelf && unicode.Is(unicode.Cf, r) }

// hasInvisible reports whether s holds a format character.
func hasInvisible(s string) bool { return strings.IndexFunc(s, invisible) >= 0 }

// foldText maps s rune by rune through NFKC and Unicode case folding, and
// maps digit lookalikes and other scripts' digits to the ASCII digit, and
// drops format characters: the text numbers, sentences and citations are
// read from.
func foldText(s string) mapped {
	caser := cases.Fold()
	var sb strings.Builder
	src := make([]int, 0, len(s)+1)
	for i, r := range s {
		var out string
		if invisible(r) {
			continue
		} else if d := digitLookalike(r); d != 0 {
			out = string(rune(d))
		} else if r < utf8.RuneSelf {
			out = string(unicode.ToLower(r))
		} else {
			out = caser.String(norm.NFKC.String(string(r)))
		}
		sb.WriteString(out)
		for range len(out) {
			src = append(src, i)
		}
	}
	src = append(src, len(s))
	return mapped{s: sb.String(), src: src}
}

// isSeparator reports the runes a literal match treats as one space:
// whitespace, hyphens and dashes, underscores.
func isSeparator(r rune) bool {
	return unicode.IsSpace(r) || r == '_' || unicode.Is(unicode.Pd, r) || r == '\u2212'
}

// keyRune appends the match key of one source rune to sb: NFKC; for a
// non-ASCII rune its TR39 confusable prototype taken in its own letter case
// (Cyrillic М looks like M, not like м); case folding; the skeleton of what
// remains; no combining marks; no format characters (Cf); separators as a space; and l for I, 1 and
// | merged with i, since folding makes I an i while TR39 makes it an l.
func keyRune(sb *strings.Builder, caser cases.Caser, r rune) {
	if invisible(r) {
		return
	}
	if d := digitLookalike(r); d != 0 {
		r = rune(d)
	}
	if r >= utf8.RuneSelf {
		s := norm.NFKC.String(string(r))
		if !isSeparator(r) {
			s = confusables.Skeleton(s)
		}
		for _, q := range caser.String(s) {
			keyASCII(sb, caser, q)
		}
		return
	}
	keyASCII(sb, caser, unicode.ToLower(r))
}

func keyASCII(sb *strings.Builder, caser cases.Caser, r rune) {
	switch {
	case isSeparator(r):
		sb.WriteByte(' ')
	case r == 'm':
		sb.WriteString("rn")
	case r == '0':
		sb.WriteByte('o')
	case r == '1' || r == 'l' || r == '|':
		sb.WriteByte('i')
	case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == ' '):
		sb.WriteRune(r)
	default:
		for _, q := range norm.NFD.String(caser.String(confusables.Skeleton(string(r)))) {
			switch {
			case unicode.Is(unicode.Mn, q):
			case isSeparator(q):
				sb.WriteByte(' ')
			case q == 'm':
				sb.WriteString("rn")
			case q == '1' || q == 'l' || q == '|':
				sb.WriteByte('i')
			default:
				sb.WriteRune(q)
			}
		}
	}
}

// keyText maps s to its match key rune by rune (see keyRune; TR39
// skeletons from golang.org/x/text and the github.com/mtibben/confusables
// table), runs of separators collapsed to one space. Offsets point into s.
func keyText(s string) mapped {
	caser := cases.Fold()
	var sb, rb strings.Builder
	src := make([]int, 0, len(s)+1)
	lastSpace := true // drops leading separators
	for i, r := range s {
		rb.Reset()
		keyRune(&rb, caser, r)
		for _, q := range rb.String() {
			if q == ' ' {
				if lastSpace {
					continue
				}
				lastSpace = true
			} else {
				lastSpace = false
			}
			sb.WriteRune(q)
			for range utf8.RuneLen(q) {
				src = append(src, i)
			}
		}
	}
	src = append(src, len(s))
	return mapped{s: sb.String(), src: src}
}

// Key returns the match key of s (see keyText) with surrounding spaces
// trimmed. Two literals match when their keys are equal; a literal occurs
// in an answer when its key occurs in the answer's key.
func Key(s string) string { return strings.TrimSpace(keyText(s).s) }

// loose returns s folded (NFKC, case folding) without combining marks and
// with separators collapsed, but without the confusable skeleton: what
// tells a lookalike spelling from a case or hyphenation variant.
func loose(s string) string {
	var sb strings.Builder
	space := true
	for _, r := range norm.NFD.String(foldText(s).s) {
		switch {
		case unicode.Is(unicode.Mn, r):
		case isSeparator(r):
			if !space {
				sb.WriteByte(' ')
			}
			space = true
		default:
			sb.WriteRune(r)
			space = false
		}
	}
	return strings.TrimSpace(sb.String())
}

// keyMatches returns the byte offsets in hay.s where the key of lit occurs
// on whole source characters, not inside a word (a literal starting with a
// letter does not match after a letter: "at dawn" is not in "that dawn")
// and not inside a longer number (a literal starting or ending with a
// digit does not match next to a digit).
func keyMatches(hay mapped, source, lit string) []int {
	return keyMatchesIn(hay, source, lit, true)
}

// keyMatchesIn is keyMatches; with wordStart false a literal may also
// match glued to letters before it ("undistilled" for "distilled").
func keyMatchesIn(hay mapped, source, lit string, wordStart bool) []int {
	k := Key(lit)
	if k == "" {
		return nil
	}
	firstDigit, lastDigit, firstLetter := false, false, false
	if r, _ := utf8.DecodeRuneInString(strings.TrimSpace(lit)); digitLookalike(r) != 0 {
		firstDigit = true
	} else if unicode.IsLetter(r) {
		firstLetter = true
	}
	if r, _ := utf8.DecodeLastRuneInString(strings.TrimSpace(lit)); digitLookalike(r) != 0 {
		lastDigit = true
	}
	var out []int
	for off := 0; off <= len(hay.s)-len(k); {
		i := strings.Index(hay.s[off:], k)
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		start, end := hay.src[i], hay.src[i+len(k)]
		if (i > 0 && hay.src[i-1] == start) || hay.src[i+len(k)-1] == end {
			continue // starts or ends inside one character's key (the n of m's "rn")
		}
		if firstLetter && wordStart {
			if r, _ := utf8.DecodeLastRuneInString(source[:start]); unicode.IsLetter(r) {
				continue
			}
		}
		if firstDigit {
			if r, _ := utf8.DecodeLastRuneInString(source[:start]); digitLookalike(r) != 0 {
				continue
			}
		}
		if lastDigit {
			if r, _ := utf8.DecodeRuneInString(source[end:]); digitLookalike(r) != 0 {
				continue
			}
		}
		out = append(out, i)
	}
	return out
}

// containsKey reports whether lit occurs in source under the match key.
func containsKey(hay mapped, source, lit string) bool {
	return len(keyMatches(hay, source, lit)) > 0
}

// mixedScript reports whether the letters of s come from more than one
// script (Common and Inherited letters, such as digits, do not count).
func mixedScript(s string) bool {
	var first *unicode.RangeTable
	for _, r := range s {
		if !unicode.IsLetter(r) {
			continue
		}
		t := scriptOf(r)
		if t == nil {
			continue
		}
		if first == nil {
			first = t
		} else if t != first {
			return true
		}
	}
	return false
}

// scriptOf returns the script table of a letter, checking the scripts that
// carry Latin lookalikes first.
func scriptOf(r rune) *unicode.RangeTable {
	for _, t := range []*unicode.RangeTable{unicode.Latin, unicode.Cyrillic, unicode.Greek, unicode.Armenian, unicode.Cherokee, unicode.Coptic} {
		if unicode.Is(t, r) {
			return t
		}
	}
	for _, t := range unicode.Scripts {
		if t != unicode.Common && t != unicode.Inherited && unicode.Is(t, r) {
			return t
		}
	}
	return nil
}

// lookalike reports whether written (as it appears in an answer) renders
// like want but is spelled with other characters: its match key equals
// want's while its folded spelling differs, or it mixes scripts.
func lookalike(written, want string) bool {
	return mixedScript(written) || (Key(written) == Key(want) && loose(written) != loose(want))
}
