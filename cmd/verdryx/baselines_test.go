package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/store"
)

func TestBaselineLabelsThroughTheCLI(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	set := numberedSet(t, dir, "set.json", 4, func(i int) string { return fmt.Sprintf("q-%d", i) })
	eval := func() string {
		t.Helper()
		stdout, stderr, code := runCLI(t, "eval", "--db", db, "--json", set)
		require.Equal(t, exitOK, code, stderr)
		var res evalrun.Result
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		return res.Run.ID
	}
	baseline := func(args ...string) (map[string]any, string, int) {
		t.Helper()
		stdout, stderr, code := runCLI(t, append([]string{"baseline", "--db", db, "--json"}, args...)...)
		var b map[string]any
		if code == exitOK {
			require.NoError(t, json.Unmarshal([]byte(stdout), &b))
		}
		return b, stderr, code
	}
	r1, r2 := eval(), eval()

	b1, _, code := baseline("--label", "prod", r1)
	require.Equal(t, exitOK, code)
	assert.Equal(t, true, b1["created"])
	again, _, code := baseline("--label", "prod", r1)
	require.Equal(t, exitOK, code)
	assert.Equal(t, b1["baseline_id"], again["baseline_id"], "same run and label: the same baseline")
	assert.Equal(t, false, again["created"])

	// The console labels every admission of an agent alike: the label
	// moves to the new baseline, as in the Python verdryx.
	b2, _, code := baseline("--label", "prod", r2)
	require.Equal(t, exitOK, code)
	assert.NotEqual(t, b1["baseline_id"], b2["baseline_id"])
	assert.Equal(t, b1["baseline_id"], b2["previous"].(map[string]any)["baseline_id"], "the baseline the label named before")
	stdout, _, code := runCLI(t, "baseline", "--db", db, "--label", "prod", r1)
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `^Baseline bl-\S+  \(run=`+r1+`, mean_score=\d\.\d{3}\)\n  label "prod" now names this baseline`, stdout)
	b3, _, code := baseline("--label", "prod", r2)
	require.Equal(t, exitOK, code)

	stdout, stderr, code := runCLI(t, "baselines", "--db", db, "--json")
	require.Equal(t, exitOK, code, stderr)
	var list []store.BaselineInfo
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.Len(t, list, 4, "one row per baseline, none for the idempotent call")
	assert.Equal(t, "prod", list[3].Label)
	assert.Equal(t, r2, list[3].RunID)
	assert.Equal(t, 4, list[3].Cases)
	assert.Equal(t, "prod", list[0].Label, "older baselines keep their label")
	stdout, _, code = runCLI(t, "baselines", "--db", db)
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "prod")
	assert.Contains(t, stdout, b1["baseline_id"].(string))

	eval()
	stdout, stderr, code = runCLI(t, "drift", "--db", db, "--baseline", "prod", "--json")
	require.Equal(t, exitOK, code, stderr)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	assert.Equal(t, b3["baseline_id"], rep.BaselineID, "drift takes a label (its newest baseline) and reports the id")
	_, stderr, code = runCLI(t, "drift", "--db", db, "--baseline", "nope")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "verdryx baselines lists them")
}
