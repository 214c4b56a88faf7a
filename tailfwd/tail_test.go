package tailfwd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/consumer/tail"
	"github.com/verdryx/verdryx/envelope"
)

// tailVerdict is what a classifier said about one line.
type tailVerdict struct {
	Line     int64
	Kind     string
	Link     string // events only
	Expected string
	Found    string
	Invalid  bool
}

func verdictOf(l tail.Line, c tail.Classified) tailVerdict {
	v := tailVerdict{Line: l.Number, Kind: c.Kind.String(), Invalid: c.Err != nil}
	if c.Kind == tail.KindEvent {
		v.Link, v.Expected, v.Found = c.Link.String(), c.Expected, c.Found
	}
	return v
}

// forwarderClass is the class serve --tail must count for a verdict of
// `verdryx tail` (records in this test are all forwardable).
func forwarderClass(v tailVerdict) string {
	switch {
	case v.Kind == "event" && v.Invalid, v.Kind == "malformed":
		return "invalid"
	case v.Kind == "event" && v.Link == "break":
		return "break"
	}
	return v.Kind
}

// TestTailClassifiersAgree: `verdryx tail` (tail.Tailer +
// tail.LineChecker) and `serve --tail` (Forwarder) read the same
// file, stop mid-file, restart from their saved offsets and read the rest;
// they must give every line the same verdict. The file has a call record
// between two events (the writer continues the chain from it), a malformed
// line, an event after it, a break, and a record then an event after the
// restart.
func TestTailClassifiersAgree(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.Dir, "events.ndjson")
	const agent = "agent://acme.example/bot"
	ev := func(i int) envelope.Event {
		return envelope.New(envelope.TypeQualityScore, agent, "r1", map[string]any{"case_id": fmt.Sprintf("c%d", i), "value": 1},
			time.Date(2026, 7, 24, 12, 0, i, 0, time.UTC))
	}
	writeEvents := func(from, to int) {
		w, err := envelope.OpenWriter(path, envelope.WriterOptions{})
		require.NoError(t, err)
		for i := from; i < to; i++ {
			_, err := w.Append(ev(i))
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
	}
	appendRaw := func(lines ...string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	lastLine := func() []byte {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
		return lines[len(lines)-1]
	}
	sealAfter := func(i int, prev string) string {
		line, _, err := envelope.Seal(ev(i), prev)
		require.NoError(t, err)
		return string(line)
	}
	const record = `{"run_id":"r1","step":1,"decision":"allow","cost_microusd":10,"outcome":"case_resolved"}`

	// Lines 1-4, read before the restart.
	writeEvents(0, 2)
	appendRaw(record)
	writeEvents(2, 3) // the writer continues the chain from the record
	// The tail path and the forwarder, each with its own offset file.
	var tailGot, fwdGot []tailVerdict
	var fwdClasses []string
	var chk tail.LineChecker
	tailRun := func() {
		tl, err := tail.New(path, tail.Options{StatePath: filepath.Join(e.Dir, "tail.off"), FromStart: true, Once: true})
		require.NoError(t, err)
		chk = tail.LineChecker{} // a new process
		require.NoError(t, tl.Run(context.Background(), func(_ context.Context, l tail.Line) error {
			if c := chk.Check(l); c.Kind != tail.KindBlank {
				tailGot = append(tailGot, verdictOf(l, c))
			}
			return nil
		}))
	}
	fwdRun := func() {
		tl, err := tail.New(path, tail.Options{StatePath: filepath.Join(e.Dir, "fwd.off"), FromStart: true, Once: true})
		require.NoError(t, err)
		f := New(tl, e.JS, e.Subjects, Options{
			Counted: func(class string) { fwdClasses = append(fwdClasses, class) },
			Checked: func(l tail.Line, c tail.Classified) {
				if c.Kind != tail.KindBlank {
					fwdGot = append(fwdGot, verdictOf(l, c))
				}
			}})
		require.NoError(t, f.Run(context.Background()))
	}
	tailRun()
	fwdRun()

	// Lines 5-10, read after both restart from their saved offsets.
	writeEvents(3, 4) // line 5: chained to line 4, which neither re-reads
	ev4 := lastLine()
	h4, _, err := envelope.LineHash(ev4)
	require.NoError(t, err)
	hRec, _, err := envelope.LineHash([]byte(record))
	require.NoError(t, err)
	appendRaw("not json", // line 6
		sealAfter(5, h4), // line 7: after a malformed line
		sealAfter(6, "sha256:"+strings.Repeat("0", 64)), // line 8: a break
		record,             // line 9
		sealAfter(7, hRec)) // line 10: chained to the record
	tailRun()
	fwdRun()

	want := []struct{ kind, link string }{
		{"event", "head"}, {"event", "chained"}, {"record", ""}, {"event", "chained"},
		{"event", "chained"}, {"malformed", ""}, {"event", "unverifiable"}, {"event", "break"}, {"record", ""}, {"event", "chained"},
	}
	require.Len(t, tailGot, len(want))
	for i, w := range want {
		require.Equal(t, int64(i+1), tailGot[i].Line)
		require.Equal(t, w.kind, tailGot[i].Kind, "tail, line %d", i+1)
		require.Equal(t, w.link, tailGot[i].Link, "tail, line %d", i+1)
	}
	wantClasses := make([]string, len(tailGot))
	for i, v := range tailGot {
		wantClasses[i] = forwarderClass(v)
	}
	require.Equal(t, wantClasses, fwdClasses, "serve --tail counted other classes than tail's verdicts")
	require.Equal(t, tailGot, fwdGot, "serve --tail and tail disagree")
}
