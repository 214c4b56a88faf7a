package golden_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// A held-out style corpus written for this test only (no shipped fixture
// and no code knows it): lighthouse keeping, with subjects whose chunks
// never spell them contiguously ("the Gull Point Fresnel lamp" for `gull
// point lamp`, "the great lens may be polished" for `lens polishing`),
// a sibling sharing the head noun (`cape rock lamp`), near-synonym
// siblings sharing a word (`argent wick` / `argent mantle`, `lens
// polishing` / `lens washing`).
const keeperCorpus = `{
  "id": "keepers-v1", "label_fields": ["log_id", "leaf"], "source_field": "log_id", "subject_field": "subject",
  "entries": [
    {"id": "gull-lamp-light", "text": "The Gull Point Fresnel lamp is lit 30 minutes before sunset when the sea fog is thick.", "log_id": "KEEP-GULL", "leaf": 3, "subject": "gull point lamp"},
    {"id": "cape-lamp-light", "text": "The Cape Rock lamp is lit 10 minutes before sunset when the sky is clear.", "log_id": "KEEP-CAPE", "leaf": 4, "subject": "cape rock lamp"},
    {"id": "lens-polish", "text": "The great lens may be polished every 14 days with dry chalk.", "log_id": "KEEP-OPTICS", "leaf": 7, "subject": "lens polishing"},
    {"id": "lens-wash", "text": "The great lens may be washed every 3 days with weak vinegar.", "log_id": "KEEP-GLAZIER", "leaf": 8, "subject": "lens washing"},
    {"id": "argent-wick-trim", "text": "Argent wicks are trimmed after 6 burning hours while the oil is warm.", "log_id": "KEEP-ARGENT", "leaf": 11, "subject": "argent wick"},
    {"id": "argent-mantle-change", "text": "Argent mantles are changed after 60 burning hours while the oil is cold.", "log_id": "KEEP-MANTLE", "leaf": 12, "subject": "argent mantle"}
  ]
}`

const keeperGolden = `{"id": "keepers-golden", "cases": [
  {"case_id": "gull-lamp", "question": "Under KEEP-GULL, how long before sunset is the Gull Point lamp lit?",
   "expected_retrieved_id": "gull-lamp-light", "expected_ranked_ids": ["gull-lamp-light"],
   "collision_sibling_ids": ["cape-lamp-light"], "expected_value": "30 minutes", "forbidden_values": ["10 minutes"],
   "expected_source_id": "KEEP-GULL", "required_qualifiers": ["when the sea fog is thick"],
   "must_contain": ["30 minutes", "when the sea fog is thick", "KEEP-GULL", "[gull-lamp-light]"],
   "forbidden": ["10 minutes", "KEEP-CAPE", "sky is clear", "[cape-lamp-light]"], "expect_abstention": false},
  {"case_id": "lens-polish", "question": "How often is the great lens polished, and with what?",
   "expected_retrieved_id": "lens-polish", "expected_ranked_ids": ["lens-polish"],
   "collision_sibling_ids": ["lens-wash"], "expected_value": "14 days", "forbidden_values": ["3 days"],
   "expected_source_id": "KEEP-OPTICS", "required_qualifiers": ["with dry chalk"],
   "must_contain": ["lens polishing", "14 days", "with dry chalk", "KEEP-OPTICS", "[lens-polish]"],
   "forbidden": ["3 days", "vinegar", "KEEP-GLAZIER", "[lens-wash]"], "expect_abstention": false},
  {"case_id": "argent-wick", "question": "After how many burning hours are Argent wicks trimmed?",
   "expected_retrieved_id": "argent-wick-trim", "expected_ranked_ids": ["argent-wick-trim"],
   "collision_sibling_ids": ["argent-mantle-change"], "expected_value": "6 burning hours", "forbidden_values": ["60 burning hours"],
   "expected_source_id": "KEEP-ARGENT", "required_qualifiers": ["while the oil is warm"],
   "must_contain": ["argent wick", "6 burning hours", "while the oil is warm", "KEEP-ARGENT", "[argent-wick-trim]"],
   "forbidden": ["60 burning hours", "KEEP-MANTLE", "oil is cold", "[argent-mantle-change]"], "expect_abstention": false}
]}`

// TestHeldOutStyleCorpus grades, on a corpus no code knows, the correct
// answers the issue found failing (the chunk's own sentence, possessive
// and prepositional subjects, a noun phrase said as a verb, plurals,
// modifiers inside a qualifier, a subject named once for two sentences)
// and wrong answers that must still fail (the sibling's subject in the
// same natural forms, the sibling's value, a negated or dropped
// qualifier). Every mutation of each reference answer must still be
// killed and every control must pass.
func TestHeldOutStyleCorpus(t *testing.T) {
	c, err := rag.ParseCorpus([]byte(keeperCorpus))
	require.NoError(t, err)
	cases, err := golden.Parse([]byte(keeperGolden))
	require.NoError(t, err)
	require.NoError(t, golden.Validate(cases, c), "the reference answers pass their own checks")

	tr := map[string]string{
		"gull-lamp":   " [gull-lamp-light] (log_id: KEEP-GULL)",
		"lens-polish": " [lens-polish] (log_id: KEEP-OPTICS)",
		"argent-wick": " [argent-wick-trim] (log_id: KEEP-ARGENT)",
	}
	table := []struct {
		caseID, name, answer string
		pass                 bool
		check                string
	}{
		{"gull-lamp", "R chunk verbatim", "The Gull Point Fresnel lamp is lit 30 minutes before sunset when the sea fog is thick.", true, ""},
		{"gull-lamp", "R possessive", "Gull Point's lamp is lit 30 minutes before sunset when the sea fog is thick.", true, ""},
		{"gull-lamp", "R prepositional", "The lamp at Gull Point is lit thirty minutes before sunset, when the sea fog is thick.", true, ""},
		{"gull-lamp", "R prepositional of", "When the sea fog is thick, the lamp of Gull Point is lit 30 min before sunset.", true, ""},
		{"gull-lamp", "R subject covers the next sentence", "The Gull Point lamp has a Fresnel lens. It is lit 30 minutes before sunset when the sea fog is thick.", true, ""},
		{"gull-lamp", "R subject at the end", "Lit 30 minutes before sunset when the sea fog is thick: that is the lamp at Gull Point.", true, ""},
		{"gull-lamp", "R modifier inside the qualifier", "The Gull Point lamp is lit 30 minutes before sunset when the sea fog is very thick.", true, ""},
		{"gull-lamp", "R colon form", "Gull Point lamp: lit 30 minutes before sunset, when the sea fog is thick.", true, ""},
		{"gull-lamp", "R keepers light the lamp", "When the sea fog is thick, the keepers at Gull Point light the lamp 30 minutes before sunset.", true, ""},
		{"gull-lamp", "R modifier between, possessive", "The Gull Point light's Fresnel lamp is lit 30 minutes before sunset when the sea fog is thick.", true, ""},
		{"gull-lamp", "R qualifier in parentheses", "Lit 30 minutes before sunset (when the sea fog is thick), the Gull Point lamp.", true, ""},
		{"gull-lamp", "R no subject named", "It is lit 30 minutes before sunset when the sea fog is thick.", true, ""},
		{"gull-lamp", "W sibling's subject, possessive", "Cape Rock's lamp is lit 30 minutes before sunset when the sea fog is thick.", false, golden.CheckSubjectNamed},
		{"gull-lamp", "W sibling's subject, prepositional", "The lamp at Cape Rock is lit 30 minutes before sunset when the sea fog is thick.", false, golden.CheckSubjectNamed},
		{"gull-lamp", "W sibling's subject with a lookalike letter", "The lamp at C\u0430pe Rock is lit 30 minutes before sunset when the sea fog is thick.", false, golden.CheckSubjectNamed},
		{"gull-lamp", "W sibling's subject with a soft hyphen", "The lamp at Ca\u00adpe Rock is lit 30 minutes before sunset when the sea fog is thick.", false, golden.CheckSubjectNamed},
		{"gull-lamp", "W sibling's words written as one", "The CapeRock lamp is lit 30 minutes before sunset when the sea fog is thick.", false, golden.CheckSubjectNamed},
		{"gull-lamp", "W sibling's subject, own subject possessive beside it", "Cape Rock's lamp, not Gull Point's, is lit 30 minutes before sunset when the sea fog is thick.", false, golden.CheckSiblingSubject},
		{"gull-lamp", "W sibling named beside the subject", "The Gull Point lamp, like the lamp on Cape Rock, is lit 30 minutes before sunset when the sea fog is thick.", false, golden.CheckSiblingSubject},
		{"gull-lamp", "W sibling's value", "The Gull Point Fresnel lamp is lit 10 minutes before sunset when the sea fog is thick.", false, golden.CheckForbiddenAbsent},
		{"gull-lamp", "W qualifier negated inside", "The Gull Point lamp is lit 30 minutes before sunset when the sea fog is not thick.", false, golden.CheckQualifierNegated},
		{"gull-lamp", "W qualifier offered as an alternative inside", "The Gull Point lamp is lit 30 minutes before sunset when the sea or fog is thick.", false, golden.CheckQualifiers},
		{"gull-lamp", "W qualifier dropped", "The Gull Point lamp is lit 30 minutes before sunset.", false, golden.CheckQualifiers},
		{"gull-lamp", "W qualifier's words scattered", "The Gull Point lamp is lit 30 minutes before sunset; fog is thick when the sea is calm.", false, golden.CheckQualifiers},

		{"lens-polish", "R chunk verbatim", "The great lens may be polished every 14 days with dry chalk.", true, ""},
		{"lens-polish", "R noun phrase", "Lens polishing is done every 14 days with dry chalk.", true, ""},
		{"lens-polish", "R verb, other order", "Every fourteen days, with dry chalk, the keeper polishes the lens.", true, ""},
		{"lens-polish", "R plural", "Lenses are polished with dry chalk every 14 days.", true, ""},
		{"lens-polish", "W sibling's verb", "The great lens may be washed every 14 days with dry chalk.", false, golden.CheckSubjectNamed},
		{"lens-polish", "W sibling's noun phrase beside the subject", "Lens polishing, like lens washing, is done every 14 days with dry chalk.", false, golden.CheckSiblingSubject},
		{"lens-polish", "W sibling's value", "The great lens may be polished every 3 days with dry chalk.", false, golden.CheckForbiddenAbsent},
		{"lens-polish", "W qualifier negated", "The great lens may be polished every 14 days, never with dry chalk.", false, golden.CheckQualifierNegated},

		{"argent-wick", "R chunk verbatim", "Argent wicks are trimmed after 6 burning hours while the oil is warm.", true, ""},
		{"argent-wick", "R singular, possessive", "An Argent's wick is trimmed after six burning hours while the oil is still warm.", true, ""},
		{"argent-wick", "R prepositional", "The wick of an Argent lamp is trimmed after 6 burning hours while the oil is warm.", true, ""},
		{"argent-wick", "W no subject, but the case requires it", "They are trimmed after 6 burning hours while the oil is warm.", false, golden.CheckMustContain},
		{"argent-wick", "W sibling's subject", "Argent mantles are trimmed after 6 burning hours while the oil is warm.", false, golden.CheckSubjectNamed},
		{"argent-wick", "W sibling's head word alone", "The mantle is trimmed after 6 burning hours while the oil is warm.", false, golden.CheckSubjectNamed},
		{"argent-wick", "W sibling's value", "Argent wicks are trimmed after 60 burning hours while the oil is warm.", false, golden.CheckForbiddenAbsent},
	}
	byID := map[string]golden.Case{}
	for _, gc := range cases {
		byID[gc.CaseID] = gc
	}
	for _, tc := range table {
		t.Run(tc.caseID+"/"+tc.name, func(t *testing.T) {
			gc := byID[tc.caseID]
			rec := golden.EvidenceRecord(gc, c, "")
			got := failedChecks(t, gc, rec, c, tc.answer+tr[tc.caseID])
			if tc.pass {
				assert.Empty(t, got, "right answer failed: %q", tc.answer)
				return
			}
			require.NotEmpty(t, got, "wrong answer passed: %q", tc.answer)
			if tc.check != "" {
				assert.Contains(t, got, tc.check, "%q", tc.answer)
			}
		})
	}

	for _, gc := range cases {
		rec := golden.EvidenceRecord(gc, c, golden.ReferenceAnswer(gc, c))
		swaps := 0
		for _, mu := range golden.Mutations(gc, rec, c) {
			assert.NotEmpty(t, failedChecks(t, gc, rec, c, mu.Answer), "%s: %s (%s) survived: %q", gc.CaseID, mu.Name, mu.Target, mu.Answer)
			if mu.Name == golden.MutSwappedSynonym {
				swaps++
			}
		}
		assert.Positive(t, swaps, "%s: the subject, named only in natural form, is swapped too", gc.CaseID)
		for _, ctl := range golden.Controls(gc, c) {
			assert.Empty(t, failedChecks(t, gc, rec, c, ctl.Answer), "%s: control %s (%s) failed: %q", gc.CaseID, ctl.Name, ctl.Target, ctl.Answer)
		}
	}
}

// TestSubjectNamedInNaturalForm reads subject_named's verdict on the
// held-out style corpus: each natural form names the subject ("ok"), an
// answer without one is let stand with its own detail, and one naming
// another chunk's subject fails.
func TestSubjectNamedInNaturalForm(t *testing.T) {
	c, err := rag.ParseCorpus([]byte(keeperCorpus))
	require.NoError(t, err)
	cases, err := golden.Parse([]byte(keeperGolden))
	require.NoError(t, err)
	require.NoError(t, golden.Validate(cases, c))
	gull, lens := cases[0], cases[1]
	detail := func(gc golden.Case, answer string) string {
		for _, ch := range golden.CheckGolden(gc, golden.EvidenceRecord(gc, c, answer), c) {
			if ch.Name == golden.CheckSubjectNamed {
				return ch.Detail
			}
		}
		t.Fatalf("no %s check", golden.CheckSubjectNamed)
		return ""
	}
	for _, tc := range []struct {
		gc     golden.Case
		answer string
		named  bool
	}{
		{gull, "The Gull Point Fresnel lamp is lit.", true},
		{gull, "Gull Point's lamp is lit.", true},
		{gull, "Gull Point’s lamps are lit.", true},
		{gull, "The lamp at Gull Point is lit.", true},
		{gull, "At Gull Point, the lamp is lit.", true},
		{gull, "The lamps of Gull Point are lit.", true},
		{gull, "The Gull Point lamp has a lens. It is lit.", true},
		{gull, "It is lit at dusk.", false},
		{gull, "The point is that a gull saw the lamp lit.", false},
		{lens, "Lens polishing is weekly.", true},
		{lens, "The great lens may be polished weekly.", true},
		{lens, "Polishing the lenses is weekly.", true},
		{lens, "The keeper polishes the great lens.", true},
		{lens, "The lens is washed, and it is polished later on.", false},
	} {
		d := detail(tc.gc, tc.answer)
		if tc.named {
			assert.Equal(t, "ok", d, "%q names %q", tc.answer, tc.gc.Subject)
		} else {
			assert.NotEqual(t, "ok", d, "%q does not name %q", tc.answer, tc.gc.Subject)
		}
	}
}
