package golden_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// A third domain written for this test only (no shipped fixture, no code
// knowing it): brewing notes with a declared unit, a same-fact sibling and
// a near-synonym sibling.
const brewCorpus = `{
  "id": "brew-v1", "label_fields": ["guide_id", "leaf"], "source_field": "guide_id", "subject_field": "drink",
  "units": {"firkin": ["fk", "firkins"]},
  "entries": [
    {"id": "nettle-steep-copper", "text": "The Copper Kettle guide steeps nettle ale for 3 hours, warmed in brass.", "guide_id": "BREW-COPPER", "leaf": 4, "drink": "nettle ale"},
    {"id": "nettle-steep-iron", "text": "The Iron Cask guide steeps nettle ale for 5 hours, chilled in oak.", "guide_id": "BREW-IRON", "leaf": 9, "drink": "nettle ale"},
    {"id": "mead-yield-clay", "text": "A batch of honey mead yields 4 pints when fermented in clay.", "guide_id": "BREW-HIVE", "leaf": "ii", "drink": "honey mead"},
    {"id": "dew-yield-glass", "text": "A batch of honey dew yields 6 pints when fermented in glass.", "guide_id": "BREW-DEW", "leaf": "iii", "drink": "honey dew"},
    {"id": "cask-size", "text": "A cellar cask holds 2 firkins of stout.", "guide_id": "BREW-CELLAR", "leaf": 12, "drink": "stout"}
  ]
}`

const brewGolden = `{"id": "brew-golden", "cases": [
  {"case_id": "steep-copper", "question": "Under BREW-COPPER, how long is nettle ale steeped and how is it warmed?",
   "expected_retrieved_id": "nettle-steep-copper", "expected_ranked_ids": ["nettle-steep-copper"],
   "collision_sibling_ids": ["nettle-steep-iron"], "expected_value": "3 hours", "forbidden_values": ["5 hours"],
   "expected_source_id": "BREW-COPPER", "required_qualifiers": ["warmed in brass"],
   "must_contain": ["3 hours", "warmed in brass", "BREW-COPPER", "[nettle-steep-copper]"],
   "forbidden": ["5 hours", "BREW-IRON", "oak", "[nettle-steep-iron]"], "expect_abstention": false},
  {"case_id": "mead-yield", "question": "How many pints does a batch of honey mead yield, and fermented in what?",
   "expected_retrieved_id": "mead-yield-clay", "expected_ranked_ids": ["mead-yield-clay"],
   "collision_sibling_ids": ["dew-yield-glass"], "expected_value": "4 pints", "forbidden_values": ["6 pints"],
   "expected_source_id": "BREW-HIVE", "required_qualifiers": ["fermented in clay"],
   "must_contain": ["4 pints", "fermented in clay", "BREW-HIVE", "[mead-yield-clay]"],
   "forbidden": ["6 pints", "[dew-yield-glass]"], "expect_abstention": false}
]}`

func TestThirdDomain(t *testing.T) {
	c, err := rag.ParseCorpus([]byte(brewCorpus))
	require.NoError(t, err)
	cases, err := golden.Parse([]byte(brewGolden))
	require.NoError(t, err)
	require.NoError(t, golden.Validate(cases, c))
	p, err := rag.Build(context.Background(), c, hashembed.New(0), rag.NewExtractive(0), rag.Options{})
	require.NoError(t, err)
	ask := func(gc golden.Case) rag.Record {
		rec, err := p.Ask(context.Background(), gc.Question)
		require.NoError(t, err)
		return rec
	}
	steep, mead := cases[0], cases[1]
	rs, rm := ask(steep), ask(mead)
	require.Empty(t, failedChecks(t, steep, rs, c, rs.Answer), "offline answer %q", rs.Answer)
	require.Empty(t, failedChecks(t, mead, rm, c, rm.Answer), "offline answer %q", rm.Answer)

	for i, gc := range cases {
		rec := []rag.Record{rs, rm}[i]
		for _, mu := range golden.Mutations(gc, rec, c) {
			if failed := failedChecks(t, gc, rec, c, mu.Answer); len(failed) == 0 {
				t.Errorf("%s: %s (%s) survived: %q", gc.CaseID, mu.Name, mu.Target, mu.Answer)
			}
		}
	}

	s := "The Copper Kettle guide steeps nettle ale for 3 hours, warmed in brass. [nettle-steep-copper] (guide_id: BREW-COPPER)"
	runSound(t, steep, rs, c, []soundCase{
		{"upper-case sibling value", "The Copper Kettle guide steeps nettle ale for 5 HOURS, warmed in brass. [nettle-steep-copper] (guide_id: BREW-COPPER)", true, golden.CheckForbiddenAbsent},
		{"lookalike sibling source", "The Copper Kettle guide steeps nettle ale for 3 hours, warmed in brass. [nettle-steep-copper] (guide_id: BREW-IRОN)", true, golden.CheckForbiddenAbsent},
		{"five hours", "The Copper Kettle guide steeps nettle ale for five hours, warmed in brass. [nettle-steep-copper] (guide_id: BREW-COPPER)", true, golden.CheckForbiddenAbsent},
		{"5-hour", "The Copper Kettle guide gives nettle ale a 5-hour steep, warmed in brass. [nettle-steep-copper] (guide_id: BREW-COPPER)", true, golden.CheckForbiddenAbsent},
		{"5h", "The Copper Kettle guide steeps nettle ale 5h, warmed in brass. [nettle-steep-copper] (guide_id: BREW-COPPER)", true, golden.CheckForbiddenAbsent},
		{"never warmed", "The Copper Kettle guide steeps nettle ale for 3 hours, never warmed in brass. [nettle-steep-copper] (guide_id: BREW-COPPER)", true, golden.CheckQualifierNegated},
		{"unretrieved cite", s + " Compare [cask-size].", true, golden.CheckCitationRetrieved},
		{"near miss: 3h and three-hour", "Per BREW-COPPER, nettle ale steeps three hours (3h), warmed in brass [nettle-steep-copper].", false, ""},
		{"near miss: lower-case source and citation", "The copper kettle guide steeps nettle ale for 3 hrs, warmed in brass. [NETTLE-STEEP-COPPER] (guide_id: brew-copper)", false, ""},
	})
	m := "A batch of honey mead yields 4 pints when fermented in clay. [mead-yield-clay] (guide_id: BREW-HIVE)"
	runSound(t, mead, rm, c, []soundCase{
		{"subject swap", "A batch of honey dew yields 4 pints when fermented in clay. [mead-yield-clay] (guide_id: BREW-HIVE)", true, golden.CheckSubjectNamed},
		{"six pints from the cited sibling", "A batch of honey mead yields six pints when fermented in clay. [mead-yield-clay] [dew-yield-glass] (guide_id: BREW-HIVE)", true, golden.CheckSiblingCited},
		{"4pt cited to the sibling", "A batch of honey mead yields 4pt [dew-yield-glass]. It is fermented in clay [mead-yield-clay] (guide_id: BREW-HIVE).", true, golden.CheckNumericGrounding},
		{"near miss: four-pint", "A batch of honey mead makes a four-pint yield when fermented in clay. [mead-yield-clay] (guide_id: BREW-HIVE)", false, ""},
		{"near miss: pints abbreviated", "Honey mead: 4 pt per batch, fermented in clay [mead-yield-clay] (BREW-HIVE).", false, ""},
		{"declared unit, invented value", m + " It fills 3 fk.", true, golden.CheckNumericGrounding},
	})
}
