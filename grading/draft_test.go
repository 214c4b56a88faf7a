package grading_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// handbookCorpus is a corpus of our own making in the shape an index built
// from documents has (source and headings in each chunk's metadata):
// chunks with numbers and units, one with none.
const handbookCorpus = `{
  "id": "handbook-v1",
  "label_fields": ["source"],
  "source_field": "source",
  "entries": [
    {"id": "leave.md#parental-leave#0", "source": "handbook/leave.md", "headings": ["Leave", "Parental leave"],
     "text": "Parental leave is 16 Weeks at full pay, taken within 12 months of the birth or adoption."},
    {"id": "leave.md#notice#0", "source": "handbook/leave.md", "headings": ["Leave", "Notice"],
     "text": "Tell your manager about planned leave at least four weeks ahead."},
    {"id": "expenses.md#approval#0", "source": "handbook/expenses.md", "headings": ["Expenses", "Approval"],
     "text": "Expense reports are approved by the owner of the cost centre."},
    {"id": "travel.md#per-diem#0", "source": "handbook/travel.md", "headings": ["Travel"],
     "text": "The travel per diem is 45 euros a day, and a hotel night is capped at 180 euros."}
  ]
}`

// writeDraft writes the corpus, the golden file of cases and an eval set
// naming every case into dir, in the formats eval reads, and returns the
// eval set's path.
func writeDraft(t *testing.T, dir string, cases []golden.Case) string {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "corpus.json"), []byte(handbookCorpus), 0o644))
	g, err := json.MarshalIndent(struct {
		ID    string        `json:"id"`
		Cases []golden.Case `json:"cases"`
	}{"handbook-golden", cases}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "golden.json"), g, 0o644))
	set := grading.EvalSet{ID: "handbook-golden", Corpus: "corpus.json"}
	for _, gc := range cases {
		set.Cases = append(set.Cases, grading.Case{ID: gc.CaseID, Grader: grading.GraderRAG, Golden: "golden.json#" + gc.CaseID})
	}
	s, err := json.Marshal(set)
	require.NoError(t, err)
	path := filepath.Join(dir, "evalset.json")
	require.NoError(t, os.WriteFile(path, s, 0o644))
	return path
}

// TestDraftedCasesGradeOnceWritten: golden.Draft writes one case per
// chunk with the chunk's numbers and units as must_contain candidates; the
// eval loader refuses the set while a question is the placeholder, naming
// the case and the field; with the questions written, an answer citing the
// chunk with its numbers passes and one with a wrong number fails.
func TestDraftedCasesGradeOnceWritten(t *testing.T) {
	c, err := rag.ParseCorpus([]byte(handbookCorpus))
	require.NoError(t, err)
	cases, err := golden.Draft(c, c.IDs())
	require.NoError(t, err)
	require.Len(t, cases, 4)
	want := map[string][]string{
		"leave.md#parental-leave#0": {"handbook/leave.md", "[leave.md#parental-leave#0]", "16 Weeks", "12 months"},
		"leave.md#notice#0":         {"handbook/leave.md", "[leave.md#notice#0]", "four weeks"},
		"expenses.md#approval#0":    {"handbook/expenses.md", "[expenses.md#approval#0]"},
		"travel.md#per-diem#0":      {"handbook/travel.md", "[travel.md#per-diem#0]", "45 euros", "180 euros"},
	}
	for i, gc := range cases {
		id := c.Entries[i].ID
		assert.Equal(t, id, gc.CaseID)
		assert.Equal(t, id, gc.ExpectedRetrievedID)
		assert.Equal(t, []string{id}, gc.ExpectedRankedIDs)
		assert.Equal(t, c.Source(c.Entries[i]), gc.ExpectedSourceID)
		assert.Equal(t, want[id], gc.MustContain, id)
		assert.Contains(t, gc.Question, golden.DraftMarker)
		assert.False(t, gc.ExpectAbstention)
	}

	dir := t.TempDir()
	_, err = grading.LoadEvalSet(writeDraft(t, dir, cases))
	require.Error(t, err, "a drafted set grades nothing before its questions are written")
	assert.Contains(t, err.Error(), `cases[0] (case_id "leave.md#parental-leave#0"): field "question"`)
	assert.Contains(t, err.Error(), golden.DraftMarker)

	// One question written, the others still placeholders: the next one is named.
	cases[0].Question = "How long is parental leave, and at what pay?"
	_, err = grading.LoadEvalSet(writeDraft(t, dir, cases))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `cases[1] (case_id "leave.md#notice#0"): field "question"`)

	cases[1].Question = "How far ahead must planned leave be announced?"
	cases[2].Question = "Who approves expense reports?"
	cases[3].Question = "What is the travel per diem and the hotel cap?"
	set, err := grading.LoadEvalSet(writeDraft(t, dir, cases))
	require.NoError(t, err, "written questions make the draft a valid set")

	grade := func(gc golden.Case, answer string) (float64, string) {
		v, checks := set.GradeRAGRecord(gc.CaseID, golden.EvidenceRecord(gc, c, answer))
		var failed []string
		for _, ch := range checks {
			if !ch.OK {
				failed = append(failed, ch.Name+": "+ch.Detail)
			}
		}
		return v, strings.Join(failed, "\n")
	}
	parental := cases[0]
	v, why := grade(parental, "Parental leave is sixteen weeks at full pay, taken within 12 months of the birth. [leave.md#parental-leave#0] (source: handbook/leave.md)")
	assert.Equal(t, 1.0, v, why)
	v, why = grade(parental, "Parental leave is 14 weeks at full pay, taken within 12 months of the birth. [leave.md#parental-leave#0] (source: handbook/leave.md)")
	assert.Equal(t, 0.0, v, "a wrong number fails")
	assert.Contains(t, why, "16 Weeks")
	v, why = grade(parental, "Parental leave is 16 weeks at full pay, taken within 12 months of the birth.")
	assert.Equal(t, 0.0, v, "an answer that cites neither the chunk nor its source fails")
	assert.Contains(t, why, "[leave.md#parental-leave#0]")

	approval := cases[2]
	v, why = grade(approval, "The owner of the cost centre approves expense reports. [expenses.md#approval#0] (source: handbook/expenses.md)")
	assert.Equal(t, 1.0, v, why)
	v, _ = grade(approval, "The owner of the cost centre approves expense reports within 5 days. [expenses.md#approval#0] (source: handbook/expenses.md)")
	assert.Equal(t, 0.0, v, "a number the chunk does not hold fails a case drafted with none")
}
