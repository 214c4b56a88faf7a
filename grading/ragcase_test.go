package grading

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRAGWithAModelGeneratorCountsItsTokens(t *testing.T) {
	ctx := context.Background()
	set, err := LoadEvalSet(grimoire(t))
	require.NoError(t, err)
	m := &cannedModel{id: "claude-haiku-4-5", text: "INSUFFICIENT_CONTEXT"}
	asker, err := OfflineRAG(ctx, set.resolve(set.Corpus), m)
	require.NoError(t, err)
	run, err := (&Runner{Model: m, RAG: asker, Concurrency: 1}).Run(ctx, set, "")
	require.NoError(t, err)
	require.Len(t, run.Scores, 7)
	abstainers := 0
	for _, s := range run.Scores {
		require.True(t, s.Graded(), s.Unmeasured)
		assert.Equal(t, int64(1010), s.Tokens, "case %s: the generator's usage is the case's", s.CaseID)
		assert.InDelta(t, (1000*1+10*5)/1e6, s.CostUSD, 1e-12)
		if s.Value == 1 {
			abstainers++
			assert.Equal(t, "absent-moonpetal-dew-shelf-life", s.CaseID, "only the absent fact may be answered by abstaining")
		}
	}
	assert.Equal(t, 1, abstainers)
	assert.Contains(t, m.last.System, "INSUFFICIENT_CONTEXT", "the pipeline's system message reaches the model")
	assert.Contains(t, m.last.Prompt, "[CONTEXT id=")
}
