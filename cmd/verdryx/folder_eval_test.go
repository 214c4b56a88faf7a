package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// TestFolderToGradedEval is docs/rag.md's path from a folder to a graded
// eval, as a user runs it: index build --docs over a folder of Markdown,
// HTML and text, golden draft of three chunks from the stored generation,
// the questions written and the number candidates that do not answer
// them deleted, then eval --index active grades every case with the
// offline pipeline. After one section of the folder is edited and the
// index rebuilt, the drafted set is refused as stale rather than graded
// against other chunks.
func TestFolderToGradedEval(t *testing.T) {
	cleanEvalEnv(t)
	dir, data := t.TempDir(), t.TempDir()
	folder := filepath.Join(dir, "manual")
	require.NoError(t, os.CopyFS(folder, os.DirFS(filepath.Join("..", "..", "rag", "docs", "testdata", "manual"))))
	out, errOut, code := runCLI(t, "index", "build", "--data", data, "--docs", folder)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "retrieval hybrid", "a --docs index ranks with hybrid retrieval by default")

	// What a reader asks of three sections, and the number that answers.
	questions := map[string][2]string{
		"locks/install.md#installing-the-lock-service/requirements-1":             {"Which TCP port must be open between the nodes?", "7420"},
		"faq.html#frequently-asked-questions/how-many-leases-can-one-node-hold-1": {"How many leases can one node hold?", "50,000"},
		"leases.markdown#leases/expiry-1":                                         {"How long is the grace period after a lease expires?", "5 seconds"},
	}
	gpath, epath := filepath.Join(dir, "golden.json"), filepath.Join(dir, "evalset.json")
	args := []string{"golden", "draft", "--data", data, "--index", "active", "-o", gpath, "--evalset", epath}
	for id := range questions {
		args = append(args, "--chunk", id)
	}
	_, errOut, code = runCLI(t, args...)
	require.Equal(t, exitOK, code, errOut)
	var draft struct {
		ID    string        `json:"id"`
		Cases []golden.Case `json:"cases"`
	}
	b, err := os.ReadFile(gpath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &draft))
	require.Len(t, draft.Cases, len(questions))
	for i, c := range draft.Cases {
		q, ok := questions[c.CaseID]
		require.True(t, ok, c.CaseID)
		draft.Cases[i].Question = q[0]
		// The editing job: keep the source, the citation and the
		// candidate that answers the question.
		draft.Cases[i].MustContain = slices.DeleteFunc(c.MustContain, func(m string) bool {
			return !strings.HasPrefix(m, "[") && strings.ContainsAny(m, "0123456789") && !strings.Contains(m, q[1])
		})
		require.Len(t, draft.Cases[i].MustContain, 3, "%s: source, citation and the answer's number: %v", c.CaseID, c.MustContain)
	}
	b, err = json.Marshal(draft)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(gpath, b, 0o644))

	db := filepath.Join(dir, "v.db")
	out, errOut, code = runCLI(t, "eval", "--data", data, "--db", db, "--json", "--index", "active", epath)
	require.Equal(t, exitOK, code, errOut)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Run.Run.Scores, len(questions))
	for _, s := range res.Run.Run.Scores {
		assert.Equal(t, 1.0, s.Value, "%s: %s\n%+v", s.CaseID, s.Output, s.Checks)
	}

	// An edit of the folder makes a new generation; the set drafted from
	// the old one is refused, naming why.
	leases := filepath.Join(folder, "leases.markdown")
	lb, err := os.ReadFile(leases)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(leases, []byte(strings.Replace(string(lb), "5 seconds", "8 seconds", 1)), 0o644))
	out, errOut, code = runCLI(t, "index", "build", "--data", data, "--docs", folder)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "from cache 0", "the offline embedder's vectors are made again, never cached")
	_, errOut, code = runCLI(t, "eval", "--data", data, "--db", db, "--index", "active", epath)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "stale generation")
}

// TestMarkdownFolderDraftsValidCases is issue 54's first "done when" on a
// Markdown folder of our own making full of links, reference links,
// footnotes, fenced and indented code with brackets, console output
// ([unoptimized + debuginfo]) and captions: index build --docs, golden
// draft --all, the questions written from each chunk's own words, then the
// next step exactly as draft printed it. Every case validates (no exit
// 2), no check reads a content bracket as a citation, the candidates are
// prose numbers, and the set's corpus is beside the set, not inside the
// data folder.
func TestMarkdownFolderDraftsValidCases(t *testing.T) {
	cleanEvalEnv(t)
	dir, data := t.TempDir(), t.TempDir()
	t.Setenv("TAIPAN_HOME", filepath.Join(dir, "no-taipan-home")) // the store is <data>/verdryx.db
	folder := filepath.Join(dir, "docs")
	require.NoError(t, os.CopyFS(folder, os.DirFS(filepath.Join("..", "..", "rag", "docs", "testdata", "brackets"))))
	_, errOut, code := runCLI(t, "index", "build", "--data", data, "--docs", folder)
	require.Equal(t, exitOK, code, errOut)

	gpath, epath := filepath.Join(dir, "golden.json"), filepath.Join(dir, "evalset.json")
	_, errOut, code = runCLI(t, "golden", "draft", "--data", data, "--index", "active", "--all", "-o", gpath, "--evalset", epath)
	require.Equal(t, exitOK, code, errOut)
	_, next, ok := strings.Cut(strings.TrimSpace(errOut), "then: ")
	require.True(t, ok, errOut)
	require.Contains(t, next, "--data "+data, "the printed next step names the data folder it needs")

	var set struct {
		Corpus string `json:"corpus"`
	}
	b, err := os.ReadFile(epath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &set))
	corpus := filepath.Join(dir, set.Corpus)
	require.FileExists(t, corpus)
	rel, err := filepath.Rel(data, corpus)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(rel, ".."), "the set's corpus %s is outside the data folder %s", corpus, data)

	var draft struct {
		ID    string        `json:"id"`
		Cases []golden.Case `json:"cases"`
	}
	b, err = os.ReadFile(gpath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &draft))
	c, err := rag.LoadCorpus(corpus)
	require.NoError(t, err)
	require.Len(t, draft.Cases, len(c.Entries), "a case for every chunk")
	for i, gc := range draft.Cases {
		e, ok := c.Entry(gc.CaseID)
		require.True(t, ok, gc.CaseID)
		require.Contains(t, e.Text, "[", "%s: every chunk of the folder holds brackets", gc.CaseID)
		for _, m := range gc.MustContain[2:] {
			assert.NotContains(t, []string{"0.33 secs", "THREE_HOURS", "12 steps", "9 parts", "250 ms", "5 tries", "14.2 bar", "6 gauges"}, m,
				"%s: a candidate from code, console output, an identifier or a caption", gc.CaseID)
		}
		// A question in the chunk's own words: its section's title and
		// the start of its text.
		draft.Cases[i].Question = "What about " + strings.Join(strings.Fields(e.Text)[:12], " ") + "?"
	}
	b, err = json.Marshal(draft)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(gpath, b, 0o644))

	args := strings.Fields(next)
	require.Equal(t, "verdryx", args[0])
	out, errOut, code := runCLI(t, append(args[1:], "--json")...)
	require.Equal(t, exitOK, code, "every drafted case validates and grades: %s", errOut)
	var res evalrun.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Run.Run.Scores, len(draft.Cases))
	answered, passed := 0, 0
	for _, s := range res.Run.Run.Scores {
		if s.Output != rag.Abstention {
			answered++
			assert.Contains(t, s.Output, "[", "%s: the answer quotes the chunk's brackets", s.CaseID)
		}
		if s.Value == 1 {
			passed++
		}
		for _, ch := range s.Checks {
			if ch.Name == golden.CheckCitationKnown || ch.Name == golden.CheckCitationRetrieved {
				assert.True(t, ch.OK, "%s: %s %s\n%s", s.CaseID, ch.Name, ch.Detail, s.Output)
			}
		}
	}
	assert.GreaterOrEqual(t, answered, len(draft.Cases)/2, "most questions are answered")
	t.Logf("%d cases, %d answered, %d passed every check", len(draft.Cases), answered, passed)
}
