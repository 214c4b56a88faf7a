package tail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// tailLeakCheck verifies, after every cleanup of the test (registered later,
// so run earlier), that no goroutine is left.
func tailLeakCheck(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// tailGot is a copy of a delivered Line.
type tailGot struct {
	Text     string
	Offset   int64
	Number   int64
	File     FileID
	Oversize int64
}

// tailCollector records delivered lines; its handle is safe to call from Run.
type tailCollector struct {
	mu    sync.Mutex
	lines []tailGot
	// stopAfter, when > 0, cancels the run after that many lines.
	stopAfter int
	cancel    context.CancelFunc
}

func (c *tailCollector) handle(_ context.Context, ln Line) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, tailGot{Text: string(ln.Bytes), Offset: ln.Offset, Number: ln.Number, File: ln.File, Oversize: ln.Oversize})
	if c.stopAfter > 0 && len(c.lines) == c.stopAfter {
		c.cancel()
	}
	return nil
}

func (c *tailCollector) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.lines))
	for i, l := range c.lines {
		out[i] = l.Text
	}
	return out
}

func (c *tailCollector) snapshot() []tailGot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]tailGot(nil), c.lines...)
}

// tailRunning is a Tailer run in the background.
type tailRunning struct {
	tailer *Tailer
	cancel context.CancelFunc
	done   chan error
}

// startTail runs a tailer on path until the test ends (or stop is called).
func startTail(t *testing.T, path string, opts Options, c *tailCollector) *tailRunning {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 2 * time.Millisecond
	}
	tl, err := New(path, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	r := &tailRunning{tailer: tl, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- tl.Run(ctx, c.handle) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the run and waits for Run to return; it is idempotent.
func (r *tailRunning) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

// tailWaitFor polls cond until it holds or the deadline passes.
func tailWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func tailAppend(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func tailNumbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "{\"n\":%d}\n", i)
	}
	return b.String()
}

func tailNumberedTexts(from, to int) []string {
	return strings.Split(strings.TrimSuffix(tailNumbered(from, to), "\n"), "\n")
}

func TestTailPartialLineWaitsForNewline(t *testing.T) {
	tailLeakCheck(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	tailAppend(t, path, "first\nsec")
	c := &tailCollector{}
	r := startTail(t, path, Options{FromStart: true}, c)

	tailWaitFor(t, "the partial line to be seen", func() bool { return r.tailer.Stats().PartialBytes == 3 })
	assert.Equal(t, []string{"first"}, c.texts(), "a partial line must not be delivered")

	tailAppend(t, path, "ond")
	tailWaitFor(t, "the longer partial line", func() bool { return r.tailer.Stats().PartialBytes == 6 })
	assert.Equal(t, []string{"first"}, c.texts())

	tailAppend(t, path, "\nthird\n")
	tailWaitFor(t, "3 lines", func() bool { return len(c.texts()) == 3 })
	require.NoError(t, r.stop(t))
	got := c.snapshot()
	assert.Equal(t, []string{"first", "second", "third"}, c.texts())
	assert.Equal(t, []int64{0, 6, 13}, []int64{got[0].Offset, got[1].Offset, got[2].Offset})
	assert.Equal(t, []int64{1, 2, 3}, []int64{got[0].Number, got[1].Number, got[2].Number})
}

func TestTailStartsAtEndByDefault(t *testing.T) {
	tailLeakCheck(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	tailAppend(t, path, "old1\nold2\npart")
	c := &tailCollector{}
	r := startTail(t, path, Options{}, c)
	tailWaitFor(t, "the tailer to reach the end", func() bool { return r.tailer.Stats().PartialBytes == 4 })
	tailAppend(t, path, "ial\nnew\n")
	tailWaitFor(t, "2 lines", func() bool { return len(c.texts()) == 2 })
	require.NoError(t, r.stop(t))
	got := c.snapshot()
	assert.Equal(t, []string{"partial", "new"}, c.texts(), "start after the last complete line, never mid-line")
	assert.Equal(t, int64(3), got[0].Number)
	assert.Equal(t, int64(10), got[0].Offset)
}

func TestTailTruncation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   int    // lines written first
		rewrite string // content written after truncation
	}{
		{"shorter", 3, "x\n"},
		// Longer than what was read: only the changed head reveals it.
		{"rewritten longer", 3, "{\"n\":9}\n{\"n\":8}\n{\"n\":7}\n{\"n\":6}\n"},
		// Same first KiB (the hashed head) but shorter: only the size
		// reveals it.
		{"cut to a prefix", 200, tailNumbered(1, 150)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tailLeakCheck(t)
			path := filepath.Join(t.TempDir(), "events.ndjson")
			tailAppend(t, path, tailNumbered(1, tc.lines))
			c := &tailCollector{}
			r := startTail(t, path, Options{FromStart: true}, c)
			tailWaitFor(t, "the first lines", func() bool { return len(c.texts()) == tc.lines })

			require.NoError(t, os.WriteFile(path, []byte(tc.rewrite), 0o644)) // O_TRUNC
			want := append(tailNumberedTexts(1, tc.lines), strings.Split(strings.TrimSuffix(tc.rewrite, "\n"), "\n")...)
			tailWaitFor(t, "the rewritten lines", func() bool { return len(c.texts()) == len(want) })
			require.NoError(t, r.stop(t))
			assert.Equal(t, want, c.texts())
			got := c.snapshot()
			assert.Equal(t, int64(0), got[tc.lines].Offset)
			assert.Equal(t, int64(1), got[tc.lines].Number)
			assert.Equal(t, int64(1), r.tailer.Stats().Truncations)
		})
	}
}

func TestTailRotation(t *testing.T) {
	tailLeakCheck(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "events.ndjson")
	tailAppend(t, path, tailNumbered(1, 3))
	c := &tailCollector{}
	r := startTail(t, path, Options{FromStart: true}, c)
	tailWaitFor(t, "3 lines", func() bool { return len(c.texts()) == 3 })

	// The writer keeps its descriptor across the rename and writes to the
	// old file before reopening the path.
	old, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	require.NoError(t, os.Rename(path, path+".1"))
	_, err = old.WriteString(tailNumbered(4, 6))
	require.NoError(t, err)
	require.NoError(t, old.Close())
	tailAppend(t, path, tailNumbered(7, 8))

	tailWaitFor(t, "8 lines", func() bool { return len(c.texts()) == 8 })
	require.NoError(t, r.stop(t))
	assert.Equal(t, tailNumberedTexts(1, 8), c.texts(), "old file finished, then the new one, in order")
	got := c.snapshot()
	assert.Equal(t, got[0].File, got[5].File)
	assert.NotEqual(t, got[5].File, got[6].File, "the new file has another identity")
	assert.Equal(t, int64(1), got[6].Number)
	assert.Equal(t, int64(0), got[6].Offset)
	assert.Equal(t, int64(1), r.tailer.Stats().Rotations)
}

func TestTailRotationWhilePathMissing(t *testing.T) {
	tailLeakCheck(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	tailAppend(t, path, tailNumbered(1, 2))
	c := &tailCollector{}
	r := startTail(t, path, Options{FromStart: true}, c)
	tailWaitFor(t, "2 lines", func() bool { return len(c.texts()) == 2 })
	require.NoError(t, os.Rename(path, path+".1"))
	tailAppend(t, path+".1", tailNumbered(3, 3))
	tailWaitFor(t, "the line written to the renamed file", func() bool { return len(c.texts()) == 3 })
	tailAppend(t, path, tailNumbered(4, 4))
	tailWaitFor(t, "4 lines", func() bool { return len(c.texts()) == 4 })
	require.NoError(t, r.stop(t))
	assert.Equal(t, tailNumberedTexts(1, 4), c.texts())
}

// TestTailRestartCountsEveryLineOnce stops a tailer mid-way, changes the
// file while it is stopped, restarts it and checks that every line was
// handled exactly once across the runs.
func TestTailRestartCountsEveryLineOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		commitEvery int
		// whileStopped changes the file between the runs and returns the
		// lines the second run must deliver after the first run's remainder.
		whileStopped func(t *testing.T, path string) []string
	}{
		{"append", 1, func(t *testing.T, path string) []string {
			tailAppend(t, path, tailNumbered(201, 250))
			return tailNumberedTexts(201, 250)
		}},
		{"append batched commits", 16, func(t *testing.T, path string) []string {
			tailAppend(t, path, tailNumbered(201, 250))
			return tailNumberedTexts(201, 250)
		}},
		{"rotated", 1, func(t *testing.T, path string) []string {
			require.NoError(t, os.Rename(path, path+".1"))
			tailAppend(t, path+".1", tailNumbered(201, 210))
			tailAppend(t, path, tailNumbered(211, 250))
			return tailNumberedTexts(201, 250)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tailLeakCheck(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "events.ndjson")
			state := filepath.Join(dir, "events.offset")
			tailAppend(t, path, tailNumbered(1, 200))
			opts := Options{StatePath: state, FromStart: true, CommitEvery: tc.commitEvery}

			first := &tailCollector{stopAfter: 77}
			r1 := startTail(t, path, opts, first)
			require.NoError(t, tailWaitDone(t, r1))
			require.Len(t, first.texts(), 77, "the first run stops after its 77th line")

			more := tc.whileStopped(t, path)

			second := &tailCollector{}
			r2 := startTail(t, path, opts, second)
			want := append(tailNumberedTexts(1, 200), more...)
			tailWaitFor(t, "every line", func() bool { return len(first.texts())+len(second.texts()) >= len(want) })
			require.NoError(t, r2.stop(t))
			assert.Equal(t, want, append(first.texts(), second.texts()...), "each line exactly once, in order")
			assert.Equal(t, int64(78), second.snapshot()[0].Number)
		})
	}
}

// tailWaitDone waits for a run that cancels itself.
func tailWaitDone(t *testing.T, r *tailRunning) error {
	t.Helper()
	select {
	case err := <-r.done:
		close(r.done)
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
		return nil
	}
}

func TestTailRestartAfterTruncationWhileStopped(t *testing.T) {
	tailLeakCheck(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "events.ndjson")
	state := filepath.Join(dir, "events.offset")
	tailAppend(t, path, tailNumbered(1, 5))
	opts := Options{StatePath: state, FromStart: true, Once: true}
	c := &tailCollector{}
	r := startTail(t, path, opts, c)
	require.NoError(t, tailWaitDone(t, r))
	require.Len(t, c.texts(), 5)

	// Same inode, same size or more, different head: a replaced content.
	require.NoError(t, os.WriteFile(path, []byte(tailNumbered(11, 16)), 0o644))
	c2 := &tailCollector{}
	r2 := startTail(t, path, opts, c2)
	require.NoError(t, tailWaitDone(t, r2))
	assert.Equal(t, tailNumberedTexts(11, 16), c2.texts())
}

func TestTailOversizeLineSkipped(t *testing.T) {
	tailLeakCheck(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	long := strings.Repeat("z", 100)
	tailAppend(t, path, "ok1\n"+long+"\nok2\n"+strings.Repeat("y", 16)+"\n")
	c := &tailCollector{}
	r := startTail(t, path, Options{FromStart: true, MaxLineBytes: 16, Once: true}, c)
	require.NoError(t, tailWaitDone(t, r))
	assert.Equal(t, []tailGot{
		{Text: "ok1", Offset: 0, Number: 1},
		{Offset: 4, Number: 2, Oversize: 100},
		{Text: "ok2", Offset: 105, Number: 3},
		{Text: strings.Repeat("y", 16), Offset: 109, Number: 4},
	}, tailZeroFile(c.snapshot()))
	assert.Equal(t, int64(1), r.tailer.Stats().Oversize)
}

func TestTailOversizeLineArrivingInPieces(t *testing.T) {
	tailLeakCheck(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	tailAppend(t, path, "a\n"+strings.Repeat("z", 40))
	c := &tailCollector{}
	r := startTail(t, path, Options{FromStart: true, MaxLineBytes: 16}, c)
	tailWaitFor(t, "the long partial line", func() bool { return r.tailer.Stats().PartialBytes == 40 })
	tailAppend(t, path, strings.Repeat("z", 10)+"\nb\n")
	tailWaitFor(t, "3 lines", func() bool { return len(c.texts()) == 3 })
	require.NoError(t, r.stop(t))
	assert.Equal(t, []tailGot{
		{Text: "a", Offset: 0, Number: 1},
		{Offset: 2, Number: 2, Oversize: 50},
		{Text: "b", Offset: 53, Number: 3},
	}, tailZeroFile(c.snapshot()))
}

func tailZeroFile(ls []tailGot) []tailGot {
	for i := range ls {
		ls[i].File = FileID{}
	}
	return ls
}

func TestTailOnce(t *testing.T) {
	tailLeakCheck(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	tailAppend(t, path, "a\nb\nhalf")
	c := &tailCollector{}
	r := startTail(t, path, Options{FromStart: true, Once: true}, c)
	require.NoError(t, tailWaitDone(t, r))
	assert.Equal(t, []string{"a", "b"}, c.texts())
	assert.Equal(t, int64(4), r.tailer.Stats().PartialBytes)
}

func TestTailHandleErrorStopsUncommitted(t *testing.T) {
	tailLeakCheck(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "events.ndjson")
	state := filepath.Join(dir, "events.offset")
	tailAppend(t, path, tailNumbered(1, 5))
	boom := errors.New("boom")
	var seen []string
	tl, err := New(path, Options{StatePath: state, FromStart: true})
	require.NoError(t, err)
	err = tl.Run(context.Background(), func(_ context.Context, ln Line) error {
		if ln.Number == 3 {
			return boom
		}
		seen = append(seen, string(ln.Bytes))
		return nil
	})
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "line 3 (offset 16)")
	assert.Equal(t, tailNumberedTexts(1, 2), seen)

	c := &tailCollector{}
	r := startTail(t, path, Options{StatePath: state, Once: true}, c)
	require.NoError(t, tailWaitDone(t, r))
	assert.Equal(t, tailNumberedTexts(3, 5), c.texts(), "the failed line is delivered again")
}

func TestTailErrors(t *testing.T) {
	tailLeakCheck(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "events.ndjson")
	tailAppend(t, path, "a\n")
	state := filepath.Join(dir, "state")
	require.NoError(t, os.WriteFile(state, []byte(`{"path":"/elsewhere/x.ndjson","offset":2}`), 0o644))
	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte(`{"offset":`), 0o644))
	other := filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte(`{"path":"`+path+`","offset":2,"version":2}`), 0o644))
	noop := func(context.Context, Line) error { return nil }
	for _, tc := range []struct {
		name string
		path string
		opts Options
		want string
	}{
		{"missing file with once", filepath.Join(dir, "nope"), Options{Once: true}, "no such file"},
		{"offset file of another file", path, Options{StatePath: state}, "belongs to /elsewhere/x.ndjson"},
		{"corrupt offset file", path, Options{StatePath: bad}, "offset file " + bad},
		{"offset file of another format", path, Options{StatePath: other}, `unknown field "version"`},
		{"a directory", dir, Options{Once: true}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, err := New(tc.path, tc.opts)
			require.NoError(t, err)
			// Each case fails at start; one that would tail on is stopped.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = tl.Run(ctx, noop)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := New(path, Options{MaxLineBytes: -1})
	assert.Error(t, err)
}

// tailLogSeen is a slog handler that counts the records with a given
// message, so a test can wait until the tailer has taken a code path.
type tailLogSeen struct {
	msg string
	n   *atomic.Int64
}

func (h tailLogSeen) Enabled(context.Context, slog.Level) bool { return true }
func (h tailLogSeen) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h tailLogSeen) WithGroup(string) slog.Handler            { return h }
func (h tailLogSeen) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}

// TestTailWaitsForMissingFile: a tailer started on a path with no file yet
// waits (it does not fail) and reads the file from its start once it
// appears. The file is created only after the tailer has found it missing
// twice, so the waiting path has run, and looped, before the file exists.
func TestTailWaitsForMissingFile(t *testing.T) {
	tailLeakCheck(t)
	path := filepath.Join(t.TempDir(), "later.ndjson")
	waits := &atomic.Int64{}
	tl, err := New(path, Options{FromStart: true, PollInterval: 2 * time.Millisecond,
		Logger: slog.New(tailLogSeen{msg: "waiting for the file to appear", n: waits})})
	require.NoError(t, err)
	c := &tailCollector{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, c.handle) }()
	tailWaitFor(t, "the tailer to wait for the missing file", func() bool { return waits.Load() >= 2 })
	require.Empty(t, c.texts())
	tailAppend(t, path, "hello\nworld\n")
	tailWaitFor(t, "the lines of the late file", func() bool { return len(c.texts()) == 2 })
	assert.Equal(t, []string{"hello", "world"}, c.texts())
	cancel()
	require.NoError(t, <-done)
}

// BenchmarkTail reads a 100,000-line file of 100-byte NDJSON lines from the
// start to its end per iteration and reports lines/s. "commit=N" saves the
// offset file every N lines (each save is two fsyncs).
func BenchmarkTail(b *testing.B) {
	const lines = 100_000
	path := filepath.Join(b.TempDir(), "events.ndjson")
	var sb strings.Builder
	for i := range lines {
		fmt.Fprintf(&sb, "{\"n\":%08d,\"pad\":%q}\n", i, strings.Repeat("p", 77))
	}
	require.NoError(b, os.WriteFile(path, []byte(sb.String()), 0o644))
	for _, bc := range []struct {
		name        string
		state       bool
		commitEvery int
		lines       int // lines read per iteration (a prefix of the file)
	}{
		{"no-offset-file", false, 1, lines},
		{"commit=1000", true, 1000, lines},
		{"commit=1", true, 1, 500},
	} {
		b.Run(bc.name, func(b *testing.B) {
			src := path
			if bc.lines < lines {
				src = filepath.Join(b.TempDir(), "prefix.ndjson")
				require.NoError(b, os.WriteFile(src, []byte(sb.String()[:bc.lines*101]), 0o644))
			}
			b.ReportAllocs()
			b.SetBytes(int64(bc.lines) * 101)
			state := filepath.Join(b.TempDir(), "offset")
			var n int
			for b.Loop() {
				opts := Options{FromStart: true, Once: true, CommitEvery: bc.commitEvery}
				if bc.state {
					opts.StatePath = state
					require.NoError(b, os.RemoveAll(state))
				}
				tl, err := New(src, opts)
				require.NoError(b, err)
				err = tl.Run(context.Background(), func(_ context.Context, ln Line) error {
					n += len(ln.Bytes) & 1
					return nil
				})
				require.NoError(b, err)
			}
			b.ReportMetric(float64(bc.lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
