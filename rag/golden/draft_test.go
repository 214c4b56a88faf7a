package golden_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// TestDraftPassesItsOwnEvidence: on the shipped corpora (other citation
// fields, declared units, a subject field), every drafted case, its
// question written, passes Parse's field rules and Validate, whose
// CheckEvidence grades the chunk's own text with every check: a draft
// never asks for a literal its chunk does not hold.
func TestDraftPassesItsOwnEvidence(t *testing.T) {
	for _, path := range []string{"../../testdata/grimoire/corpus.json", "../../testdata/lighthouse/corpus.json"} {
		c, err := rag.LoadCorpus(path)
		require.NoError(t, err)
		var ids []string // a chunk without a source cannot be drafted (TestDraftRefusals)
		for _, e := range c.Entries {
			if c.Source(e) != "" {
				ids = append(ids, e.ID)
			}
		}
		cases, err := golden.Draft(c, ids)
		require.NoError(t, err)
		require.Len(t, cases, len(ids))
		withNumbers := 0
		for i := range cases {
			if len(cases[i].MustContain) > 2 {
				withNumbers++
			}
			cases[i].Question = "What does " + cases[i].CaseID + " say?"
		}
		assert.Positive(t, withNumbers, "%s: some chunk's numbers are candidates", path)
		require.NoError(t, golden.Validate(cases, c), path)
	}
}

func TestDraftRefusals(t *testing.T) {
	c, err := rag.ParseCorpus([]byte(`{"id": "k", "label_fields": ["source", "page"], "source_field": "source", "entries": [
		{"id": "a", "text": "Set the valve to 3 bar.", "source": "m.md", "page": 1},
		{"id": "b", "text": "No source here.", "source": null, "page": 2}]}`))
	require.NoError(t, err)
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{"a", "zz"}, `chunk "zz" is not in corpus "k"`},
		{[]string{"a", "a"}, `chunk "a" is asked for twice`},
		{[]string{"b"}, `chunk "b" has no source (its "source" is null)`},
	} {
		_, err := golden.Draft(c, tc.ids)
		require.Error(t, err, tc.ids)
		assert.Contains(t, err.Error(), tc.want)
	}
	cases, err := golden.Draft(c, []string{"a"})
	require.NoError(t, err)
	assert.Equal(t, []string{"m.md", "[a]", "3 bar"}, cases[0].MustContain)
	assert.Contains(t, cases[0].Question, "Set the valve to 3 bar.", "the placeholder quotes the chunk")
}
