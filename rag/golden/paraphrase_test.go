package golden_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// paraphrases are hand-written answers to one shipped case: right ones a
// careful grader accepts (reordered, possessive, prepositional, plural,
// inflected, a number in words, a unit abbreviated, the subject left to
// the question, modifiers inside a qualifier, the citation elsewhere) and
// wrong ones (a sibling's value, source, condition, subject or citation, a
// negated or dropped qualifier, a missing citation or source). {C} stands
// for the case's citation and {S} for its source id.
type paraphrases struct {
	set, caseID  string
	right, wrong []string
}

var paraphraseTable = []paraphrases{
	{"grimoire", "numeric-source-verdigris-dose", []string{
		"Under {S} the verdigris blossom elixir is given at 3 drams for tarnish fever, distilled in copper and administered after dusk {C}.",
		"Three drams of verdigris blossom elixir, distilled in copper and administered after dusk, is the Verdant Crucible's tarnish-fever dose {C} ({S}).",
		"The dose is 3 dr {C}. It must be distilled in copper and administered after dusk (source: {S}).",
		"For tarnish fever, {S} prescribes verdigris blossom elixirs at a dose of 3 drams; they are distilled in copper and administered after dusk {C}.",
		"Administered after dusk and distilled in copper, the elixir of verdigris blossom is dosed at 3 drams for tarnish fever, per {S} {C}.",
		"Per {S}: 3 drams. Distilled in copper; administered after dusk. {C}",
		"The Verdant Crucible's verdigris blossom elixir: a 3-dram dose, distilled in pure copper, administered after dusk {C} ({S}).",
	}, []string{
		"Under {S} the verdigris blossom elixir is given at 9 drams for tarnish fever, distilled in copper and administered after dusk {C}.",
		"Three drams of verdigris blossom elixir, distilled in amber glass and administered after dusk {C} ({S}).",
		"The dose is 3 drams of verdigris blossom elixir, not distilled in copper, administered after dusk {C} ({S}).",
		"The dose is 3 drams of verdigris blossom elixir, administered after dusk {C} ({S}).",
		"The dose is 3 drams of verdigris blossom elixir, distilled in copper and administered after dusk {C} (GRIM-AMBER).",
		"The dose is 3 drams of verdigris blossom elixir, distilled in copper and administered after dusk ({S}).",
		"The dose is 3 drams of verdigris blossom elixir, distilled in copper and administered at dawn {C} ({S}).",
	}},
	{"grimoire", "numeric-source-amber-dose", []string{
		"Under {S}, 9 drams of verdigris blossom elixir are prescribed for tarnish fever, distilled in amber glass and administered at dawn {C}.",
		"Nine drams {C}: the Amber Codex's verdigris blossom elixir is distilled in amber glass and given at dawn, administered at dawn only ({S}).",
		"At dawn, after being distilled in amber glass, the elixir of verdigris blossom is given at 9 drams {C} ({S}).",
		"{S} doses verdigris blossom elixirs at 9 dr, distilled in amber glass and administered at dawn {C}.",
		"It is 9 drams, distilled in amber glass, administered at dawn {C} ({S}).",
		"The tarnish-fever dose is a 9-dram measure of verdigris blossom elixir {C}. It is distilled in thick amber glass and administered at dawn ({S}).",
	}, []string{
		"Under {S}, 3 drams of verdigris blossom elixir are prescribed, distilled in amber glass and administered at dawn {C}.",
		"Under {S}, 9 drams of verdigris blossom elixir are prescribed, distilled in copper and administered at dawn {C}.",
		"Under {S}, 9 drams of verdigris blossom elixir are prescribed, distilled in amber glass and administered after dusk {C}.",
		"Under {S}, 9 drams of verdigris blossom elixir are prescribed, never distilled in amber glass, administered at dawn {C}.",
		"Under {S}, 9 drams of verdigris blossom elixir are prescribed, administered at dawn {C}.",
		"Under GRIM-VERDANT, 9 drams of verdigris blossom elixir are prescribed, distilled in amber glass and administered at dawn {C}.",
		"Under {S}, 9 drams of verdigris blossom elixir are prescribed, distilled in amber glass and administered at dawn [verdigris-dose-verdant].",
	}},
	{"grimoire", "numeric-source-obsidian-dose", []string{
		"Under {S}, the verdigris blossom elixir dose for tarnish fever is 15 drams, distilled in basalt during a lunar eclipse {C}.",
		"Fifteen drams {C}, distilled in basalt during a lunar eclipse, says the Obsidian Petal Canon ({S}).",
		"During a lunar eclipse the elixir is distilled in basalt; the dose is 15 dr {C} ({S}).",
		"The Obsidian Petal Canon's verdigris blossom elixir is distilled in basalt during a lunar eclipse. Dose: 15 drams {C} ({S}).",
		"{S}: verdigris blossom elixirs, distilled in black basalt during a total lunar eclipse, at 15 drams {C}.",
		"A 15-dram dose of the elixir of verdigris blossom, distilled in basalt during a lunar eclipse {C} ({S}).",
	}, []string{
		"Under {S}, the dose is 9 drams, distilled in basalt during a lunar eclipse {C}.",
		"Under {S}, the dose is 15 drams, distilled in copper during a lunar eclipse {C}.",
		"Under {S}, the dose is 15 drams, distilled in basalt {C}.",
		"Under {S}, the dose is 15 drams, distilled in basalt but never during a lunar eclipse {C}.",
		"Under GRIM-AMBER, the dose is 15 drams, distilled in basalt during a lunar eclipse {C}.",
		"Under {S}, the dose is 15 drams, distilled in basalt during a lunar eclipse.",
		"Under {S}, the dose is 15 drams, distilled in basalt during a lunar eclipse and administered at dawn {C}.",
	}},
	{"grimoire", "near-synonym-moonpetal-vapor", []string{
		"Moonpetal ground with pearl salt takes 11 grains of pearl salt and releases a silver sleep vapor {C} ({S}).",
		"Per the Nocturne folio ({S}), when ground with pearl salt, moonpetals need eleven grains of it; the mixture gives off a silver sleep vapor {C}.",
		"A silver sleep vapor is released when moonpetal is ground with pearl salt, using 11 grains {C}. Source: {S}.",
		"11 gr of pearl salt {C}: that is what moonpetal ground with pearl salt calls for, yielding a silver sleep vapor ({S}).",
		"The silver sleep vapor comes from moonpetal ground with fine pearl salt: the folio {S} calls for 11 grains {C}.",
		"When moonpetal is ground with pearl salt, 11 grains are called for. The mixture releases a silver sleep vapor {C} ({S}).",
	}, []string{
		"Moonflower ground with pearl salt takes 11 grains of pearl salt and releases a silver sleep vapor {C} ({S}).",
		"Moonpetal ground with pearl salt takes 17 grains of pearl salt and releases a silver sleep vapor {C} ({S}).",
		"Moonpetal ground with pearl salt takes 11 grains of pearl salt and releases a golden waking vapor {C} ({S}).",
		"Moonpetal not ground with pearl salt takes 11 grains of pearl salt and releases a silver sleep vapor {C} ({S}).",
		"Moonpetal ground with pearl salt takes 11 grains of pearl salt and releases a silver sleep vapor {C} (GRIM-DAWN-PETAL).",
		"Moonpetal ground with pearl salt takes 11 grains of pearl salt and releases a silver sleep vapor [moonflower-golden-vapor] ({S}).",
	}},
	{"grimoire", "conditional-shadeglass-harvest", []string{
		"Shadeglass orchids grown entirely in shade may be harvested after seven moon-phases {C} ({S}).",
		"After 7 moon-phases, a shadeglass orchid that was grown entirely in shade can be harvested ({S}) {C}.",
		"Per {S}, the harvest of a shadeglass orchid comes after 7 moon-phases, provided it is grown entirely in shade {C}.",
		"A shadeglass orchid, grown entirely in the shade, is harvestable after 7 moon-phases {C} ({S}).",
		"The shadeglass orchid: 7 moon-phases, if grown entirely in shade. {C} {S}",
		"It takes 7 moon phases: then the shadeglass orchid grown entirely in shade may be harvested {C} ({S}).",
	}, []string{
		"Shadeglass orchids grown entirely in shade may be harvested after 10 moon-phases {C} ({S}).",
		"Sunspire orchids grown entirely in shade may be harvested after 7 moon-phases {C} ({S}).",
		"Shadeglass orchids grown in full sun may be harvested after 7 moon-phases {C} ({S}).",
		"Shadeglass orchids not grown entirely in shade may be harvested after 7 moon-phases {C} ({S}).",
		"Shadeglass orchids grown entirely in shade may be harvested after 7 moon-phases ({S}).",
		"Shadeglass orchids grown entirely in shade may be harvested after 7 moon-phases {C} (GRIM-SOLAR-FLORA).",
	}},
	{"grimoire", "conditional-shadeglass-direct-sun", []string{
		"Yes: for a shadeglass orchid, any exposure to direct sun invalidates this harvest window {C} ({S}).",
		"Yes. Direct sun invalidates the harvest window of the shadeglass orchid {C} ({S}).",
		"Yes, direct sun exposure invalidates its harvest window: the shadeglass orchid must be grown entirely in shade {C} ({S}).",
		"According to {S}, exposure to direct sun invalidates this harvest window for shadeglass orchids {C}.",
		"For the shadeglass orchid, direct sun invalidates this harvest window. {C} {S}",
		"It does {C}. A shadeglass orchid's harvest is lost, because direct sun invalidates this harvest window ({S}).",
	}, []string{
		"No: direct sun does not invalidate this harvest window of the shadeglass orchid {C} ({S}).",
		"Direct sun has no effect on the shadeglass orchid {C} ({S}).",
		"Yes: for a sunspire orchid, direct sun invalidates this harvest window {C} ({S}).",
		"Yes: for a shadeglass orchid, direct sun invalidates this harvest window, which is otherwise 10 moon-phases {C} ({S}).",
		"Yes: for a shadeglass orchid, direct sun invalidates this harvest window ({S}).",
		"Yes: for a shadeglass orchid, direct sun invalidates this harvest window {C} (GRIM-SOLAR-FLORA).",
	}},
	{"lighthouse", "numeric-source-harbor-clamp", []string{
		"Under {S}, each fresnel lens clamp is torqued to 12 N m when the lamp room is heated {C}.",
		"Twelve newton-metres, when the lamp room is heated, for the fresnel lens clamp {C} ({S}).",
		"The clamps of the fresnel lens take 12 newton-metres when the lamp room is heated ({S}) {C}.",
		"When the lamp room is heated, tighten the fresnel lens clamps to 12 Nm {C} ({S}).",
		"The fresnel lens's clamp: 12 newton-metres when the lamp room is heated {C}. Manual {S}.",
		"Per {S}, torque each Fresnel lens clamp to 12 newton-metres {C}. This applies when the lamp room is heated {C}.",
	}, []string{
		"Under {S}, each fresnel lens clamp is torqued to 18 newton-metres when the lamp room is heated {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 12 newton-metres when the lamp room is unheated {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 12 newton-metres when the lamp room is not heated {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 12 newton-metres {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 12 newton-metres when the lamp room is heated [fresnel-clamp-cape].",
		"Under CAPE-BEACON-M1, each fresnel lens clamp is torqued to 12 newton-metres when the lamp room is heated {C}.",
	}},
	{"lighthouse", "numeric-source-cape-clamp", []string{
		"Under {S}, each fresnel lens clamp is torqued to 18 N m when the lamp room is unheated {C}.",
		"Eighteen newton-metres for the fresnel lens clamps, when the lamp room is unheated {C} ({S}).",
		"When the lamp room is unheated, the clamp of the fresnel lens takes 18 newton-metres {C} ({S}).",
		"The Cape Beacon manual's fresnel lens clamp torque is 18 Nm {C}; that is when the lamp room is unheated ({S}).",
		"{S}: 18 newton-metres on the fresnel lens clamp when the lamp room is unheated {C}.",
		"The fresnel lens's clamps are torqued to 18 newton-metres when the lamp room is unheated ({S}) {C}.",
	}, []string{
		"Under {S}, each fresnel lens clamp is torqued to 12 newton-metres when the lamp room is unheated {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 18 newton-metres when the lamp room is heated {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 18 newton-metres {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 18 newton-metres, never when the lamp room is unheated {C}.",
		"Under HARBOR-LIGHT-M2, each fresnel lens clamp is torqued to 18 newton-metres when the lamp room is unheated {C}.",
		"Under {S}, each fresnel lens clamp is torqued to 18 newton-metres when the lamp room is unheated.",
	}},
	{"lighthouse", "near-synonym-lamp-wick", []string{
		"Trim the lamp wick after 40 burning hours {C} ({S}).",
		"Lamp wicks should be trimmed every forty burning hours {C} ({S}).",
		"The wick of the lamp is trimmed after 40 burning hours ({S}) {C}.",
		"After 40 burning hours, the lamp's wick should be trimmed {C}. Source: {S}.",
		"{S}: 40 burning hours between trims of the lamp wick {C}.",
		"The lamp wick: trim it after 40 h {C} ({S}).",
	}, []string{
		"Trim the lamp wick after 400 burning hours {C} ({S}).",
		"Replace the lamp mantle after 40 burning hours {C} ({S}).",
		"Trim the lamp wick after 40 burning hours {C}.",
		"Trim the lamp wick after 40 burning hours ({S}).",
		"Trim the lamp wick after 40 burning hours {C} (HARBOR-LIGHT-M2).",
		"Trim the lamp wick after 40 burning hours {C} [lamp-mantle-replace] ({S}).",
	}},
	{"lighthouse", "conditional-lamp-mantle", []string{
		"Replace the lamp mantle after 400 burning hours while the paraffin feed stays below 3 bar {C} ({S}).",
		"Under {S}, lamp mantles must be replaced after four hundred burning hours, while the paraffin feed stays below 3 bar {C}.",
		"While the paraffin feed stays below 3 bar, the mantle of the lamp is replaced after 400 burning hours {C} ({S}).",
		"The lamp's mantle lasts 400 burning hours while the paraffin feed stays below 3 bar {C}; running the feed above 3 bar voids this ({S}).",
		"Lamp mantle: replace after 400 burning hours, while the paraffin feed stays well below 3 bar {C} ({S}).",
		"400 burning hours {C}. That holds for the lamp mantle while the paraffin feed stays below 3 bar ({S}).",
	}, []string{
		"Replace the lamp mantle after 40 burning hours while the paraffin feed stays below 3 bar {C} ({S}).",
		"Replace the lamp wick after 400 burning hours while the paraffin feed stays below 3 bar {C} ({S}).",
		"Replace the lamp mantle after 400 burning hours while the paraffin feed stays above 3 bar {C} ({S}).",
		"Replace the lamp mantle after 400 burning hours, but not while the paraffin feed stays below 3 bar {C} ({S}).",
		"Replace the lamp mantle after 400 burning hours while the paraffin feed stays below 3 bar {C} (CAPE-BEACON-M1).",
		"Replace the lamp mantle after 400 burning hours while the paraffin feed stays below 3 bar ({S}).",
	}},
	{"kiln", "glaze-celadon", []string{
		"Stoneware glaze is fired for 9 hours at cone 10, vented in reduction {C} ({S}).",
		"Under {S}, fire stoneware glazes for nine hours at cone 10 and keep them vented in reduction {C}.",
		"Vented in reduction, the glaze on stoneware gets 9 h at cone 10 {C} ({S}).",
		"{S}: a 9-hour firing at cone 10, vented in reduction {C}.",
		"The Celadon Workshop's stoneware glaze firing is 9 hours at cone 10 {C}. It is vented in reduction ({S}).",
		"9 hours at cone 10 for stoneware glaze {C}, which is vented in heavy reduction ({S}).",
	}, []string{
		"Stoneware glaze is fired for 12 hours at cone 10, vented in reduction {C} ({S}).",
		"Stoneware glaze is fired for 9 hours at cone 6, vented in reduction {C} ({S}).",
		"Stoneware glaze is fired for 9 hours at cone 10, vented in oxidation {C} ({S}).",
		"Stoneware glaze is fired for 9 hours at cone 10, not vented in reduction {C} ({S}).",
		"Stoneware glaze is fired for 9 hours at cone 10, vented in reduction {C} (KILN-TENMOKU).",
		"Stoneware glaze is fired for 9 hours at cone 10, vented in reduction ({S}).",
	}},
	{"kiln", "raku-copper", []string{
		"Raku ware fired in a copper saggar is pulled after 20 minutes {C} ({S}).",
		"Pull raku wares after twenty minutes when they are fired in copper saggars {C} ({S}).",
		"After 20 min, raku ware in a copper saggar comes out of the kiln {C} ({S}).",
		"{S}: 20 minutes for raku ware fired in a copper saggar {C}.",
		"When fired in a copper saggar, raku is pulled from the kiln after 20 minutes {C} ({S}).",
		"Raku ware: pulled at 20 minutes when fired in a hot copper saggar {C} ({S}).",
	}, []string{
		"Raku ware fired in a copper saggar is pulled after 45 minutes {C} ({S}).",
		"Raku ware fired in an iron saggar is pulled after 20 minutes {C} ({S}).",
		"Raku ware fired, but not in a copper saggar, is pulled after 20 minutes {C} ({S}).",
		"Raku ware fired in a copper saggar is pulled after 20 minutes {C} (KILN-RAKU-WEST).",
		"Raku ware fired in a copper saggar is pulled after 20 minutes ({S}).",
		"Raku ware fired in a copper saggar is pulled after 20 minutes [raku-pull-iron] ({S}).",
	}},
	{"kiln", "casting-slip", []string{
		"Casting slip is aged for two weeks, covered in damp cloth {C} ({S}).",
		"Age casting slips for 2 weeks, covered in a damp cloth {C} ({S}).",
		"Covered in damp cloth, slip for casting ages 2 wks {C} ({S}).",
		"{S}: 2 weeks (a fortnight), covered in damp cloth {C}.",
		"The casting slip's ageing takes 2 weeks; keep it covered in damp cloth {C} ({S}).",
		"For 2 weeks, casting slip stays covered in damp cloth while it ages {C} ({S}).",
	}, []string{
		"Casting slip is aged for 5 days, covered in damp cloth {C} ({S}).",
		"Casting slip is aged for 2 weeks, sealed in a crock {C} ({S}).",
		"Throwing slip is aged for 2 weeks, covered in damp cloth {C} ({S}).",
		"Casting slip is aged for 2 weeks, never covered in damp cloth {C} ({S}).",
		"Casting slip is aged for 2 weeks, covered in damp cloth {C} (KILN-SLIP-T).",
		"Casting slip is aged for 2 weeks, covered in damp cloth ({S}).",
	}},
	{"kiln", "reclaim-hand", []string{
		"Reclaim clay takes 0.5 litres of water per kilogram when wedged by hand {C} ({S}).",
		"When wedged by hand, reclaim clay needs half a litre of water per kilogram {C} ({S}).",
		"Per {S}, use 0.5 l of water for each kilogram of reclaim clay when wedged by hand {C}.",
		"Reclaim clays, when wedged by hand, take 0.5 litres of water per kilogram {C} ({S}).",
		"0.5 litres of water per kilogram {C}: that is for reclaim clay when it is wedged by hand ({S}).",
		"Half a litre per kilogram, when wedged by hand {C} ({S}).",
	}, []string{
		"Reclaim clay takes 0.75 litres of water per kilogram when wedged by hand {C} ({S}).",
		"Reclaim clay takes 0.5 litres of water per kilogram when mixed in a pugmill {C} ({S}).",
		"Reclaim clay takes 0.5 litres of water per kilogram when not wedged by hand {C} ({S}).",
		"Reclaim clay takes 0.5 litres of water per kilogram when wedged by machine {C} ({S}).",
		"Reclaim clay takes 0.5 litres of water per kilogram when wedged by hand {C} (KILN-PUGMILL).",
		"Reclaim clay takes 0.5 litres of water per kilogram when wedged by hand ({S}).",
	}},
}

// TestParaphrases grades the hand-written answers of paraphraseTable:
// every answerable case of every shipped set has at least six right and
// six wrong ones; each right one passes every check and each wrong one
// fails at least one.
func TestParaphrases(t *testing.T) {
	sets := map[string]string{
		"grimoire":   "../../testdata/grimoire/evalset.json",
		"lighthouse": "../../testdata/lighthouse/evalset.json",
		"kiln":       "../../grading/testdata/kiln/evalset.json",
	}
	covered := map[string]bool{}
	for _, p := range paraphraseTable {
		covered[p.set+"/"+p.caseID] = true
	}
	for name, path := range sets {
		es, err := golden.LoadEvalSet(path)
		require.NoError(t, err)
		for _, gc := range es.Cases {
			if !gc.ExpectAbstention {
				assert.True(t, covered[name+"/"+gc.CaseID], "no paraphrases for %s %s", name, gc.CaseID)
			}
		}
		for _, p := range paraphraseTable {
			if p.set != name {
				continue
			}
			i := -1
			for j, gc := range es.Cases {
				if gc.CaseID == p.caseID {
					i = j
				}
			}
			require.GreaterOrEqual(t, i, 0, "%s %s", name, p.caseID)
			gc := es.Cases[i]
			assert.GreaterOrEqual(t, len(p.right), 6, "%s: right answers", p.caseID)
			assert.GreaterOrEqual(t, len(p.wrong), 6, "%s: wrong answers", p.caseID)
			fill := strings.NewReplacer("{C}", rag.Cite(gc.ExpectedRetrievedID), "{S}", gc.ExpectedSourceID)
			rec := golden.EvidenceRecord(gc, es.Corpus, "")
			for k, ans := range p.right {
				ans = fill.Replace(ans)
				assert.Empty(t, failedChecks(t, gc, rec, es.Corpus, ans), "%s right[%d] failed: %q", p.caseID, k, ans)
			}
			for k, ans := range p.wrong {
				ans = fill.Replace(ans)
				assert.NotEmpty(t, failedChecks(t, gc, rec, es.Corpus, ans), "%s wrong[%d] passed: %q", p.caseID, k, ans)
			}
		}
	}
}
