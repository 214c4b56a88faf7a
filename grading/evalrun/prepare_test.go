package evalrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
)

// A corpus the offline pipeline cannot index fails the same way on every
// delivery: the request is refused (ErrBadRequest), not retried forever.
func TestPrepareRefusesAnUnindexableCorpus(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../testdata/grimoire/corpus.json")
	require.NoError(t, err)
	var corpus map[string]any
	require.NoError(t, json.Unmarshal(raw, &corpus))
	entries := corpus["entries"].([]any)
	junk := map[string]any{}
	for k, v := range entries[0].(map[string]any) {
		junk[k] = v
	}
	junk["id"], junk["text"] = "junk-entry", "!!! ??? ..."
	corpus["entries"] = append(entries, junk)
	b, err := json.Marshal(corpus)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "corpus.json"), b, 0o644))
	golden, err := os.ReadFile("../../testdata/grimoire/golden.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "golden.json"), golden, 0o644))
	set := `{"id":"junk-set","corpus":"corpus.json","cases":[{"id":"c1","grader":"rag","golden":"golden.json#numeric-source-amber-dose"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "evalset.json"), []byte(set), 0o644))

	_, err = evalrun.Prepare(context.Background(), evalrun.Deps{}, evalrun.Request{EvalSetPath: filepath.Join(dir, "evalset.json")})
	require.Error(t, err)
	require.True(t, errors.Is(err, grading.ErrBadRequest), "%v", err)
}
