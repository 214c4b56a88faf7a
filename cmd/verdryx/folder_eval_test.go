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
