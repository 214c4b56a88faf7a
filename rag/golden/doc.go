// Package golden holds the golden cases of a RAG corpus and the checks of
// an answer against them: the golden file format (Case, Load, Parse),
// Validate, which derives each case's subjects from the corpus and checks
// the cases' evidence, the Checker, and the named Mutations and Controls that prove the checks
// catch wrong answers and pass right ones.
//
// A golden file is {"id": "...", "cases": [...]} where each case has the
// fields of Case (JSON names as tagged; "expected_grimoire_id" is
// accepted as the grimoire spelling of "expected_source_id").
// expected_ranked_ids is a prefix of the ranking (required unless
// expect_abstention); the case's subject and its siblings' subjects are
// derived from the corpus by Validate.
//
// # Checks
//
// Checker.Check compares literals by match key (Key: NFKC, case folding,
// TR39 confusable skeleton), values as quantities (digits, number words,
// hyphenated and abbreviated units), attributes every number to a chunk
// cited in its sentence, and checks citations (known, retrieved, not a
// sibling holding a forbidden value, no lookalike letters), the subject,
// and negated qualifiers. Mutations derives the wrong answers the checks
// must catch.
//
// An eval set for the RAG grader uses the verdryx eval-set shape (read by
// grading.LoadEvalSet):
//
//	{
//	  "id": "grimoire-golden-v1",
//	  "corpus": "corpus.json",
//	  "cases": [{"id": "<case_id>", "grader": "rag", "golden": "golden.json#<case_id>"}]
//	}
//
// Paths are relative to the eval-set file.
//
// Draft writes skeleton cases for chosen chunks (verdryx golden draft); their
// questions open with DraftMarker, which Parse refuses until replaced.
package golden
