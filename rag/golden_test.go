package rag_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
)

// runGolden asks every case of the eval set through the offline pipeline
// and requires every golden check to pass.
func runGolden(t *testing.T, evalset string) {
	t.Helper()
	es, err := rag.LoadEvalSet(evalset)
	require.NoError(t, err)
	p, err := rag.NewOffline(context.Background(), es.CorpusPath, rag.Options{})
	require.NoError(t, err)
	for _, gc := range es.Cases {
		t.Run(gc.CaseID, func(t *testing.T) {
			rec, err := p.Ask(context.Background(), gc.Question)
			require.NoError(t, err)
			for _, c := range rag.CheckGolden(gc, rec, es.Corpus) {
				assert.True(t, c.OK, "%s: %s\nretrieved %v\nanswer %q", c.Name, c.Detail, rec.RetrievedIDs, rec.Answer)
			}
		})
	}
}

func TestGrimoireGoldenOffline(t *testing.T) { runGolden(t, "../testdata/grimoire/evalset.json") }

// TestSecondDomainGoldenOffline runs the same pipeline, unchanged, on a
// corpus of another domain with its own numeric, near-synonym, qualifier and
// absence traps and other citation fields (manual_id, page).
func TestSecondDomainGoldenOffline(t *testing.T) { runGolden(t, "../testdata/lighthouse/evalset.json") }
