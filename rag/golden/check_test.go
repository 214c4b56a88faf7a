package golden_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

func askAll(t *testing.T, evalset string) (golden.EvalSet, []rag.Record) {
	t.Helper()
	es, err := golden.LoadEvalSet(evalset)
	require.NoError(t, err)
	p, err := rag.NewOffline(context.Background(), es.CorpusPath, rag.Options{})
	require.NoError(t, err)
	recs := make([]rag.Record, len(es.Cases))
	for i, gc := range es.Cases {
		recs[i], err = p.Ask(context.Background(), gc.Question)
		require.NoError(t, err)
	}
	return es, recs
}

// TestEveryMutationIsCaught derives every named mutation of every golden
// case of both domains and requires CheckGolden to fail each one.
func TestEveryMutationIsCaught(t *testing.T) {
	for _, evalset := range []string{"../../testdata/grimoire/evalset.json", "../../testdata/lighthouse/evalset.json"} {
		es, recs := askAll(t, evalset)
		seen := map[string]bool{}
		for i, gc := range es.Cases {
			require.True(t, golden.Passed(golden.CheckGolden(gc, recs[i], es.Corpus)), "unmutated %s must pass", gc.CaseID)
			for _, m := range golden.Mutations(gc, recs[i], es.Corpus) {
				seen[m.Name] = true
				mutated := recs[i]
				mutated.Answer = m.Answer
				assert.False(t, golden.Passed(golden.CheckGolden(gc, mutated, es.Corpus)), "%s: %s (%s) survived: %q", gc.CaseID, m.Name, m.Target, m.Answer)
			}
		}
		for _, name := range []string{golden.MutWrongSourceNumber, golden.MutSwappedSynonym, golden.MutDroppedQualifier, golden.MutDroppedCitation, golden.MutInventedAnswer} {
			assert.True(t, seen[name], "%s: no case exercises %s", es.ID, name)
		}
	}
}

func TestMutationsAreDerivedFromCaseFields(t *testing.T) {
	es, recs := askAll(t, "../../testdata/grimoire/evalset.json")
	byCase := map[string][]golden.Mutation{}
	for i, gc := range es.Cases {
		byCase[gc.CaseID] = golden.Mutations(gc, recs[i], es.Corpus)
	}
	find := func(id, name string) []golden.Mutation {
		var out []golden.Mutation
		for _, m := range byCase[id] {
			if m.Name == name {
				out = append(out, m)
			}
		}
		return out
	}
	wrong := find("numeric-source-verdigris-dose", golden.MutWrongSourceNumber)
	require.Len(t, wrong, 2, "one per forbidden value")
	assert.Contains(t, wrong[0].Answer, "9 drams")
	assert.NotContains(t, wrong[0].Answer, "3 drams")
	swap := find("near-synonym-moonpetal-vapor", golden.MutSwappedSynonym)
	require.Len(t, swap, 1)
	assert.Contains(t, swap[0].Answer, "When moonflower is ground")
	assert.Contains(t, swap[0].Answer, "[moonpetal-silver-vapor]", "the swap keeps the citation")
	assert.Empty(t, find("numeric-source-verdigris-dose", golden.MutSwappedSynonym), "same-subject siblings give no synonym swap")
	inv := find("absent-moonpetal-dew-shelf-life", golden.MutInventedAnswer)
	require.Len(t, inv, 1)
	assert.Contains(t, inv[0].Answer, "11 grains")
	dropped := find("conditional-shadeglass-harvest", golden.MutDroppedQualifier)
	require.Len(t, dropped, 1)
	assert.NotContains(t, dropped[0].Answer, "grown entirely in shade")
}

func TestCheckGoldenDetails(t *testing.T) {
	es, recs := askAll(t, "../../testdata/grimoire/evalset.json")
	failed := func(gc golden.Case, rec rag.Record) []string {
		var names []string
		for _, c := range golden.CheckGolden(gc, rec, es.Corpus) {
			if !c.OK {
				names = append(names, c.Name)
			}
		}
		return names
	}
	absent, absentRec := es.Cases[6], recs[6]
	require.True(t, absent.ExpectAbstention)
	r := absentRec
	r.Answer = rag.Abstention + "\n"
	assert.Equal(t, []string{golden.CheckAbstention}, failed(absent, r), "abstention is byte-for-byte")
	r.Answer = "insufficient_context"
	assert.Equal(t, []string{golden.CheckAbstention}, failed(absent, r))

	dose, doseRec := es.Cases[0], recs[0]
	r = doseRec
	r.RetrievedIDs = []string{doseRec.RetrievedIDs[1], doseRec.RetrievedIDs[0]}
	assert.Equal(t, []string{golden.CheckRankedIDs}, failed(dose, r), "rank order is exact")

	r = doseRec
	r.ContextPayload = doseRec.ContextPayload[:len(doseRec.ContextPayload)/2]
	assert.Equal(t, []string{golden.CheckCollisionInContext}, failed(dose, r), "the sibling block must be in the payload")

	// A number that no cited chunk holds, phrased so no literal check sees it.
	r = doseRec
	r.Answer = doseRec.Answer + " Repeat after 4 nights."
	assert.Equal(t, []string{golden.CheckNumericGrounding}, failed(dose, r))
	assert.Equal(t, []string{"4 nights"}, golden.UngroundedNumbers(r))
}

func TestUngroundedNumbers(t *testing.T) {
	rec := rag.Record{
		Chunks: []rag.Chunk{{ID: "a", Text: "Safe at Mohs hardness 8 and after 7 moon-phases."}, {ID: "b", Text: "Takes 17 grains."}},
	}
	for _, tc := range []struct {
		answer string
		want   []string
	}{
		{"After 7 moon-phases [a].", nil},
		{"Mohs hardness 8 [a]", nil},
		{"After 7 moon-phases.", []string{"7 moon-phases"}}, // nothing cited
		{"Takes 17 grains [a].", []string{"17 grains"}},     // cited the wrong chunk
		{"Takes 17 grains [b], 7 moon-phases [a].", nil},    // each from its cited chunk
		{"Folio 2-b of [a] says 3rd; v2 [a]", nil},          // identifiers are not quantities
		{"It takes 1,5 grains [b]", []string{"1,5 grains"}}, // decimal comma kept whole
	} {
		rec.Answer = tc.answer
		assert.Equal(t, tc.want, golden.UngroundedNumbers(rec), tc.answer)
	}
}

func TestRecordValidate(t *testing.T) {
	good := func() rag.Record {
		return rag.Record{
			Question:     "q",
			RetrievedIDs: []string{"a", "b"},
			Chunks:       []rag.Chunk{{ID: "a", Similarity: 0.75, Distance: 0.25}, {ID: "b", Similarity: -0.5, Distance: 1.5}},
			Similarities: []float64{0.75, -0.5},
			Distances:    []float64{0.25, 1.5},
			Answer:       "x",
		}
	}
	require.NoError(t, good().Validate())
	for _, tc := range []struct {
		name string
		edit func(r *rag.Record)
		want string
	}{
		{"misaligned", func(r *rag.Record) { r.Distances = r.Distances[:1] }, "misaligned ranks"},
		{"id mismatch", func(r *rag.Record) { r.Chunks[1].ID = "c" }, `rank 1: chunk id "c"`},
		{"nan", func(r *rag.Record) { r.Similarities[0], r.Chunks[0].Similarity = math.NaN(), math.NaN() }, "non-finite"},
		{"inf distance", func(r *rag.Record) { r.Distances[1], r.Chunks[1].Distance = math.Inf(1), math.Inf(1) }, "non-finite"},
		{"similarity range", func(r *rag.Record) {
			r.Similarities[0], r.Chunks[0].Similarity, r.Distances[0], r.Chunks[0].Distance = 1.5, 1.5, -0.5, -0.5
		}, "outside [-1, 1]"},
		{"distance not 1-sim", func(r *rag.Record) { r.Distances[0], r.Chunks[0].Distance = 0.25+1e-11, 0.25+1e-11 }, "is not 1 - similarity"},
		{"rank order", func(r *rag.Record) {
			r.Similarities[1], r.Chunks[1].Similarity, r.Distances[1], r.Chunks[1].Distance = 0.875, 0.875, 0.125, 0.125
		}, "above rank 0"},
		{"chunk metrics differ", func(r *rag.Record) { r.Chunks[0].Similarity = 0.5 }, "differ"},
		{"empty answer", func(r *rag.Record) { r.Answer = "" }, "empty answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.edit(&r)
			assert.ErrorContains(t, r.Validate(), tc.want)
		})
	}
}

func TestGoldenFileErrors(t *testing.T) {
	caseJSON := func(extra string) string {
		return `{"id":"g","cases":[{"case_id":"c1","question":"q?","expected_retrieved_id":"verdigris-dose-verdant",` +
			`"expected_ranked_ids":["verdigris-dose-verdant","verdigris-dose-amber"],"expected_grimoire_id":"GRIM-VERDANT",` +
			`"expected_value":"3 drams","forbidden_values":["9 drams"],"required_qualifiers":["after dusk"],` + extra + `}]}`
	}
	full := `"must_contain":["3 drams","after dusk","GRIM-VERDANT","[verdigris-dose-verdant]"],"forbidden":["9 drams"]`
	corpus := loadGrimoire(t)
	for _, tc := range []struct {
		name, json, want string
		validate         bool
	}{
		{"ok", caseJSON(full), "", true},
		{"unknown field", caseJSON(full + `,"must_contian":[]`), `cases[0] (case_id "c1"): decode case: json: unknown field "must_contian"`, false},
		{"citation not required", caseJSON(`"must_contain":["3 drams","after dusk","GRIM-VERDANT"],"forbidden":["9 drams"]`), `field "must_contain": must include "[verdigris-dose-verdant]"`, false},
		{"forbidden value not forbidden", caseJSON(`"must_contain":["3 drams","after dusk","GRIM-VERDANT","[verdigris-dose-verdant]"]`), `field "forbidden": must include forbidden value "9 drams"`, false},
		{"source aliases disagree", caseJSON(full + `,"expected_source_id":"X"`), `disagree`, false},
		{"qualifier not in evidence", replaceAll(caseJSON(full), "after dusk", "before dawn"), `"before dawn" does not occur in the text of chunk "verdigris-dose-verdant"`, true},
		{"forbidden value is no trap", replaceAll(caseJSON(full), "9 drams", "99 drams"), `"99 drams" occurs in no other chunk`, true},
		{"unknown id", replaceAll(caseJSON(full), `"verdigris-dose-amber"`, `"nope"`), `field "expected_ranked_ids"[1]: id "nope" is not in corpus`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "golden.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.json), 0o644))
			cases, err := golden.Load(path)
			if err == nil && tc.validate {
				err = golden.Validate(cases, corpus)
			}
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, "GRIM-VERDANT", cases[0].ExpectedSourceID, "expected_grimoire_id fills the source id")
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func replaceAll(s, old, repl string) string { return strings.ReplaceAll(s, old, repl) }

func loadGrimoire(t *testing.T) rag.Corpus {
	t.Helper()
	c, err := rag.LoadCorpus("../../testdata/grimoire/corpus.json")
	require.NoError(t, err)
	return c
}
