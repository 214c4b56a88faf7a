package rag

import (
	"strings"
	"unicode"
	"unicode/utf8"
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
)

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
//     collision sibling's different subject;
//   - wrong-source-id: the expected source id replaced by a sibling's;
//   - dropped-qualifier: each required qualifier deleted;
//   - dropped-citation: the [chunk-id] marker deleted;
//   - false-abstention: the answer replaced by the abstention string;
//   - invented-answer (abstention cases): a confident answer assembled from
//     the top retrieved chunk's text, citation and source.
//
// Everything is derived from the case fields and the corpus; nothing names
// a fixture literal. A mutation whose edit would not change the answer is
// not returned.
func Mutations(gc GoldenCase, rec Record, c Corpus) []Mutation {
	var out []Mutation
	add := func(name, target, answer string) {
		if answer != rec.Answer {
			out = append(out, Mutation{Name: name, Target: target, Answer: answer})
		}
	}
	a := rec.Answer
	if gc.ExpectAbstention {
		if len(rec.Chunks) > 0 {
			top := rec.Chunks[0]
			invented := firstSentence(top.Text) + " " + Cite(top.ID)
			if src := labelText(top.Metadata[c.SourceField]); src != "" {
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
			add(MutSwappedSynonym, s+" for "+subject, outsideCitations(a, func(t string) string { return replaceFold(t, subject, s) }))
		}
		if src := c.Source(sib); src != "" && src != gc.ExpectedSourceID && gc.ExpectedSourceID != "" {
			add(MutWrongSourceID, src+" for "+gc.ExpectedSourceID, strings.ReplaceAll(a, gc.ExpectedSourceID, src))
		}
	}
	for _, q := range gc.RequiredQualifiers {
		add(MutDroppedQualifier, q, squeeze(strings.ReplaceAll(a, q, "")))
	}
	add(MutDroppedCitation, Cite(gc.ExpectedRetrievedID), squeeze(strings.ReplaceAll(a, Cite(gc.ExpectedRetrievedID), "")))
	add(MutFalseAbstention, Abstention, Abstention)
	return out
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
	if s := splitSentences(text); len(s) > 0 {
		return s[0]
	}
	return text
}
