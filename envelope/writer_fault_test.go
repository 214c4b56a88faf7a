package envelope

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// faultFile wraps the writer's file and fails the calls a test asks for.
// Each hook gets the 1-based number of the call and returns the error to
// inject (nil lets the call through).
type faultFile struct {
	File
	mu            sync.Mutex
	writes, syncs int
	truncates     int
	failWrite     func(n int) error
	shortWrite    bool // a failed write first writes half the line
	failSync      func(n int) error
	failTruncate  func(n int) error
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.writes++
	var err error
	if f.failWrite != nil {
		err = f.failWrite(f.writes)
	}
	short := f.shortWrite
	f.mu.Unlock()
	if err != nil {
		if short {
			n, _ := f.File.WriteAt(p[:len(p)/2], off)
			return n, err
		}
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	f.mu.Lock()
	f.syncs++
	var err error
	if f.failSync != nil {
		err = f.failSync(f.syncs)
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	f.mu.Lock()
	f.truncates++
	var err error
	if f.failTruncate != nil {
		err = f.failTruncate(f.truncates)
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// failFrom fails call n and every later one with err.
func failFrom(from int, err error) func(int) error {
	return func(n int) error {
		if n >= from {
			return err
		}
		return nil
	}
}

// failOnly fails exactly call n with err.
func failOnly(at int, err error) func(int) error {
	return func(n int) error {
		if n == at {
			return err
		}
		return nil
	}
}

func openFaulty(t *testing.T, path string, opts WriterOptions, ff *faultFile) *Writer {
	t.Helper()
	opts.WrapFile = func(f File) File { ff.File = f; return ff }
	w, err := OpenWriter(path, opts)
	require.NoError(t, err)
	return w
}

func lineCount(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Count(string(raw), "\n")
}

// appendAll appends events from..to-1 and returns how many Append calls
// returned an error.
func appendAll(t *testing.T, w *Writer, from, to int) int {
	t.Helper()
	errs := 0
	for i := from; i < to; i++ {
		ok, err := w.Append(testEvent(i))
		if err != nil {
			require.False(t, ok)
			var we *WriteError
			require.ErrorAs(t, err, &we, "event %d", i)
			errs++
			continue
		}
		require.True(t, ok)
	}
	return errs
}

// A write that fails mid-run (half the line reached the file) is truncated
// away; the events after it chain to the last line really written.
func TestFailedWriteMidRunKeepsTheChain(t *testing.T) {
	for _, short := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "events.ndjson")
		writeChain(t, path, 3)
		ff := &faultFile{failWrite: failOnly(4, syscall.ENOSPC), shortWrite: short}
		w := openFaulty(t, path, WriterOptions{}, ff)
		require.Equal(t, 1, appendAll(t, w, 3, 10))
		require.NoError(t, w.Close())
		require.EqualValues(t, 6, w.Written())
		require.EqualValues(t, 1, w.Failed())
		rep := verifyOK(t, path)
		require.Equal(t, 9, rep.Events, "short=%v", short)
		require.Equal(t, 8, rep.Chained)
	}
}

// A disk that fills up: every append from then on fails and is counted;
// the file holds exactly the events written before and verifies.
func TestDiskFullCountsEveryUnwrittenEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	ff := &faultFile{failWrite: failFrom(5, syscall.ENOSPC), shortWrite: true}
	w := openFaulty(t, path, WriterOptions{Sync: SyncEvery}, ff)
	require.Equal(t, 6, appendAll(t, w, 0, 10))
	require.NoError(t, w.Close())
	require.EqualValues(t, 4, w.Written())
	require.EqualValues(t, 6, w.Failed())
	require.Equal(t, 4, verifyOK(t, path).Events)

	// A later writer on a disk with room continues the same chain.
	writeMore(t, path, 10, 12)
	rep := verifyOK(t, path)
	require.Equal(t, 6, rep.Events)
	require.Equal(t, 1, rep.Heads)
}

func writeMore(t *testing.T, path string, from, to int) {
	t.Helper()
	w, err := OpenWriter(path, WriterOptions{})
	require.NoError(t, err)
	require.Zero(t, appendAll(t, w, from, to))
	require.NoError(t, w.Close())
}

// A failed fsync after a written line (SyncEvery): the line is removed and
// the head does not advance, so the next event verifies. If the truncation
// fails too, the line stays and the writer re-reads the file: the next
// event chains to the line that is there, not to the stale head.
func TestFailedFsyncAfterWrittenLine(t *testing.T) {
	for _, truncFails := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "events.ndjson")
		ff := &faultFile{failSync: failOnly(3, syscall.EIO)}
		if truncFails {
			ff.failTruncate = failOnly(1, syscall.EIO)
		}
		w := openFaulty(t, path, WriterOptions{Sync: SyncEvery}, ff)
		require.Equal(t, 1, appendAll(t, w, 0, 6))
		require.NoError(t, w.Close())
		rep := verifyOK(t, path)
		want := 5
		if truncFails {
			want = 6 // the line stayed; the chain continued from it
		}
		require.Equal(t, want, rep.Events, "truncate fails=%v", truncFails)
		require.Equal(t, want, lineCount(t, path))
		require.Equal(t, 1, rep.Heads)
		require.EqualValues(t, 5, w.Written())
		require.EqualValues(t, 1, w.Failed())
	}
}

// SyncEveryN: a failed fsync removes the whole unsynced batch, including
// events whose Append had returned true, and says how many.
func TestFailedFsyncRemovesTheUnsyncedBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	ff := &faultFile{failSync: failOnly(2, syscall.EIO)}
	w := openFaulty(t, path, WriterOptions{Sync: SyncEveryN, SyncEveryN: 3}, ff)
	for i := range 5 {
		ok, err := w.Append(testEvent(i))
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, err := w.Append(testEvent(5)) // the 2nd fsync: events 3..5 go
	var we *WriteError
	require.ErrorAs(t, err, &we)
	require.Equal(t, "fsync", we.Op)
	require.Equal(t, 3, we.Events)
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, 3, lineCount(t, path))
	require.Zero(t, appendAll(t, w, 6, 8))
	require.NoError(t, w.Close())
	require.EqualValues(t, 5, w.Written())
	require.EqualValues(t, 3, w.Failed())
	require.Equal(t, 5, verifyOK(t, path).Events)
}

// A failed fsync on Close removes what this writer wrote since its last
// successful fsync; the chain before it is untouched.
func TestFailedFsyncOnClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	writeChain(t, path, 2)
	ff := &faultFile{failSync: failFrom(1, syscall.EIO)}
	w := openFaulty(t, path, WriterOptions{}, ff)
	require.Zero(t, appendAll(t, w, 2, 6))
	err := w.Close()
	var we *WriteError
	require.ErrorAs(t, err, &we)
	require.Equal(t, 4, we.Events)
	require.EqualValues(t, 0, w.Written())
	require.EqualValues(t, 4, w.Failed())
	require.Equal(t, 2, verifyOK(t, path).Events)
}

// A file that cannot be re-read after a failure refuses appends (counted)
// until it can.
func TestStaleWriterRetriesTheReread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	ff := &faultFile{failWrite: failOnly(2, syscall.EIO), shortWrite: true, failTruncate: failOnly(1, syscall.EIO)}
	w := openFaulty(t, path, WriterOptions{}, ff)
	// Event 1 ok; event 2 leaves half a line it cannot truncate; the
	// re-read before event 3 truncates the torn tail (2nd truncate) and
	// the chain continues from event 1.
	require.Equal(t, 1, appendAll(t, w, 0, 4))
	require.NoError(t, w.Close())
	rep := verifyOK(t, path)
	require.Equal(t, 3, rep.Events)
	require.EqualValues(t, 3, w.Written())

	path2 := filepath.Join(t.TempDir(), "events.ndjson")
	ff2 := &faultFile{failWrite: failOnly(2, syscall.EIO), shortWrite: true, failTruncate: failFrom(1, syscall.EIO)}
	w2 := openFaulty(t, path2, WriterOptions{}, ff2)
	require.Equal(t, 1, appendAll(t, w2, 0, 2))
	_, err := w2.Append(testEvent(2))
	require.Error(t, err)
	require.False(t, errors.As(err, new(*WriteError)), "the re-read failed, not a write: %v", err)
	require.Contains(t, err.Error(), "re-read events file")
	ff2.mu.Lock()
	ff2.failTruncate = nil
	ff2.mu.Unlock()
	require.Zero(t, appendAll(t, w2, 3, 5))
	require.NoError(t, w2.Close())
	require.EqualValues(t, 2, w2.Failed())
	require.Equal(t, 3, verifyOK(t, path2).Events)
}
