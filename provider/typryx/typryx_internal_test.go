package typryx

import (
	"regexp"
	"strings"
	"testing"
)

// TestCodeAndAnswerIDChecksMatchTheirPatterns: the hand-written checks
// agree with the patterns they replace on edges and random strings.
func TestCodeAndAnswerIDChecksMatchTheirPatterns(t *testing.T) {
	code := regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	id := regexp.MustCompile(`^[0-9a-f]{32}$`)
	cases := []string{"", "a", "A", "_a", "1a", "bad_request", "a-b", "a b", "é", strings.Repeat("a", 64), strings.Repeat("a", 65),
		strings.Repeat("0", 32), strings.Repeat("f", 32), strings.Repeat("F", 32), strings.Repeat("0", 31), strings.Repeat("0", 33), strings.Repeat("g", 32)}
	const alphabet = "az09_AZ-gf "
	seed := uint32(1)
	for n := 0; n < 2000; n++ {
		var b strings.Builder
		seed = seed*1664525 + 1013904223
		for i := 0; i < int(seed>>27)+int(seed>>20&31); i++ {
			seed = seed*1664525 + 1013904223
			b.WriteByte(alphabet[int(seed>>24)%len(alphabet)])
		}
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		if isCode(c) != code.MatchString(c) {
			t.Errorf("isCode(%q) = %v, the pattern says %v", c, isCode(c), !isCode(c))
		}
		if isAnswerID(c) != id.MatchString(c) {
			t.Errorf("isAnswerID(%q) = %v, the pattern says %v", c, isAnswerID(c), !isAnswerID(c))
		}
	}
}
