package grading

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseEvalSetRejects(t *testing.T) {
	cases := []struct {
		name string
		set  string
		want []string // substrings of the error, in any order
	}{
		{"unknown grader", `{"id":"s","cases":[{"id":"a","prompt":"p","grader":"vibes"}]}`,
			[]string{`set.json: case #0 "a": field "grader": unknown grader "vibes"`}},
		{"missing rubric", `{"id":"s","cases":[{"id":"a","prompt":"p","grader":"llm_judge"}]}`,
			[]string{`case #0 "a": field "rubric": required for grader llm_judge`}},
		{"tools on a non-tool grader", `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"x","tools":[{"name":"t"}]}]}`,
			[]string{`case #0 "a": field "tools": only a tool_trace case takes tools (grader is exact)`}},
		{"expected_tools on a non-tool grader", `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"x","grader":"regex","expected_tools":[]}]}`,
			[]string{`field "expected_tools": only a tool_trace case takes expected_tools (grader is regex)`}},
		{"duplicate ids", `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"x"},{"id":"a","prompt":"q","expected":"y"}]}`,
			[]string{`case #1 "a": field "id": duplicate case id (first used by case #0)`}},
		{"bad regex", `{"id":"s","cases":[{"id":"r","prompt":"p","expected":"(unclosed","grader":"regex"}]}`,
			[]string{`case #0 "r": field "expected": bad regex`}},
		{"exact without expected", `{"id":"s","cases":[{"id":"e","prompt":"p"}]}`,
			[]string{`field "expected": required for grader exact`}},
		{"tool_trace without expected_tools", `{"id":"s","cases":[{"id":"t","prompt":"p","grader":"tool_trace","tools":[{"name":"x"}]}]}`,
			[]string{`field "expected_tools": required for grader tool_trace`}},
		{"tool without a name", `{"id":"s","cases":[{"id":"t","prompt":"p","grader":"tool_trace","tools":[{"description":"x"}],"expected_tools":[]}]}`,
			[]string{`field "tools": tool #0 has no name`}},
		{"outcome_tag without tag", `{"id":"s","cases":[{"id":"o","grader":"outcome_tag"}]}`,
			[]string{`field "prompt": required for grader outcome_tag`}},
		{"rag without corpus", `{"id":"s","cases":[{"id":"g","grader":"rag","golden":"golden.json#g"}]}`,
			[]string{`set.json: field "corpus": required when a case uses grader rag`}},
		{"no id, no cases", `{"cases":[]}`,
			[]string{`field "id": required`, `field "cases": at least one case is required`}},
		{"outcome score out of range", `{"id":"s","outcome_scores":{"x":2},"cases":[{"id":"o","prompt":"x","grader":"outcome_tag"}]}`,
			[]string{`field "outcome_scores": score of "x" is 2`}},
		{"unknown field", `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"x","expectd":"y"}]}`,
			[]string{`set.json: case #0 "a": decode: unknown field "expectd"`}},
		{"syntax error names the line", "{\"id\":\"s\",\n\"cases\": [\n{\"id\": }]}",
			[]string{`set.json: decode: line 3:`}},
		{"every problem at once", `{"id":"s","cases":[{"id":"a","grader":"llm_judge","prompt":"p"},{"id":"a","grader":"regex","expected":"["}]}`,
			[]string{`field "rubric"`, `duplicate case id`, `bad regex`}},
		{"every unknown field and every other problem at once", `{"id":"s","descripton":"x","cases":[
			{"id":"a","prompt":"p","expected":"x","expectd":"y","grader":"exact","rubrik":"r"},
			{"id":"b","grader":"llm_judge","prompt":"p"},
			{"id":"c","prompt":7,"expected":"x"},
			{"id":"a","grader":"regex","expected":"["}]}`,
			[]string{`set.json: decode: unknown field "descripton"`,
				`case #0 "a": decode: unknown field "expectd"`, `case #0 "a": decode: unknown field "rubrik"`,
				`case #1 "b": field "rubric": required for grader llm_judge`,
				`case #2 "c": field "prompt": decode: cannot unmarshal number into Go struct field Case.prompt of type string`,
				`case #3 "a": field "id": duplicate case id`, `case #3 "a": field "expected": bad regex`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEvalSet([]byte(tc.set), "set.json")
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tc.want), "one line per problem, no echo: %v", err)
		})
	}
}

func TestParseEvalSetAcceptsSeedShapes(t *testing.T) {
	set, err := ParseEvalSet([]byte(`{
	  "id": "support-tier1-v1",
	  "cases": [
	    {"id": "greets-politely", "prompt": "Reply to: 'my order is late'", "expected": "sorry", "grader": "regex"},
	    {"id": "resolves-refund", "prompt": "Draft a refund confirmation", "rubric": "Confirms the amount.", "grader": "llm_judge"},
	    {"id": "run-8842-outcome", "prompt": "case_resolved", "grader": "outcome_tag"},
	    {"id": "no-tools", "prompt": "Say hi", "grader": "tool_trace", "tools": [{"name": "lookup_order"}], "expected_tools": []},
	    {"id": "plain", "prompt": "2+2", "expected": "4"}
	  ]
	}`), "")
	require.NoError(t, err)
	assert.Equal(t, GraderExact, set.Cases[4].Kind(), "grader defaults to exact")
	require.NotNil(t, set.Cases[3].ExpectedTools)
	assert.Empty(t, *set.Cases[3].ExpectedTools, "[] is kept apart from absent")
	assert.True(t, strings.HasPrefix(set.Digest, "sha256:"))
	assert.Len(t, set.CaseDigests, 5)
}

func TestEvalSetDigest(t *testing.T) {
	a := `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"x"},{"id":"b","prompt":"q","expected":"y"}]}`
	reformatted := "{\n  \"cases\": [\n    {\"expected\": \"x\", \"id\": \"a\", \"prompt\": \"p\"},\n    {\"id\": \"b\", \"prompt\": \"q\", \"expected\": \"y\"}\n  ],\n  \"id\": \"s\"\n}"
	changed := `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"x"},{"id":"b","prompt":"q","expected":"Y"}]}`
	sa, err := ParseEvalSet([]byte(a), "")
	require.NoError(t, err)
	sr, err := ParseEvalSet([]byte(reformatted), "")
	require.NoError(t, err)
	sc, err := ParseEvalSet([]byte(changed), "")
	require.NoError(t, err)
	assert.Equal(t, sa.Digest, sr.Digest, "whitespace and key order do not change the digest")
	assert.NotEqual(t, sa.Digest, sc.Digest)
	assert.Equal(t, []string{"b"}, ChangedCases(sa.CaseDigests, sc.CaseDigests))
	delete(sc.CaseDigests, "a")
	sc.CaseDigests["c"] = "sha256:x"
	assert.Equal(t, []string{"a", "b", "c"}, ChangedCases(sa.CaseDigests, sc.CaseDigests))
}

// grimoire returns the path of the shared grimoire eval set.
func grimoire(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "testdata", "grimoire", "evalset.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("committed grimoire fixture missing (renamed or deleted?): %v", err)
	}
	return p
}

func TestLoadEvalSetRAG(t *testing.T) {
	set, err := LoadEvalSet(grimoire(t))
	require.NoError(t, err)
	require.NotNil(t, set.rag)
	assert.Len(t, set.rag.golden, len(set.Cases))
	assert.NotEmpty(t, set.rag.corpusDigest)

	// A bad golden reference names the file, the case and the field.
	dir := t.TempDir()
	for _, f := range []string{"corpus.json", "golden.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "grimoire", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"id":"g","corpus":"corpus.json","cases":[
		{"id":"x","grader":"rag","golden":"golden.json#no-such-case"},
		{"id":"y","grader":"rag","golden":"golden.json"}]}`), 0o644))
	_, err = LoadEvalSet(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad+`: case #0 "x": field "golden": no case "no-such-case" in golden.json`)
	assert.Contains(t, err.Error(), bad+`: case #1 "y": field "golden": "golden.json", want "<file>#<case_id>"`)
}
