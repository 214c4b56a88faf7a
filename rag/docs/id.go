package docs

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxSlug is the most bytes a heading's slug keeps.
const maxSlug = 40

func itoa(n int) string { return strconv.Itoa(n) }

// slug lowercases s and keeps its letters and digits, every other run of
// runes becoming one '-', trimmed of '-' and cut to maxSlug bytes; a title
// with neither letters nor digits is "section".
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			if b.Len()+utf8.RuneLen(r) > maxSlug {
				break
			}
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "section"
	}
	return out
}

// slugPath is the slugs of headings joined by '/'.
func slugPath(headings []string) string {
	parts := make([]string, len(headings))
	for i, h := range headings {
		parts[i] = slug(h)
	}
	return strings.Join(parts, "/")
}

// sourceSlug keeps the letters, digits, '.', '_', '-' and '/' of a slash
// path; any other rune becomes '-'.
func sourceSlug(p string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-/", r) {
			return r
		}
		return '-'
	}, p)
}

// chunkID is "<source slug>#<section key>-<ordinal>", or
// "<source slug>#<ordinal>" before the first heading.
func chunkID(source, key string, ord int) string {
	if key == "" {
		return sourceSlug(source) + "#" + itoa(ord)
	}
	return sourceSlug(source) + "#" + key + "-" + itoa(ord)
}
