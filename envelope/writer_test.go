package envelope

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func testEvent(i int) Event {
	return New(TypeQualityScore, "agent://acme.example/support/bot", fmt.Sprintf("run-%d", i/10),
		map[string]any{"case_id": fmt.Sprintf("case-%d", i), "value": float64(i%10) / 10, "tokens": i * 3, "cost_usd": 0.0001 * float64(i)},
		time.Date(2026, 7, 24, 12, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Millisecond))
}

func writeChain(t *testing.T, path string, n int) {
	t.Helper()
	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		ok, err := w.Append(testEvent(i))
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.NoError(t, w.Close())
}

func verifyOK(t *testing.T, path string) Report {
	t.Helper()
	rep, err := VerifyFile(path)
	require.NoError(t, err)
	require.True(t, rep.OK(), "report: %+v", rep)
	return rep
}

func TestWriterProducesVerifiableChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 25)
	rep := verifyOK(t, path)
	require.Equal(t, 25, rep.Events)
	require.Equal(t, 1, rep.Heads)
	require.Equal(t, 24, rep.Chained)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.NotContains(t, lines[0], "prev_hash", "the first event of a chain omits prev_hash")
	require.Contains(t, lines[1], `"prev_hash":"sha256:`)
}

func TestWriterSkipsEventsWithoutAgentID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	ev := testEvent(1)
	ev.AgentID = ""
	ok, err := w.Append(ev)
	require.NoError(t, err)
	require.False(t, ok)
	require.EqualValues(t, 1, skippedOf(w))
	require.EqualValues(t, 0, w.Written())
	bad := testEvent(2)
	bad.AgentID = "agent://Not Canonical"
	_, err = w.Append(bad)
	require.ErrorContains(t, err, "agent_id")
	require.NoError(t, w.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Empty(t, raw, "a skipped or invalid event writes nothing")
}

// TestTamperEveryLine flips one byte inside a data value of each line and
// checks verification reports a break on the following line, or a break on
// the line itself when the flipped byte is in its prev_hash.
func TestTamperEveryLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 8)
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := bytes.SplitAfter(orig, []byte("\n"))
	lines = lines[:len(lines)-1]
	for i := range lines {
		for _, target := range []string{`"case_id":"case-`, `"prev_hash":"sha256:`} {
			pos := bytes.Index(lines[i], []byte(target))
			if pos < 0 {
				continue // the head has no prev_hash
			}
			t.Run(fmt.Sprintf("line%d/%s", i+1, strings.Trim(target[:8], `":`)), func(t *testing.T) {
				tampered := bytes.Clone(orig)
				off := 0
				for j := 0; j < i; j++ {
					off += len(lines[j])
				}
				off += pos + len(target) // the first digit or hex digit of the value
				tampered[off] ^= 0x01
				rep, err := Verify(bytes.NewReader(tampered))
				require.NoError(t, err)
				want := i + 2 // the successor no longer matches
				if strings.HasPrefix(target, `"prev_hash`) {
					want = i + 1
				}
				if want > len(lines) {
					// The last event's content has no successor to betray it.
					require.True(t, rep.OK())
					return
				}
				require.False(t, rep.OK())
				require.Len(t, rep.Breaks, 1)
				require.Equal(t, want, rep.Breaks[0].Line)
			})
		}
	}
}

func TestVerifyRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 3)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")

	// Blank lines are skipped; a line after a malformed one is unverifiable.
	doc := lines[0] + "\n\n" + "{not json\n" + lines[1] + "\n" + lines[2] + "\n"
	rep, err := Verify(strings.NewReader(doc))
	require.NoError(t, err)
	require.Equal(t, 1, rep.Heads)
	require.Equal(t, 1, rep.Unverifiable)
	require.Equal(t, 1, rep.Chained)
	require.Len(t, rep.Malformed, 1)
	require.Equal(t, 3, rep.Malformed[0].Line)
	require.Empty(t, rep.Breaks)

	// Dropping an event is a break at its successor.
	rep, err = Verify(strings.NewReader(lines[0] + "\n" + lines[2] + "\n"))
	require.NoError(t, err)
	require.Len(t, rep.Breaks, 1)
	require.Equal(t, 2, rep.Breaks[0].Line)
	h0, _, err := LineHash([]byte(lines[0]))
	require.NoError(t, err)
	require.Equal(t, h0, rep.Breaks[0].Expected)

	// Invalid on_behalf_of fails verification.
	ev := testEvent(0)
	ev.OnBehalfOf = []string{"user://a", "user://a"}
	bad, err := ev.MarshalJSON()
	require.NoError(t, err)
	rep, err = Verify(bytes.NewReader(append(bad, '\n')))
	require.NoError(t, err)
	require.Len(t, rep.Invalid, 1)
	require.False(t, rep.OK())
}

func TestResumeAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 5)
	w, err := OpenWriter(path, WriterOptions{Sync: SyncEvery})
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	last, _, err := LineHash([]byte(lines[len(lines)-1]))
	require.NoError(t, err)
	require.Equal(t, last, w.head(), "resumes from the last line's hash")
	_, err = w.Append(testEvent(99))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	rep := verifyOK(t, path)
	require.Equal(t, 1, rep.Heads)
	require.Equal(t, 5, rep.Chained)
}

func TestResumeReadsOnlyTheLastWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	// A file larger than the resume window whose last event is big.
	ev := testEvent(0)
	ev.Data["blob"] = strings.Repeat("x", 300<<10)
	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		ev.Data["case_id"] = fmt.Sprint(i)
		_, err := w.Append(ev)
		require.NoError(t, err)
	}
	head := w.head()
	require.NoError(t, w.Close())
	w, err = OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	require.Equal(t, head, w.head())
	_, err = w.Append(testEvent(1))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	verifyOK(t, path)
}

func TestTornTailIsTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 3)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	// A crash mid-write leaves half a line.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"schema":"taipanbox.dev/agent-event/v0.2","ts":"2026-`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(good), string(raw), "the torn line is removed, nothing else")
	_, err = w.Append(testEvent(3))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	rep := verifyOK(t, path)
	require.Equal(t, 3, rep.Chained, "the new event chains onto the last complete one")
}

func TestUnterminatedCompleteLastLineIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 2)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, bytes.TrimSuffix(raw, []byte("\n")), 0o644))
	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	_, err = w.Append(testEvent(2))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	rep := verifyOK(t, path)
	require.Equal(t, 3, rep.Events)
	require.Equal(t, 2, rep.Chained)
}

func TestMalformedTailStartsNewHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 2)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("garbage that is not json\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	require.Empty(t, w.head())
	_, err = w.Append(testEvent(2))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	rep, err := VerifyFile(path)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Heads)
	require.Empty(t, rep.Breaks)
}

func TestConcurrentAppendsFormOneChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	w, err := OpenWriter(path, WriterOptions{Sync: SyncEveryN, SyncEveryN: 50})
	require.NoError(t, err)
	var wg sync.WaitGroup
	const workers, per = 8, 100
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := w.Append(testEvent(g*per + i)); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	require.NoError(t, w.Close())
	rep := verifyOK(t, path)
	require.Equal(t, workers*per, rep.Events)
	require.Equal(t, 1, rep.Heads)
}

func TestSecondWriterIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	defer w.Close()

	_, err = OpenWriter(path, WriterOptions{})
	require.ErrorIs(t, err, ErrLocked, "a second writer in this process")

	// A second process.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSecondWriter$")
	cmd.Env = append(os.Environ(), "VERDRYX_TEST_LOCK_PATH="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "locked by another writer")

	require.NoError(t, w.Close())
	w2, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err, "the lock is released on close")
	require.NoError(t, w2.Close())
}

// TestHelperSecondWriter runs in a child process started by
// TestSecondWriterIsRefused.
func TestHelperSecondWriter(t *testing.T) {
	path := os.Getenv("VERDRYX_TEST_LOCK_PATH")
	if path == "" {
		t.Skip("helper process only")
	}
	_, err := OpenWriter(path, WriterOptions{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("want ErrLocked, have %v", err)
	}
	fmt.Println(err)
}

// benchEvent is a typical quality_score envelope of about 400 bytes.
func benchEvent() Event {
	return New(TypeQualityScore, "agent://acme.example/support/tier1-bot", "run-20260724-0001",
		map[string]any{"case_id": "numeric-source-verdigris-dose", "value": 0.8333333333333334, "tokens": 1234, "cost_usd": 0.001234,
			"grader": "rag", "eval_set": "grimoire-golden-v1", "reasons": []any{"must_contain: 3 drams", "cited [verdigris-dose-verdant]"}},
		time.Date(2026, 7, 24, 12, 0, 0, 123e6, time.UTC))
}

// BenchmarkChainAppend measures the chained writer with fsync off (sync on
// close) for a ~400-byte event.
func BenchmarkChainAppend(b *testing.B) {
	w, err := OpenWriter(filepath.Join(b.TempDir(), "events.ndjson"), WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ev := benchEvent()
	line, _ := ev.MarshalJSON()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Append(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCanonicalHash is the floor: JCS canonicalization plus SHA-256 of
// the same event, no validation, no I/O.
func BenchmarkCanonicalHash(b *testing.B) {
	ev := benchEvent()
	line, _ := ev.MarshalJSON()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ev.Hash(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkVerifyLine measures hashing a written line through the reference
// canonicalizer, as verification does.
func BenchmarkVerifyLine(b *testing.B) {
	ev := benchEvent()
	line, _ := ev.MarshalJSON()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := LineHash(line); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSealChainsLikeTheWriter(t *testing.T) {
	var doc bytes.Buffer
	prev := ""
	for i := 0; i < 4; i++ {
		line, hash, err := Seal(testEvent(i), prev)
		require.NoError(t, err)
		lh, p, err := LineHash(line)
		require.NoError(t, err)
		require.Equal(t, hash, lh)
		require.Equal(t, prev, p)
		doc.Write(line)
		doc.WriteByte('\n')
		prev = hash
	}
	rep, err := Verify(&doc)
	require.NoError(t, err)
	require.True(t, rep.OK())
	require.Equal(t, 3, rep.Chained)
	bad := testEvent(0)
	bad.TS = "yesterday"
	_, _, err = Seal(bad, "")
	require.ErrorContains(t, err, "field ts")
}

// skippedOf returns how many events w skipped for lacking an agent_id.
func skippedOf(w *Writer) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.skipped
}
