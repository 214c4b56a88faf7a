package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/rag/golden"
)

// draftCorpus is a corpus of our own making, shaped like an index built
// from documents (source paths, headings): chunks with numbers and units
// and one with none.
const draftCorpus = `{
  "id": "handbook-v1",
  "label_fields": ["source"],
  "source_field": "source",
  "entries": [
    {"id": "leave.md#parental-leave#0", "source": "handbook/leave.md", "headings": ["Leave", "Parental leave"],
     "text": "Parental leave is 16 weeks at full pay, taken within 12 months of the birth or adoption."},
    {"id": "expenses.md#approval#0", "source": "handbook/expenses.md", "headings": ["Expenses", "Approval"],
     "text": "Expense reports are approved by the owner of the cost centre."},
    {"id": "travel.md#per-diem#0", "source": "handbook/travel.md", "headings": ["Travel", "Per diem"],
     "text": "The travel per diem is 45 euros a day, and a hotel night is capped at 180 euros."}
  ]
}`

// TestGoldenDraftOverStoredGeneration is the path from an index to a
// graded eval: index build, golden draft --index active writes the golden
// file and an eval set whose corpus is a copy of the generation's own
// beside it; eval --index
// active refuses it (exit 2) while a question is the placeholder, naming
// the case and the field, and grades every case once the questions are
// written, from the stored generation.
func TestGoldenDraftOverStoredGeneration(t *testing.T) {
	cleanEvalEnv(t)
	dir, data := t.TempDir(), t.TempDir()
	corpus := filepath.Join(dir, "handbook.json")
	require.NoError(t, os.WriteFile(corpus, []byte(draftCorpus), 0o644))
	_, errOut, code := runCLI(t, "index", "build", "--data", data, "--corpus", corpus)
	require.Equal(t, exitOK, code, errOut)

	gpath, epath := filepath.Join(dir, "cases", "golden.json"), filepath.Join(dir, "evalset.json")
	require.NoError(t, os.Mkdir(filepath.Dir(gpath), 0o755))
	out, errOut, code := runCLI(t, "golden", "draft", "--data", data, "--index", "active", "--all", "-o", gpath, "--evalset", epath)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "3 cases in "+gpath)
	assert.Contains(t, errOut, "then: verdryx eval "+epath+" --index active --data "+data+"\n", "the next step names the data folder")
	var set struct {
		ID     string `json:"id"`
		Corpus string `json:"corpus"`
		Cases  []struct{ ID, Grader, Golden string }
	}
	b, err := os.ReadFile(epath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &set))
	m, recorded, err := index.NewStore(data, index.StoreOptions{}).Generation("active")
	require.NoError(t, err)
	assert.Equal(t, "handbook-v1-golden", set.ID)
	assert.Equal(t, "evalset.corpus.json", set.Corpus, "the set's corpus is beside it, not inside the data folder")
	kept, err := os.ReadFile(filepath.Join(dir, set.Corpus))
	require.NoError(t, err)
	rb, err := os.ReadFile(recorded)
	require.NoError(t, err)
	assert.Equal(t, rb, kept, "a copy of the generation's recorded corpus")
	require.Len(t, set.Cases, 3)
	assert.Equal(t, "cases/golden.json#leave.md#parental-leave#0", set.Cases[0].Golden)
	byActive, errOut, code := runCLI(t, "golden", "draft", "--data", data, "--index", "active", "--chunk", "travel.md#per-diem#0")
	require.Equal(t, exitOK, code, errOut)
	byID, errOut, code := runCLI(t, "golden", "draft", "--data", data, "--index", m.ID, "--chunk", "travel.md#per-diem#0")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, byActive, byID, "a generation id drafts from the same recorded corpus")
	assert.Contains(t, byID, `"45 euros"`)
	_, errOut, code = runCLI(t, "golden", "draft", "--data", data, "--index", "0123", "--all")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `generation "0123" is not 32 lowercase hex digits`)

	_, errOut, code = runCLI(t, "eval", "--data", data, "--db", filepath.Join(dir, "v.db"), "--index", "active", epath)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, `(case_id "leave.md#parental-leave#0"): field "question"`)
	assert.Contains(t, errOut, golden.DraftMarker)

	_, err = golden.Load(gpath)
	require.Error(t, err, "the placeholder is refused by the golden file's own parser too")
	var draft struct {
		Cases []golden.Case `json:"cases"`
	}
	b, err = os.ReadFile(gpath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &draft))
	cases := draft.Cases
	require.Len(t, cases, 3)
	assert.Equal(t, []string{"handbook/leave.md", "[leave.md#parental-leave#0]", "16 weeks", "12 months"}, cases[0].MustContain)
	questions := []string{
		"How long is parental leave, and at what pay?",
		"Who approves expense reports?",
		"What is the travel per diem, and what is the cap on a hotel night?",
	}
	for i := range cases {
		cases[i].Question = questions[i]
	}
	b, err = json.Marshal(map[string]any{"id": "handbook-v1-golden", "cases": cases})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(gpath, b, 0o644))

	out, errOut, code = runCLI(t, "eval", "--data", data, "--db", filepath.Join(dir, "v.db"), "--json", "--index", "active", epath)
	require.Equal(t, exitOK, code, errOut)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Run.Run.Scores, 3)
	for _, s := range res.Run.Run.Scores {
		assert.Equal(t, 1.0, s.Value, "%s: %s\n%+v", s.CaseID, s.Output, s.Checks)
	}
	assert.Equal(t, m.ID, res.Run.Provenance.IndexGeneration, "graded from the stored generation")
}

// TestGoldenDraftSelectionAndRefusals: --chunk and --source choose chunks
// (in corpus order, once each) and print the golden file on stdout, which
// parses once its questions are written; bad selections and flags exit 2
// naming what was wrong; an existing -o file is not overwritten without
// --force.
func TestGoldenDraftSelectionAndRefusals(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "handbook.json")
	require.NoError(t, os.WriteFile(corpus, []byte(draftCorpus), 0o644))
	out, errOut, code := runCLI(t, "golden", "draft", "--corpus", corpus,
		"--source", "handbook/travel.md", "--chunk", "leave.md#parental-leave#0", "--chunk", "travel.md#per-diem#0")
	require.Equal(t, exitOK, code, errOut)
	var draft struct {
		ID    string        `json:"id"`
		Cases []golden.Case `json:"cases"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &draft))
	require.Len(t, draft.Cases, 2)
	assert.Equal(t, "leave.md#parental-leave#0", draft.Cases[0].CaseID)
	assert.Equal(t, []string{"handbook/travel.md", "[travel.md#per-diem#0]", "45 euros", "180 euros"}, draft.Cases[1].MustContain)
	for i := range draft.Cases {
		draft.Cases[i].Question = "What does it say?"
	}
	b, err := json.Marshal(draft)
	require.NoError(t, err)
	_, err = golden.Parse(b)
	require.NoError(t, err)

	gpath := filepath.Join(dir, "golden.json")
	require.NoError(t, os.WriteFile(gpath, []byte("edited"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--all"}, "want one of --corpus FILE and --index active|ID"},
		{[]string{"--corpus", corpus, "--index", "active", "--all"}, "want one of --corpus FILE and --index"},
		{[]string{"--corpus", corpus}, "choose chunks with --chunk ID, --source PATH or --all"},
		{[]string{"--corpus", corpus, "--all", "--chunk", "x"}, "--all drafts every chunk"},
		{[]string{"--corpus", corpus, "--all", "--evalset", "e.json"}, "--evalset needs -o FILE"},
		{[]string{"--corpus", corpus, "--chunk", "nope"}, `--chunk "nope": no such chunk in corpus ` + corpus},
		{[]string{"--corpus", corpus, "--source", "handbook/none.md"}, `no chunk of corpus ` + corpus + ` has that source (its sources: handbook/leave.md, handbook/expenses.md, handbook/travel.md)`},
		{[]string{"--index", "active", "--data", t.TempDir(), "--all"}, "no active generation"},
		{[]string{"--corpus", corpus, "--all", "-o", gpath}, gpath + " exists"},
	} {
		_, errOut, code := runCLI(t, append([]string{"golden", "draft"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.want, tc.args)
	}
	b, err = os.ReadFile(gpath)
	require.NoError(t, err)
	assert.Equal(t, "edited", string(b), "an existing golden file is left alone")
	_, errOut, code = runCLI(t, "golden", "draft", "--corpus", corpus, "--all", "-o", gpath, "--force")
	require.Equal(t, exitOK, code, errOut)
	cases, err := os.ReadFile(gpath)
	require.NoError(t, err)
	assert.Contains(t, string(cases), golden.DraftMarker)
}
