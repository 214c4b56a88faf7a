// Package rag is the retrieval-augmented ask pipeline: it embeds a
// question, retrieves the top-k chunks of a corpus from an index.Index,
// builds a citation-labelled context payload and the generation messages,
// generates an answer (the offline Extractive generator or an
// OpenAI-compatible Chat) and returns a Record capturing every stage. It
// also owns the corpus file format and the answer's conventions (Cite,
// Abstention). The golden cases, the checks of an answer against them and
// the mutations that prove the checks bite are rag/golden.
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
// added to golden.DefaultUnits when answers are read as quantities.
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
