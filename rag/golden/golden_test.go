package golden_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// runGolden asks every case of the eval set through the offline pipeline
// and requires every golden check to pass. wantCases is the number of cases
// the committed eval set holds: a set that lost cases (or a loader that
// dropped them) fails here rather than passing on fewer, or none.
func runGolden(t *testing.T, evalset string, wantCases int) {
	t.Helper()
	es, err := golden.LoadEvalSet(evalset)
	require.NoError(t, err)
	require.Len(t, es.Cases, wantCases, "cases of %s", evalset)
	p, err := rag.NewOffline(context.Background(), es.CorpusPath, rag.Options{})
	require.NoError(t, err)
	for _, gc := range es.Cases {
		t.Run(gc.CaseID, func(t *testing.T) {
			rec, err := p.Ask(context.Background(), gc.Question)
			require.NoError(t, err)
			checks := golden.CheckGolden(gc, rec, es.Corpus)
			require.NotEmpty(t, checks, "a golden case with no checks passes vacuously")
			for _, c := range checks {
				assert.True(t, c.OK, "%s: %s\nretrieved %v\nanswer %q", c.Name, c.Detail, rec.RetrievedIDs, rec.Answer)
			}
		})
	}
}

func TestGrimoireGoldenOffline(t *testing.T) { runGolden(t, "../../testdata/grimoire/evalset.json", 7) }

// TestSecondDomainGoldenOffline runs the same pipeline, unchanged, on a
// corpus of another domain with its own numeric, near-synonym, qualifier and
// absence traps and other citation fields (manual_id, page).
func TestSecondDomainGoldenOffline(t *testing.T) {
	runGolden(t, "../../testdata/lighthouse/evalset.json", 5)
}

func TestGoldenFormat(t *testing.T) {
	corpus := loadGrimoire(t)
	parse := func(cases string) ([]golden.Case, error) {
		gs, err := golden.Parse([]byte(`{"id":"g","cases":[` + cases + `]}`))
		if err != nil {
			return nil, err
		}
		return gs, golden.Validate(gs, corpus)
	}
	answerable := func(extra string) string {
		return `{"case_id":"c","question":"q?","expected_retrieved_id":"moonpetal-silver-vapor","expected_grimoire_id":"GRIM-NOCTURNE",` +
			`"must_contain":["GRIM-NOCTURNE","[moonpetal-silver-vapor]"]` + extra + `}`
	}
	_, err := parse(`{"case_id":"a","question":"q?","expected_answer":"INSUFFICIENT_CONTEXT","expect_abstention":true}`)
	assert.NoError(t, err, "an abstention case may omit ranked ids")
	_, err = parse(answerable(``))
	assert.ErrorContains(t, err, `field "expected_ranked_ids": must list at least the expected rank-1 id`)
	_, err = parse(answerable(`,"expected_ranked_ids":["moonpetal-silver-vapor","moonpetal-silver-vapor"]`))
	assert.ErrorContains(t, err, "repeats an earlier rank")
	_, err = parse(answerable(`,"expected_ranked_ids":["moonpetal-silver-vapor"],"collision_sibling_ids":["moonpetal-silver-vapor"]`))
	assert.ErrorContains(t, err, "is the expected chunk, not a sibling")
	_, err = parse(answerable(`,"expected_ranked_ids":["moonpetal-silver-vapor"],"collision_sibling_ids":["moonflower-golden-vapor"],"allowed_subjects":["asterquartz"]`))
	assert.ErrorContains(t, err, `field "allowed_subjects"[0]: "asterquartz" is no collision sibling's subject`)

	gs, err := parse(answerable(`,"expected_ranked_ids":["moonpetal-silver-vapor"],"collision_sibling_ids":["moonflower-golden-vapor"],"allowed_subjects":["Moonflower"]`))
	require.NoError(t, err)
	assert.Equal(t, "moonpetal", gs[0].Subject, "derived from the corpus")
	assert.Equal(t, []string{"moonflower"}, gs[0].SiblingSubjects, "derived from the corpus")

	// expected_ranked_ids is a prefix: more results may follow.
	rec := rag.Record{RetrievedIDs: []string{"moonpetal-silver-vapor", "moonflower-golden-vapor", "asterquartz-powdering"},
		Answer: "moonpetal [moonpetal-silver-vapor] GRIM-NOCTURNE"}
	ranked := func(gc golden.Case) golden.Check {
		for _, c := range golden.CheckGolden(gc, rec, corpus) {
			if c.Name == golden.CheckRankedIDs {
				return c
			}
		}
		t.Fatal("no ranked_ids check")
		return golden.Check{}
	}
	assert.True(t, ranked(gs[0]).OK)
	gs[0].ExpectedRankedIDs = []string{"moonpetal-silver-vapor", "asterquartz-powdering"}
	assert.False(t, ranked(gs[0]).OK, "listed ranks must match in order")
}
