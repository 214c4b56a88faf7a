// Package ragtext holds the text rules the RAG pipeline's generator and the
// golden checks must share: how a corpus metadata value reads as text, where
// a sentence ends, and how an entry is named in an error.
package ragtext

import (
	"fmt"
	"strconv"
	"strings"
)

// IDSuffix names an entry id in an error message: " (id \"x\")", or ""
// for an empty id.
func IDSuffix(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf(" (id %q)", id)
}

// LabelText is a metadata value as text: a string as is, an integer in
// decimal, anything else "".
func LabelText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// SplitSentences splits text after terminal punctuation (. ! ?) followed by
// whitespace, keeping each sentence's own bytes, trimmed of surrounding
// whitespace.
func SplitSentences(text string) []string {
	var out []string
	last := 0
	for i := 0; i+1 < len(text); i++ {
		if strings.IndexByte(".!?", text[i]) >= 0 && IsSpace(text[i+1]) {
			if s := strings.TrimSpace(text[last : i+1]); s != "" {
				out = append(out, s)
			}
			last = i + 1
		}
	}
	if rest := strings.TrimSpace(text[last:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

// IsSpace reports whether b is a space, tab, carriage return or newline.
func IsSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }
