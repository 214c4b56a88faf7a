// Package rag is the retrieval-augmented ask pipeline: it embeds a
// question, retrieves the top-k chunks of a corpus from an index.Index,
// builds a citation-labelled context payload and the generation messages,
// generates an answer and returns a Record capturing every stage. It also
// owns the corpus and golden-case file formats, the golden checks and the
// named mutations that prove the checks bite.
//
// # Files
//
// A corpus file is a JSON object:
//
//	{
//	  "id": "grimoire-v1",
//	  "label_fields": ["grimoire_id", "folio"],
//	  "source_field": "grimoire_id",
//	  "subject_field": "subject",
//	  "entries": [{"id": "...", "text": "...", "grimoire_id": "...", "folio": 21, ...}]
//	}
//
// Every entry has a unique non-blank "id" and a non-blank "text"; every other
// member is metadata. label_fields name the metadata that forms the citation
// label of a context block, in order; each is a non-blank string, an integer
// or null, and at least one is non-null per entry. source_field (one of the
// label fields) is the source identifier an answer must repeat;
// subject_field (optional) names what an entry is about, which the offline
// generator matches against the question. Nothing else is domain-specific,
// so a corpus of another domain needs no code change.
//
// A corpus may declare "units": {"<canonical>": ["<spelling>", ...]},
// added to DefaultUnits when answers are read as quantities.
//
// A golden file is {"id": "...", "cases": [...]} where each case has the
// fields of GoldenCase (JSON names as tagged; "expected_grimoire_id" is
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
// An eval set for the RAG grader uses the verdryx eval-set shape:
//
//	{
//	  "id": "grimoire-golden-v1",
//	  "corpus": "corpus.json",
//	  "cases": [{"id": "<case_id>", "grader": "rag", "golden": "golden.json#<case_id>"}]
//	}
//
// Paths are relative to the eval-set file. LoadEvalSet resolves and
// validates all of it.
//
// # Context payload
//
// One block per retrieved chunk, in rank order, joined by a blank line:
//
//	[CONTEXT id=<id> <field>=<value> ...]
//	<verbatim text>
//	[END CONTEXT id=<id>]
//
// with one <field>=<value> per label field: strings in single quotes,
// integers bare, null as null.
package rag
