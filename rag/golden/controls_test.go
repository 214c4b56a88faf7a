package golden_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag/golden"
)

// shippedSets are the eval sets the repository ships, one per domain.
var shippedSets = []string{"../../testdata/grimoire/evalset.json", "../../testdata/lighthouse/evalset.json", "../../grading/testdata/kiln/evalset.json"}

// TestReferenceAnswersPass grades the reference answer of every answerable
// case of every shipped set (the expected chunk's text with its citation
// and source id) and requires every check to pass.
func TestReferenceAnswersPass(t *testing.T) {
	for _, set := range shippedSets {
		es, err := golden.LoadEvalSet(set)
		require.NoError(t, err)
		n := 0
		for _, gc := range es.Cases {
			if gc.ExpectAbstention {
				continue
			}
			n++
			ref := golden.ReferenceAnswer(gc, es.Corpus)
			require.NotEmpty(t, ref)
			for _, ch := range golden.CheckGolden(gc, golden.EvidenceRecord(gc, es.Corpus, ref), es.Corpus) {
				assert.True(t, ch.OK, "%s %s: %s fails its evidence (%s): %q", set, gc.CaseID, ch.Name, ch.Detail, ref)
			}
		}
		assert.Positive(t, n, set)
	}
}

// TestControlsPass derives every control of every answerable case of the
// shipped sets and requires each to pass, and each control class to occur.
func TestControlsPass(t *testing.T) {
	seen := map[string]bool{}
	for _, set := range shippedSets {
		es, err := golden.LoadEvalSet(set)
		require.NoError(t, err)
		for _, gc := range es.Cases {
			for _, ctl := range golden.Controls(gc, es.Corpus) {
				seen[ctl.Name] = true
				got := failedChecks(t, gc, golden.EvidenceRecord(gc, es.Corpus, ""), es.Corpus, ctl.Answer)
				assert.Empty(t, got, "%s %s: control %s (%s) fails: %q", set, gc.CaseID, ctl.Name, ctl.Target, ctl.Answer)
			}
		}
	}
	for _, name := range golden.ControlNames() {
		assert.True(t, seen[name], "control %s derived for no case", name)
	}
}

// TestCheckEvidenceRefusesSelfFailingCase breaks one shipped case so its
// checks fail its own evidence (a forbidden literal the expected chunk
// states; a required phrase the chunk lacks) and requires Validate to
// refuse it, naming the case and the check.
func TestCheckEvidenceRefusesSelfFailingCase(t *testing.T) {
	es, err := golden.LoadEvalSet("../../testdata/lighthouse/evalset.json")
	require.NoError(t, err)
	gc := es.Cases[0]
	bad := gc
	bad.Forbidden = append(append([]string{}, gc.Forbidden...), "lamp room")
	err = golden.Validate([]golden.Case{bad}, es.Corpus)
	require.Error(t, err)
	assert.Contains(t, err.Error(), gc.CaseID)
	assert.Contains(t, err.Error(), golden.CheckForbiddenAbsent)
	bad = gc
	bad.MustContain = append(append([]string{}, gc.MustContain...), "brass housing")
	err = golden.Validate([]golden.Case{bad}, es.Corpus)
	require.Error(t, err)
	assert.Contains(t, err.Error(), golden.CheckMustContain)
	require.NoError(t, golden.Validate([]golden.Case{gc}, es.Corpus))
}
