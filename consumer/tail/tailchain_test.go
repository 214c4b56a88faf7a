package tail

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/envelope"
)

// tailChainLines writes an n-event chain with the envelope writer and returns
// its lines (newline included).
func tailChainLines(t testing.TB, n int) [][]byte {
	t.Helper()
	return tailChainAfter(t, nil, n)
}

// tailChainAfter writes n events with the envelope writer after prefix (the
// writer continues the chain from prefix's last line) and returns them.
func tailChainAfter(t testing.TB, prefix []byte, n int) [][]byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chain.ndjson")
	require.NoError(t, os.WriteFile(path, prefix, 0o644))
	w, err := envelope.OpenWriter(path, envelope.WriterOptions{})
	require.NoError(t, err)
	for i := range n {
		_, err := w.Append(envelope.New(envelope.TypeQualityScore, "agent://acme.example/bot", "run-1",
			map[string]any{"case_id": fmt.Sprintf("c%d", i)}, time.Unix(int64(i), 0)))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.SplitAfter(raw[len(prefix):], []byte("\n"))[:n]
}

// tailCheckFile writes content, then checks its lines from byte `from` (a line
// start) with a fresh LineChecker, returning the kinds and links seen.
func tailCheckFile(t *testing.T, content []byte, from int64, otherFile bool) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.ndjson")
	require.NoError(t, os.WriteFile(path, content, 0o644))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	id, _ := fileID(fi)
	if otherFile {
		id.Ino++ // the file at the path is no longer the one being read
	}
	var c LineChecker
	var out []string
	off := from
	for i, l := range bytes.SplitAfter(content[from:], []byte("\n")) {
		if len(l) == 0 {
			break
		}
		ln := Line{Bytes: bytes.TrimSuffix(l, []byte("\n")), Path: path, Offset: off, Number: int64(i + 1), File: id}
		if len(ln.Bytes) > 40 && ln.Bytes[0] == 'X' {
			ln.Bytes, ln.Oversize = nil, int64(len(ln.Bytes))
		}
		got := c.Check(ln)
		s := got.Kind.String()
		if got.Kind == KindEvent {
			s += " " + got.Link.String()
			if got.Err != nil {
				s += " invalid"
			}
		}
		out = append(out, s)
		off += int64(len(l))
	}
	return out
}

func TestLineChecker(t *testing.T) {
	ev := tailChainLines(t, 3)
	record := []byte(`{"run_id":"r1","outcome":"case_resolved"}` + "\n")
	oversize := []byte("X" + string(bytes.Repeat([]byte("x"), 50)) + "\n")
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name    string
		content []byte
		from    int64
		// otherFile: the file at the path was replaced, so the line before
		// the resume point cannot be read back.
		otherFile bool
		want      []string
	}{
		{"from the start", join(ev[0], ev[1], ev[2]), 0, false,
			[]string{"event head", "event chained", "event chained"}},
		// As agent-conform -chain counts them: every well-formed line is a
		// link, so an event must chain to the record before it.
		{"records are links", join(ev[0], record, ev[1]), 0, false,
			[]string{"event head", "record", "event break"}},
		{"an event chained to a record", join(record, tailChainAfter(t, record, 1)[0]), 0, false,
			[]string{"record", "event chained"}},
		{"resumed after a record it chains to", join(ev[0], record, tailChainAfter(t, join(ev[0], record), 1)[0]),
			int64(len(ev[0]) + len(record)), false,
			[]string{"event chained"}},
		{"a record, then a malformed line", join(record, []byte("{oops\n"), ev[1]), 0, false,
			[]string{"record", "malformed", "event unverifiable"}},
		{"a record, then an oversize line", join(record, oversize, ev[1]), 0, false,
			[]string{"record", "oversize", "event unverifiable"}},
		{"a break", join(ev[0], ev[2]), 0, false,
			[]string{"event head", "event break"}},
		{"resumed: seeded from the previous line", join(ev[0], ev[1], ev[2]), int64(len(ev[0]) + len(ev[1])), false,
			[]string{"event chained"}},
		{"resumed: previous line unreadable: unverifiable, not a break", join(ev[0], ev[1], ev[2]),
			int64(len(ev[0]) + len(ev[1])), true,
			[]string{"event unverifiable"}},
		{"resumed: a real break after the first event is still a break", join(ev[0], ev[1], ev[1]),
			int64(len(ev[0])), true,
			[]string{"event unverifiable", "event break"}},
		{"resumed after a record", join(ev[0], record, ev[1]),
			int64(len(ev[0]) + len(record)), false,
			[]string{"event break"}},
		{"resumed after a malformed line", join(ev[0], []byte("{oops\n"), ev[1]),
			int64(len(ev[0]) + 6), false,
			[]string{"event unverifiable"}},
		{"after an oversize line", join(ev[0], oversize, ev[1], ev[2]), 0, false,
			[]string{"event head", "oversize", "event unverifiable", "event chained"}},
		{"malformed and other lines", join([]byte("{oops\n"), ev[1], []byte("{\"a\":1}\n\n")), 0, false,
			[]string{"malformed", "event unverifiable", "other", "blank"}},
		{"invalid event", bytes.Replace(ev[0], []byte(`"agent_id":"agent://acme.example/bot"`), []byte(`"agent_id":"nope"`), 1), 0, false,
			[]string{"event head invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tailCheckFile(t, tc.content, tc.from, tc.otherFile))
		})
	}
}

func TestLineCheckerRestartsOnNewFile(t *testing.T) {
	ev := tailChainLines(t, 2)
	var c LineChecker
	first := c.Check(Line{Bytes: bytes.TrimSpace(ev[0]), File: FileID{1, 1}})
	assert.Equal(t, envelope.LinkHead, first.Link)
	// The same chain's second event, but in another file: one file, one
	// chain, so its prev_hash has no predecessor there.
	second := c.Check(Line{Bytes: bytes.TrimSpace(ev[1]), File: FileID{1, 2}})
	assert.Equal(t, envelope.LinkBreak, second.Link)
	assert.Empty(t, second.Expected)
	// Truncation: read again from byte 0 of the same file.
	again := c.Check(Line{Bytes: bytes.TrimSpace(ev[0]), File: FileID{1, 2}})
	assert.Equal(t, envelope.LinkHead, again.Link)
}

// BenchmarkLineChecker classifies, validates and chain-checks a 1,000-event
// chain of ~300-byte quality_score events per iteration.
func BenchmarkLineChecker(b *testing.B) {
	const n = 1000
	ev := tailChainLines(b, n)
	lines := make([]Line, n)
	for i, l := range ev {
		lines[i] = Line{Bytes: bytes.TrimSuffix(l, []byte("\n")), Offset: int64(i), Number: int64(i + 1), File: FileID{1, 1}}
	}
	lines[0].Offset = 0
	b.ReportAllocs()
	for b.Loop() {
		var c LineChecker
		for _, ln := range lines {
			if got := c.Check(ln); got.Err != nil || (got.Link != envelope.LinkChained && got.Link != envelope.LinkHead) {
				b.Fatalf("line %d: %v %v", ln.Number, got.Link, got.Err)
			}
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}
