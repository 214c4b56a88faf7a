package grading

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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
	run, err := (&Runner{Model: m, RAG: asker, Concurrency: 1}).RunWithID(ctx, set, "", "")
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

// copyGrimoire copies the shipped grimoire set into a temp dir, applying
// edit to each file's bytes.
func copyGrimoire(t *testing.T, edit func(name string, b []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"corpus.json", "evalset.json", "golden.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "grimoire", f))
		require.NoError(t, err)
		if edit != nil {
			b = edit(f, b)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	return filepath.Join(dir, "evalset.json")
}

// TestRAGCaseDigestCoversGoldenAndChunks edits one forbidden literal of one
// golden case, then one referenced corpus chunk: each edit changes the set
// digest and exactly the cases it touches.
func TestRAGCaseDigestCoversGoldenAndChunks(t *testing.T) {
	orig, err := LoadEvalSet(copyGrimoire(t, nil))
	require.NoError(t, err)

	softened := `"forbidden": ["9 drams", "15 drams", "GRIM-AMBER", "GRIM-OBSIDIAN-PETAL", "at dawn",`
	edited, err := LoadEvalSet(copyGrimoire(t, func(name string, b []byte) []byte {
		if name != "golden.json" {
			return b
		}
		out := strings.Replace(string(b), `"forbidden": ["9 drams", "15 drams", "GRIM-AMBER", "GRIM-OBSIDIAN-PETAL", "amber glass", "at dawn",`, softened, 1)
		require.NotEqual(t, string(b), out)
		return []byte(out)
	}))
	require.NoError(t, err)
	assert.NotEqual(t, orig.Digest, edited.Digest, "a golden edit changes the set digest")
	assert.Equal(t, []string{"numeric-source-verdigris-dose"}, ChangedCases(orig.CaseDigests, edited.CaseDigests))

	chunk, err := LoadEvalSet(copyGrimoire(t, func(name string, b []byte) []byte {
		if name != "corpus.json" {
			return b
		}
		out := strings.Replace(string(b), "A sunspire orchid grown in full sun", "A sunspire orchid raised in full sun", 1)
		require.NotEqual(t, string(b), out)
		return []byte(out)
	}))
	require.NoError(t, err)
	assert.NotEqual(t, orig.Digest, chunk.Digest)
	assert.Equal(t, []string{"conditional-shadeglass-direct-sun", "conditional-shadeglass-harvest"},
		ChangedCases(orig.CaseDigests, chunk.CaseDigests), "the cases that reference the sibling chunk")

	again, err := LoadEvalSet(copyGrimoire(t, func(_ string, b []byte) []byte { return append(b, '\n', '\n') }))
	require.NoError(t, err)
	assert.Equal(t, orig.Digest, again.Digest, "formatting does not change the digest")
}
