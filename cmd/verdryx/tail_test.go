package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tailFixture writes a file mixing a 3-event chain, a call record, a blank
// line, another object, a malformed line, an invalid event and a broken
// link, and returns its path.
func tailFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	chain := filepath.Join(dir, "chain.ndjson")
	writeTestChain(t, chain, 3)
	raw, err := os.ReadFile(chain)
	require.NoError(t, err)
	ev := strings.SplitAfter(string(raw), "\n")[:3]
	// An event whose agent_id is invalid, chained to event 3.
	bad := strings.Replace(ev[2], `"agent_id":"agent://acme.example/bot"`, `"agent_id":"Bad Agent"`, 1)
	// Event 2 again after event 3: its prev_hash is event 1's hash, a break.
	var b strings.Builder
	b.WriteString(ev[0] + ev[1] + ev[2])
	b.WriteString(`{"run_id":"r1","step":2,"model":"m","decision":"allow","cost_microusd":1200,"outcome":"case_resolved"}` + "\n")
	b.WriteString("\n")
	b.WriteString(`{"hello":"world"}` + "\n")
	b.WriteString(ev[1])
	b.WriteString("{not json\n")
	b.WriteString(ev[1])
	b.WriteString(bad)
	b.WriteString(`{"partial":`)
	path := filepath.Join(dir, "events.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

func TestTailCommandOnce(t *testing.T) {
	path := tailFixture(t)
	out, errOut, code := runCLI(t, "tail", "--once", "--from-start", path)
	assert.Equal(t, 1, code, "a break and an invalid event fail the run")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 9, out) // the blank line 5 is not printed
	want := []string{
		"line 1 event quality_score agent://acme.example/bot head",
		"line 2 event quality_score agent://acme.example/bot chained",
		"line 3 event quality_score agent://acme.example/bot chained",
		"line 4 record run_id=r1 step=2 model=m decision=allow outcome=case_resolved cost_microusd=1200",
		"line 6 other: ",
		"line 7 event quality_score agent://acme.example/bot BREAK expected sha256:",
		"line 8 malformed: ",
		"line 9 event quality_score agent://acme.example/bot unverifiable",
		"line 10 event quality_score Bad Agent chained invalid: field agent_id: \"Bad Agent\"",
	}
	for i, w := range want {
		assert.True(t, strings.HasPrefix(lines[i], w), "line %d: want prefix %q, have %q", i, w, lines[i])
	}
	assert.Contains(t, errOut, "tail: 10 lines: 6 events (3 chained, 1 heads, 1 unverifiable, 1 breaks, 1 invalid), 1 records, 1 other, 1 malformed, 0 skipped")
	assert.Contains(t, errOut, "the last 11 bytes are a partial line")
}

func TestTailCommandJSONAndResume(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.ndjson")
	writeTestChain(t, path, 4)
	offset := filepath.Join(dir, "events.offset")

	// The first run reads everything; appended events are read by the next
	// run only, and their chain continues across the restart.
	out, _, code := runCLI(t, "tail", "--once", "--from-start", "--json", "--offset-file", offset, path)
	require.Equal(t, 0, code, out)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 4)
	writeTestChain(t, path, 2) // the writer continues the chain

	out, errOut, code := runCLI(t, "tail", "--once", "--json", "--offset-file", offset, path)
	require.Equal(t, 0, code, out+errOut)
	var got []tailOut
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var o tailOut
		require.NoError(t, json.Unmarshal([]byte(l), &o), l)
		got = append(got, o)
	}
	require.Len(t, got, 2)
	assert.Equal(t, []int64{5, 6}, []int64{got[0].Line, got[1].Line})
	assert.Equal(t, []string{"chained", "chained"}, []string{got[0].Chain, got[1].Chain},
		"the chain is seeded from the line before the saved offset")
	assert.Equal(t, "event", got[0].Kind)
	assert.Equal(t, "agent://acme.example/bot", got[0].AgentID)

	// Nothing new: nothing printed.
	out, _, code = runCLI(t, "tail", "--once", "--offset-file", offset, path)
	require.Equal(t, 0, code)
	assert.Empty(t, out)
}

func TestTailCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"tail"}, "want exactly one FILE"},
		{"missing file", []string{"tail", "--once", filepath.Join(dir, "nope.ndjson")}, "no such file"},
		{"bad max line", []string{"tail", "--max-line", "0", "x"}, "--max-line 0: want at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tc.args...)
			assert.Equal(t, 2, code)
			assert.Contains(t, errOut, tc.want)
		})
	}
}
