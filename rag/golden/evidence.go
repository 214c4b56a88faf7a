package golden

import (
	"fmt"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/rag"
)

// ReferenceAnswer returns the answer a case's own evidence makes: the
// expected chunk's text, its citation and its source id, as
// "TEXT [id] (<source_field>: SOURCE)". For an abstention case it is
// Abstention; for a case whose expected chunk is not in c it is "".
func ReferenceAnswer(gc Case, c rag.Corpus) string {
	if gc.ExpectAbstention {
		return rag.Abstention
	}
	e, ok := c.Entry(gc.ExpectedRetrievedID)
	if !ok {
		return ""
	}
	field := c.SourceField
	if field == "" {
		field = "source"
	}
	return strings.TrimSpace(e.Text) + " " + rag.Cite(e.ID) + " (" + field + ": " + gc.ExpectedSourceID + ")"
}

// EvidenceRecord returns the record of a retrieval that went as the case
// expects, answered with answer: the expected ranked ids, then the
// collision siblings, each with its chunk and its context block in the
// payload. It is what the reference answer is graded against, so a
// failed check is a check that fails its own evidence, not retrieval.
func EvidenceRecord(gc Case, c rag.Corpus, answer string) rag.Record {
	rec := rag.Record{Question: gc.Question, Answer: answer}
	var blocks []string
	for _, id := range append(slices.Clone(gc.ExpectedRankedIDs), gc.CollisionSiblingIDs...) {
		if slices.Contains(rec.RetrievedIDs, id) {
			continue
		}
		e, ok := c.Entry(id)
		if !ok {
			continue
		}
		rec.RetrievedIDs = append(rec.RetrievedIDs, id)
		rec.Chunks = append(rec.Chunks, rag.Chunk{ID: id, Text: e.Text, Metadata: e.Metadata, Similarity: 1})
		rec.Similarities = append(rec.Similarities, 1)
		rec.Distances = append(rec.Distances, 0)
		blocks = append(blocks, c.Block(e))
	}
	rec.ContextPayload = strings.Join(blocks, "\n\n")
	return rec
}

// CheckEvidence grades the reference answer of every answerable case
// (ReferenceAnswer, retrieved as EvidenceRecord) with every golden check
// and returns an error naming the first case, with each check that fails
// and why: a golden case whose checks fail the cited chunk's own words
// would grade correct answers wrong, so it is an input error, not a
// measurement. cases should have been through Validate.
func CheckEvidence(cases []Case, c rag.Corpus) error {
	k := NewChecker(c)
	for i, gc := range cases {
		if gc.ExpectAbstention {
			continue
		}
		ref := ReferenceAnswer(gc, c)
		if ref == "" {
			continue // Validate reports the missing chunk
		}
		var bad []string
		for _, ch := range k.Check(gc, EvidenceRecord(gc, c, ref)) {
			if !ch.OK {
				bad = append(bad, ch.Name+" ("+ch.Detail+")")
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("cases[%d] (case_id %q): the checks fail their own evidence, the reference answer %q: %s",
				i, gc.CaseID, clip(ref), strings.Join(bad, "; "))
		}
	}
	return nil
}
