package golden_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// failedChecks grades answer in place of rec's and returns the names of the
// failed checks.
func failedChecks(t *testing.T, gc golden.Case, rec rag.Record, c rag.Corpus, answer string) []string {
	t.Helper()
	rec.Answer = answer
	var names []string
	for _, ch := range golden.CheckGolden(gc, rec, c) {
		if !ch.OK {
			names = append(names, ch.Name)
		}
	}
	return names
}

// soundCase is one hand-made answer: must it fail, and (when it must) which
// check must be among the failures.
type soundCase struct {
	name   string
	answer string
	fail   bool
	check  string
}

func runSound(t *testing.T, gc golden.Case, rec rag.Record, c rag.Corpus, cases []soundCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := failedChecks(t, gc, rec, c, tc.answer)
			if !tc.fail {
				assert.Empty(t, got, "near miss must pass: %q", tc.answer)
				return
			}
			require.NotEmpty(t, got, "wrong answer passed: %q", tc.answer)
			if tc.check != "" {
				assert.Contains(t, got, tc.check, "%q", tc.answer)
			}
		})
	}
}

// The seven classes of wrong answers the issue found, each with an answer
// that must fail and a near miss that must pass, on both shipped domains.
// Answers are written by hand; none is derived by the mutation code.
func TestSoundnessGrimoire(t *testing.T) {
	es, recs := askAll(t, "../../testdata/grimoire/evalset.json")
	byID := func(id string) (golden.Case, rag.Record) {
		i := slices.IndexFunc(es.Cases, func(gc golden.Case) bool { return gc.CaseID == id })
		require.GreaterOrEqual(t, i, 0, id)
		return es.Cases[i], recs[i]
	}
	gc, rec := byID("numeric-source-verdigris-dose")
	base := "For tarnish fever, the Verdant Crucible prescribes a dose of 3 drams of verdigris blossom elixir, distilled in copper and administered after dusk."
	trailer := " [verdigris-dose-verdant] (grimoire_id: GRIM-VERDANT)"
	runSound(t, gc, rec, es.Corpus, []soundCase{
		// 1. Letter case.
		{"case: sibling source lower-cased", strings.Replace(base+trailer, "GRIM-VERDANT", "grim-amber", 1), true, golden.CheckForbiddenAbsent},
		{"case: sibling citation upper-cased", base + " [VERDIGRIS-DOSE-AMBER] (grimoire_id: GRIM-VERDANT)", true, golden.CheckForbiddenAbsent},
		{"case: sibling condition capitalised", base + " Some say Amber Glass." + trailer, true, golden.CheckForbiddenAbsent},
		{"case near miss: own ids in other case", base + " [Verdigris-Dose-Verdant] (grimoire_id: grim-verdant)", false, ""},
		// 2. Lookalike letters (Cyrillic а, е, о).
		{"lookalike: sibling source", strings.Replace(base+trailer, "GRIM-VERDANT", "GRIM-АMBER", 1), true, golden.CheckForbiddenAbsent},
		{"lookalike: sibling condition", base + " Or in аmbеr glаss." + trailer, true, golden.CheckForbiddenAbsent},
		{"lookalike: own citation", base + " [verdigris-dоse-verdant] (grimoire_id: GRIM-VERDANT)", true, golden.CheckMixedScript},
		{"lookalike: own source id", base + " [verdigris-dose-verdant] (grimoire_id: GRIM-VЕRDANT)", true, golden.CheckMixedScript},
		{"lookalike near miss: fullwidth digits", strings.Replace(base, "3 drams", "３ drams", 1) + trailer, false, ""},
		// 3. The sibling's number written another way.
		{"number word", strings.Replace(base, "3 drams", "nine drams", 1) + trailer, true, golden.CheckForbiddenAbsent},
		{"number hyphenated", strings.Replace(base, "3 drams", "a 9-dram measure", 1) + trailer, true, golden.CheckForbiddenAbsent},
		{"number abbreviated", strings.Replace(base, "3 drams", "15dr", 1) + trailer, true, golden.CheckForbiddenAbsent},
		{"number word added beside the right value", strings.Replace(base, "3 drams", "3 drams (fifteen drams in some texts)", 1) + trailer, true, golden.CheckForbiddenAbsent},
		{"number bare sibling value", strings.Replace(base, "3 drams", "3 drams (other folios: 9)", 1) + trailer, true, golden.CheckForbiddenAbsent},
		{"number near miss: own value as a word", strings.Replace(base, "3 drams", "three drams", 1) + trailer, false, ""},
		{"number near miss: own value hyphenated", strings.Replace(base, "a dose of 3 drams", "a 3-dram dose", 1) + trailer, false, ""},
		// 4. Wrong chunk attribution.
		{"attribution: sibling cited too, its number taken", strings.Replace(base, "3 drams", "9 drams", 1) + " [verdigris-dose-verdant] [verdigris-dose-amber] (grimoire_id: GRIM-VERDANT)", true, golden.CheckSiblingCited},
		{"attribution: value cited to a chunk that lacks it", "The dose is 3 drams [verdigris-dose-amber]. It is distilled in copper and administered after dusk, per the verdigris blossom elixir entry [verdigris-dose-verdant] (grimoire_id: GRIM-VERDANT).", true, golden.CheckNumericGrounding},
		{"attribution near miss: value in its own cited sentence", "The verdigris blossom elixir dose is 3 drams [verdigris-dose-verdant]. It is distilled in copper and administered after dusk (grimoire_id: GRIM-VERDANT) [verdigris-dose-verdant].", false, ""},
		// 5. Citations of unretrieved or unknown ids, no number in the sentence.
		{"citation not retrieved", base + trailer + " See also [asterquartz-powdering].", true, golden.CheckCitationRetrieved},
		{"citation unknown", base + trailer + " See also [verdant-crucible-appendix].", true, golden.CheckCitationKnown},
		{"citation near miss: retrieved id cited twice in a group", base + " [verdigris-dose-verdant, VERDIGRIS-DOSE-VERDANT] (grimoire_id: GRIM-VERDANT)", false, ""},
		// 7. Negated qualifier.
		{"qualifier negated: never", strings.Replace(base, "distilled in copper", "never distilled in copper", 1) + trailer, true, golden.CheckQualifierNegated},
		{"qualifier negated: n't", strings.Replace(base, "and administered after dusk", "but isn't administered after dusk", 1) + trailer, true, golden.CheckQualifierNegated},
		{"qualifier negated: without", strings.Replace(base, "and administered after dusk", "and administered without after dusk", 1) + trailer, true, golden.CheckQualifierNegated},
		{"qualifier near miss: without in another clause", strings.Replace(base, "and administered after dusk", "administered without waiting, after dusk", 1) + trailer, false, ""},
		{"qualifier negated: un- prefix", strings.Replace(base, "distilled in copper", "undistilled in copper", 1) + trailer, true, golden.CheckQualifierNegated},
		{"qualifier near miss: negation on another clause", strings.Replace(base, "distilled in copper", "not in brass, but distilled in copper", 1) + trailer, false, ""},
		{"qualifier near miss: negation before another coordinated clause", strings.Replace(base, "and administered after dusk", "kept without light and administered after dusk", 1) + trailer, false, ""},
		{"case near miss: a forbidden literal inside a longer word", base + " Nothing is given that dawn." + trailer, false, ""},
		{"qualifier near miss: negation outside the window", strings.Replace(base, "distilled in copper", "no other vessel is used; it is distilled in copper", 1) + trailer, false, ""},
	})

	// 6. Subject: the sibling's subject swapped in, with a golden case whose
	// forbidden list does not spell it.
	gc, rec = byID("near-synonym-moonpetal-vapor")
	gc.Forbidden = slices.DeleteFunc(slices.Clone(gc.Forbidden), func(s string) bool { return strings.EqualFold(s, "moonflower") })
	ans := "When moonpetal is ground with pearl salt, the Nocturne folio calls for 11 grains of pearl salt, and the mixture releases a silver sleep vapor. [moonpetal-silver-vapor] (grimoire_id: GRIM-NOCTURNE)"
	runSound(t, gc, rec, es.Corpus, []soundCase{
		{"subject swapped", strings.Replace(ans, "moonpetal is", "Moonflower is", 1), true, golden.CheckSubjectNamed},
		{"subject swapped, own subject left in", strings.Replace(ans, "the mixture", "moonflower's mixture", 1), true, golden.CheckSiblingSubject},
		{"subject lookalike swap", strings.Replace(ans, "the mixture", "the mооnflower mixture", 1), true, golden.CheckSiblingSubject},
		{"subject near miss: own subject in other case", strings.Replace(ans, "moonpetal is", "MOONPETAL is", 1), false, ""},
	})
	gc.AllowedSubjects = []string{"moonflower"}
	assert.Empty(t, failedChecks(t, gc, rec, es.Corpus, strings.Replace(ans, "the mixture", "unlike moonflower, the mixture", 1)),
		"a case that allows the sibling's subject lets the answer name it")
}

// TestSoundnessLighthouse runs classes that read differently in the second
// domain: units with a hyphen and an abbreviation, and un- as a real part
// of the sibling's condition.
func TestSoundnessLighthouse(t *testing.T) {
	es, recs := askAll(t, "../../testdata/lighthouse/evalset.json")
	i := slices.IndexFunc(es.Cases, func(gc golden.Case) bool { return gc.CaseID == "numeric-source-harbor-clamp" })
	gc, rec := es.Cases[i], recs[i]
	base := "The Harbor Light manual torques each fresnel lens clamp to 12 newton-metres when the lamp room is heated."
	trailer := " [fresnel-clamp-harbor] (manual_id: HARBOR-LIGHT-M2)"
	runSound(t, gc, rec, es.Corpus, []soundCase{
		{"sibling value abbreviated", strings.Replace(base, "12 newton-metres", "18 Nm", 1) + trailer, true, golden.CheckForbiddenAbsent},
		{"sibling value in words", strings.Replace(base, "12 newton-metres", "eighteen newton metres", 1) + trailer, true, golden.CheckForbiddenAbsent},
		{"own value abbreviated (near miss)", strings.Replace(base, "12 newton-metres", "12 N m", 1) + trailer, false, ""},
		{"qualifier negated", strings.Replace(base, "when the lamp room is heated", "not when the lamp room is heated", 1) + trailer, true, golden.CheckQualifierNegated},
		{"sibling condition by prefix", strings.Replace(base, "is heated", "is un-heated", 1) + trailer, true, ""},
		{"sibling source in lower case", base + " [fresnel-clamp-harbor] (manual_id: cape-beacon-m1)", true, golden.CheckForbiddenAbsent},
	})

	i = slices.IndexFunc(es.Cases, func(gc golden.Case) bool { return gc.CaseID == "conditional-lamp-mantle" })
	gc, rec = es.Cases[i], recs[i]
	ans := "The lamp mantle must be replaced after 400 burning hours while the paraffin feed stays below 3 bar. [lamp-mantle-replace] (manual_id: HARBOR-LIGHT-M2)"
	runSound(t, gc, rec, es.Corpus, []soundCase{
		{"near miss: 400 as words and hours abbreviated", strings.Replace(ans, "400 burning hours", "four hundred burning hours (400h)", 1), false, ""},
		{"sibling 40 hours as 40h", strings.Replace(ans, "400 burning hours", "400 burning hours, or 40h", 1), true, golden.CheckForbiddenAbsent},
		{"sibling 40 hours hyphenated", strings.Replace(ans, "400 burning hours", "400 burning hours (a 40-hour trim)", 1), true, golden.CheckForbiddenAbsent},
		{"number with a comma group", strings.Replace(ans, "400 burning hours", "400 burning hours, 1,000 at most", 1), true, golden.CheckNumericGrounding},
	})
}
