package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two calls of the largest cost must not wrap into a small total, in one
// run or across runs; a misspelled field or trailing data is an error
// naming the line.
func TestCLIRecordsRefuseOverflowUnknownFieldsAndTrailingData(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	cases := []struct{ name, body, want string }{
		{"one-run.ndjson", `{"run_id":"r","step":1,"decision":"allow","cost_microusd":9223372036854775807,"outcome":"case_resolved"}
{"run_id":"r","step":2,"decision":"allow","cost_microusd":9223372036854775807}
`, `one-run.ndjson:1: field cost_microusd: 9223372036854775807 is over the per-call maximum of 1000000000000 ($1,000,000)`},
		{"two-runs.ndjson", `{"run_id":"a","step":1,"decision":"allow","cost_microusd":9223372036854775807,"outcome":"case_resolved"}
{"run_id":"b","step":1,"decision":"allow","cost_microusd":9223372036854775807,"outcome":"case_resolved"}
`, "two-runs.ndjson:1: field cost_microusd: 9223372036854775807 is over the per-call maximum"},
		{"misspelled.ndjson", `{"run_id":"r","decision":"allow","cost_micro_usd":5}` + "\n", `misspelled.ndjson:1: unknown field "cost_micro_usd"`},
		{"trailing.ndjson", `{"run_id":"r","decision":"allow","cost_microusd":5} garbage` + "\n", "trailing.ndjson:1: trailing data after the JSON value"},
	}
	for _, c := range cases {
		out, errOut, code := tracesRun(t, "cost-per-correct", "--input", write(c.name, c.body))
		require.NotEqual(t, 0, code, "%s: %s", c.name, out)
		require.Contains(t, errOut, c.want, c.name)
	}
	// Free-form data rides in attributes.
	_, errOut, code := tracesRun(t, "cost-per-correct", "--input", write("ok.ndjson",
		`{"run_id":"r","decision":"allow","cost_microusd":5,"outcome":"case_resolved","attributes":{"anything":[1,2]}}`+"\n"))
	require.Equal(t, 0, code, errOut)
}
