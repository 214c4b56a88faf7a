package rag

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Check is the outcome of one golden check on one record.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Names of the golden checks, in the order CheckGolden reports them.
const (
	CheckRankedIDs          = "ranked_ids"
	CheckCollisionInContext = "collision_sibling_in_context"
	CheckExpectedValue      = "expected_value"
	CheckMustContain        = "must_contain"
	CheckForbiddenAbsent    = "forbidden_absent"
	CheckSourceCited        = "source_cited"
	CheckAbstention         = "abstention"
	CheckQualifiers         = "required_qualifiers"
	CheckNumericGrounding   = "numeric_grounding"
)

// CheckGolden grades rec against gc. Every check is a case-sensitive
// substring test except abstention, which is byte-for-byte equality. Checks
// that do not apply to the case (for example source citation on an
// abstention case, or qualifiers on a case without any) are omitted, so
// every returned check constrains something. It is pure and safe for
// concurrent use.
func CheckGolden(gc GoldenCase, rec Record) []Check {
	var out []Check
	add := func(name string, ok bool, detail string) {
		if ok && detail == "" {
			detail = "ok"
		}
		out = append(out, Check{Name: name, OK: ok, Detail: detail})
	}

	if slices.Equal(rec.RetrievedIDs, gc.ExpectedRankedIDs) {
		add(CheckRankedIDs, true, "")
	} else {
		add(CheckRankedIDs, false, fmt.Sprintf("retrieved %v, expected %v", rec.RetrievedIDs, gc.ExpectedRankedIDs))
	}

	if len(gc.CollisionSiblingIDs) > 0 {
		var missing []string
		for _, id := range gc.CollisionSiblingIDs {
			if !slices.Contains(rec.RetrievedIDs, id) || !strings.Contains(rec.ContextPayload, "[CONTEXT id="+id+" ") {
				missing = append(missing, id)
			}
		}
		add(CheckCollisionInContext, len(missing) == 0, detailList("sibling not in the context", missing))
	}

	if gc.ExpectedValue != "" {
		ok := strings.Contains(rec.Answer, gc.ExpectedValue)
		add(CheckExpectedValue, ok, detailIf(!ok, "answer lacks %q", gc.ExpectedValue))
	}

	if len(gc.MustContain) > 0 {
		var missing []string
		for _, s := range gc.MustContain {
			if !strings.Contains(rec.Answer, s) {
				missing = append(missing, s)
			}
		}
		add(CheckMustContain, len(missing) == 0, detailList("missing", missing))
	}

	forbidden := slices.Clone(gc.Forbidden)
	for _, v := range gc.ForbiddenValues {
		if !slices.Contains(forbidden, v) {
			forbidden = append(forbidden, v)
		}
	}
	if len(forbidden) > 0 {
		var present []string
		for _, s := range forbidden {
			if strings.Contains(rec.Answer, s) {
				present = append(present, s)
			}
		}
		add(CheckForbiddenAbsent, len(present) == 0, detailList("present", present))
	}

	if gc.ExpectAbstention {
		ok := rec.Answer == Abstention
		add(CheckAbstention, ok, detailIf(!ok, "answer %q is not exactly %q", clip(rec.Answer), Abstention))
	} else {
		ok := rec.Answer != Abstention
		add(CheckAbstention, ok, detailIf(!ok, "abstained on an answerable question"))

		var missing []string
		if !strings.Contains(rec.Answer, Cite(gc.ExpectedRetrievedID)) {
			missing = append(missing, Cite(gc.ExpectedRetrievedID))
		}
		if !strings.Contains(rec.Answer, gc.ExpectedSourceID) {
			missing = append(missing, gc.ExpectedSourceID)
		}
		add(CheckSourceCited, len(missing) == 0, detailList("not cited", missing))
	}

	if len(gc.RequiredQualifiers) > 0 {
		var missing []string
		for _, q := range gc.RequiredQualifiers {
			if !strings.Contains(rec.Answer, q) {
				missing = append(missing, q)
			}
		}
		add(CheckQualifiers, len(missing) == 0, detailList("dropped", missing))
	}

	ungrounded := UngroundedNumbers(rec)
	add(CheckNumericGrounding, len(ungrounded) == 0, detailList("not in any cited chunk", ungrounded))
	return out
}

// Passed reports whether every check is OK.
func Passed(checks []Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
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

// UngroundedNumbers returns each number-with-unit of rec.Answer that occurs
// in no chunk the answer cites. A number-with-unit is a number with the word
// after it ("11 grains", "7 moon-phases") or, when none follows, the word
// before it ("hardness 8"). Citation markers are ignored. An answer with
// numbers and no citation has every number ungrounded.
func UngroundedNumbers(rec Record) []string {
	var cited []string
	for _, c := range rec.Chunks {
		if strings.Contains(rec.Answer, Cite(c.ID)) {
			cited = append(cited, c.Text)
		}
	}
	var out []string
	for _, q := range numbersWithUnits(stripCitations(rec.Answer)) {
		found := slices.ContainsFunc(cited, func(t string) bool { return strings.Contains(t, q) })
		if !found && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

func stripCitations(s string) string {
	var sb strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '[':
			depth++
		case r == ']' && depth > 0:
			depth--
			sb.WriteRune(' ')
		case depth == 0:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// numbersWithUnits scans s for numbers (digits with optional . or ,
// separators) standing alone as tokens and pairs each with its unit word.
func numbersWithUnits(s string) []string {
	rs := []rune(s)
	isWord := func(r rune) bool { return unicode.IsLetter(r) || r == '-' }
	var out []string
	for i := 0; i < len(rs); i++ {
		if !unicode.IsDigit(rs[i]) || (i > 0 && (unicode.IsLetter(rs[i-1]) || unicode.IsDigit(rs[i-1]) || rs[i-1] == '-')) {
			continue
		}
		j := i
		for j < len(rs) && (unicode.IsDigit(rs[j]) || ((rs[j] == '.' || rs[j] == ',') && j+1 < len(rs) && unicode.IsDigit(rs[j+1]))) {
			j++
		}
		if j < len(rs) && (unicode.IsLetter(rs[j]) || rs[j] == '-') {
			i = j
			continue // part of an identifier such as 3rd or 2-b
		}
		num := string(rs[i:j])
		k := j
		for k < len(rs) && rs[k] == ' ' {
			k++
		}
		if k > j && k < len(rs) && unicode.IsLetter(rs[k]) {
			e := k
			for e < len(rs) && isWord(rs[e]) {
				e++
			}
			out = append(out, num+" "+strings.TrimRight(string(rs[k:e]), "-"))
		} else {
			b := i
			for b > 0 && rs[b-1] == ' ' {
				b--
			}
			w := b
			for w > 0 && isWord(rs[w-1]) {
				w--
			}
			if w < b {
				out = append(out, string(rs[w:b])+" "+num)
			} else {
				out = append(out, num)
			}
		}
		i = j
	}
	return out
}
