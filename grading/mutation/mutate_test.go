package mutation

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// TestRunMutationsKillsEveryMutant: over the grimoire set, every named
// mutation class is present and killed and every control passes.
func TestRunMutationsKillsEveryMutant(t *testing.T) {
	ctx := context.Background()
	set, err := grading.LoadEvalSet(grimoire(t))
	require.NoError(t, err)
	corpus, cpath, ok := set.RAGCorpus()
	require.True(t, ok)
	p, err := grading.OfflineRAG(ctx, cpath, nil)
	require.NoError(t, err)
	rep, err := RunWith(ctx, set, corpus, p, Options{})
	require.NoError(t, err)
	assert.Equal(t, set.ID, rep.EvalSet)
	assert.Positive(t, rep.Cases)
	assert.Positive(t, rep.Mutants)
	assert.Equal(t, rep.Mutants, rep.Killed+rep.Survived)
	assert.Equal(t, rep.Mutants, len(rep.Results))
	assert.Zero(t, rep.Survived, "survivors: %v", rep.Survivors)
	assert.Empty(t, rep.BaseFailures)
	assert.Equal(t, 1.0, rep.Sensitivity)
	assert.Positive(t, rep.Controls)
	assert.Equal(t, rep.Controls, rep.ControlsPassed)
	assert.Equal(t, 1.0, rep.Specificity)
	for _, name := range golden.MutationNames() {
		cls := rep.Classes[name]
		if assert.NotNil(t, cls, "class %s", name) {
			assert.Equal(t, cls["mutants"], cls["killed"], "class %s", name)
		}
	}
	assert.NotNil(t, rep.Survivors, "empty, not nil: --json prints []")
	assert.NotNil(t, rep.FailingControls)
}

// weakAsker answers every question with an answer no case accepts, so
// every case fails unmutated, or fails with err.
type weakAsker struct{ err error }

func (w weakAsker) Ask(context.Context, string) (rag.Record, error) {
	return rag.Record{Answer: "no idea"}, w.err
}

func (weakAsker) Generation() string { return "" }

// TestRunMutationsBaseFailures: a case whose own answer fails is listed
// and not mutated, and an asker's error names the case.
func TestRunMutationsBaseFailures(t *testing.T) {
	ctx := context.Background()
	set, err := grading.LoadEvalSet(grimoire(t))
	require.NoError(t, err)
	corpus, _, _ := set.RAGCorpus()
	rep, err := RunWith(ctx, set, corpus, weakAsker{}, Options{})
	require.NoError(t, err)
	assert.Len(t, rep.BaseFailures, rep.Cases)
	assert.Zero(t, rep.Mutants, "a failing case is not mutated")
	assert.Zero(t, rep.Sensitivity, "nothing measured is 0, which fails the run")

	_, err = RunWith(ctx, set, corpus, weakAsker{err: errors.New("down")}, Options{})
	assert.ErrorContains(t, err, "case "+set.Cases[0].ID+": down")
}

func TestInlineRAGSet(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "grimoire")
	golden, err := golden.Load(filepath.Join(dir, "golden.json"))
	require.NoError(t, err)
	set, err := InlineRAGSet(filepath.Join(dir, "corpus.json"), filepath.Join(dir, "golden.json"))
	require.NoError(t, err)
	assert.Equal(t, "mutate:golden.json", set.ID)
	require.Len(t, set.Cases, len(golden))
	for i, gc := range golden {
		assert.Equal(t, gc.CaseID, set.Cases[i].ID)
		_, ok := set.RAGGolden(gc.CaseID)
		assert.True(t, ok, gc.CaseID)
	}
	_, cpath, ok := set.RAGCorpus()
	assert.True(t, ok)
	assert.True(t, filepath.IsAbs(cpath), "the corpus path is made absolute: %s", cpath)

	_, err = InlineRAGSet(filepath.Join(dir, "corpus.json"), filepath.Join(dir, "missing.json"))
	assert.ErrorContains(t, err, "missing.json")
}

func grimoire(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "testdata", "grimoire", "evalset.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("committed grimoire fixture missing (renamed or deleted?): %v", err)
	}
	return p
}

// TestRunSemanticKillsUnsupportedClaim: with the stub's semantic checks on,
// the appended unsupported claim is killed in every answerable case, every
// other mutant still is, and every control (the reference answer
// rephrased as people write it) still passes faithfulness and relevance.
func TestRunSemanticKillsUnsupportedClaim(t *testing.T) {
	ctx := context.Background()
	set, err := grading.LoadEvalSet(grimoire(t))
	require.NoError(t, err)
	corpus, cpath, ok := set.RAGCorpus()
	require.True(t, ok)
	p, err := grading.OfflineRAG(ctx, cpath, nil)
	require.NoError(t, err)
	rep, err := RunWith(ctx, set, corpus, p, Options{Semantic: &grader.Semantic{Model: &llm.Stub{}}})
	require.NoError(t, err)
	assert.Empty(t, rep.BaseFailures)
	cls := rep.Classes[ClassUnsupportedClaim]
	require.NotNil(t, cls)
	assert.Equal(t, 6, cls["mutants"], "one per answerable case")
	assert.Equal(t, cls["mutants"], cls["killed"])
	for _, r := range rep.Results {
		if r.Mutation == ClassUnsupportedClaim {
			assert.Equal(t, []string{grader.CheckFaithfulness}, r.FailedChecks, r.CaseID)
		}
	}
	assert.Zero(t, rep.Survived, "survivors: %v", rep.Survivors)
	assert.Positive(t, rep.Controls)
	assert.Equal(t, rep.Controls, rep.ControlsPassed, "failing controls: %+v", rep.FailingControls)

	// Without the semantic checks the class is not run (the golden checks
	// cannot see it).
	plain, err := RunWith(ctx, set, corpus, p, Options{})
	require.NoError(t, err)
	assert.NotContains(t, plain.Classes, ClassUnsupportedClaim)
}
