package envelope

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// SyncMode says when the writer calls fsync.
type SyncMode int

const (
	// SyncOnClose fsyncs only when the writer is closed. A crash may lose
	// the most recent events, never corrupt earlier ones.
	SyncOnClose SyncMode = iota
	// SyncEvery fsyncs after every event: an appended event survives a crash.
	SyncEvery
	// SyncEveryN fsyncs after every WriterOptions.SyncEveryN events.
	SyncEveryN
)

// resumeWindow is how much of the file's tail the writer reads on open to
// find the last event (1 MiB).
const resumeWindow = 1 << 20

// WriterOptions configures a Writer.
type WriterOptions struct {
	Sync       SyncMode
	SyncEveryN int          // events between fsyncs with SyncEveryN; must be >= 1 then
	Logger     *slog.Logger // nil discards
	// WrapFile, when set, wraps the opened and locked file: every read,
	// write, truncate, fsync and close of the writer goes through the
	// wrapper. Tests use it to inject write and fsync failures; nil uses the
	// file as is.
	WrapFile func(File) File
}

// File is the file a Writer appends to. *os.File implements it.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (os.FileInfo, error)
	Close() error
}

// ErrLocked is returned by OpenWriter when another writer (in this or
// another process) holds the file.
var ErrLocked = errors.New("envelope: events file is locked by another writer")

// WriteError is a failed write or fsync of the events file. Events is how
// many events the failure left out of the file: 1 for a failed write (the
// event being appended); for a failed fsync, every event this writer wrote
// since its last successful fsync, since they were truncated away with it.
type WriteError struct {
	Op     string // "write" or "fsync"
	Events int
	Err    error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%s events file: %v (%d events not written)", e.Op, e.Err, e.Events)
}

func (e *WriteError) Unwrap() error { return e.Err }

// Writer appends events to one NDJSON file as one prev_hash chain.
//
// Only one Writer may hold a file: OpenWriter takes an exclusive advisory
// lock (flock) and refuses a second one with ErrLocked. A Writer is safe for
// concurrent use; appends are serialized, so goroutines sharing it produce
// one valid chain.
//
// Each line is the event's JCS canonical form; a chained event carries its
// prev_hash as the last member.
//
// Failures (the file is the truth):
//   - The chain head advances only after the whole line was written; a
//     failed or short write is truncated away and the event is not written.
//   - A failed fsync (per event with SyncEvery, every N events with
//     SyncEveryN, or in Sync and Close) truncates the file back to its size
//     after the last successful fsync: the lines it could not make durable
//     are removed, never left for a crash (or a dropped page cache) to turn
//     into a hole the chain then contradicts. Those events count as not
//     written, even ones whose Append had returned true.
//   - After any failure the writer re-reads the end of the file, as
//     OpenWriter does, before the next append, and continues the chain from
//     the last line actually there. So the next appended event verifies
//     whether or not the truncation succeeded: if it failed, the line stays
//     in the file (an event reported not written is then present) and the
//     chain continues from it. If the file cannot be re-read, appends fail
//     until it can.
//
// Written and Failed count this writer's events in and out of the file.
type Writer struct {
	mu       sync.Mutex
	f        File
	path     string
	opts     WriterOptions
	logger   *slog.Logger
	prev     string // hash of the last event; "" starts a new head
	size     int64  // bytes of complete lines in the file
	synced   int64  // size after the last successful fsync (or on open)
	unsynced int64  // events written since the last successful fsync
	stale    bool   // a write or fsync failed: re-read the file before appending
	written  int64
	failed   int64
	skipped  int64
	buf      bytes.Buffer
	closed   bool
}

// OpenWriter opens (creating if needed) the events file at path and resumes
// its chain: it reads at most the last 1 MiB (resumeWindow), drops a partial
// first line when the window starts mid-file, and continues from the last
// non-blank line. An empty file, or a malformed last line, starts a new head.
//
// A torn last line (no trailing newline, left by a crash mid-write) is
// truncated away when it is not a JSON object: it was never acknowledged,
// so it must not become part of the chain. An unterminated last line that is
// a complete JSON object is kept, a newline is appended, and the chain
// continues from it.
func OpenWriter(path string, opts WriterOptions) (*Writer, error) {
	if opts.Sync == SyncEveryN && opts.SyncEveryN < 1 {
		return nil, fmt.Errorf("open events file %s: SyncEveryN must be >= 1 with SyncEveryN mode", path)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	osf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open events file: %w", err)
	}
	if err := lockFile(osf); err != nil {
		osf.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("open events file %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock events file %s: %w", path, err)
	}
	var f File = osf
	if opts.WrapFile != nil {
		f = opts.WrapFile(f)
	}
	w := &Writer{f: f, path: path, opts: opts, logger: logger.With("component", "chain", "path", path)}
	if err := w.resume(); err != nil {
		f.Close()
		return nil, fmt.Errorf("resume events file %s: %w", path, err)
	}
	return w, nil
}

// resume sets the chain head and size from the end of the file (see
// OpenWriter). The lines found count as synced: the writer never truncates
// below them.
func (w *Writer) resume() error {
	w.prev, w.size, w.synced, w.unsynced = "", 0, 0, 0
	st, err := w.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	start := size - resumeWindow
	if start < 0 {
		start = 0
	}
	window := make([]byte, size-start)
	if _, err := w.f.ReadAt(window, start); err != nil && err != io.EOF {
		return err
	}
	if start > 0 {
		// The window starts mid-file: its first line may be partial.
		i := bytes.IndexByte(window, '\n')
		if i < 0 {
			window = nil
		} else {
			window = window[i+1:]
			start += int64(i + 1)
		}
	}
	if n := len(window); n > 0 && window[n-1] != '\n' {
		i := bytes.LastIndexByte(window, '\n')
		tail := window[i+1:]
		tailOff := start + int64(i+1)
		if _, _, err := LineHash(tail); err != nil {
			w.logger.Warn("truncating torn last line", "offset", tailOff, "bytes", len(tail))
			if err := w.f.Truncate(tailOff); err != nil {
				return fmt.Errorf("truncate torn tail: %w", err)
			}
			if err := w.f.Sync(); err != nil {
				return err
			}
			size = tailOff
			window = window[:i+1]
		} else {
			if _, err := w.f.WriteAt([]byte{'\n'}, size); err != nil {
				return fmt.Errorf("terminate last line: %w", err)
			}
			size++
			window = append(window, '\n')
		}
	}
	w.size, w.synced = size, size
	// The last non-blank line decides where the chain continues.
	lines := bytes.Split(bytes.TrimRight(window, "\n"), []byte{'\n'})
	for i := len(lines) - 1; i >= 0; i-- {
		if len(bytes.TrimSpace(lines[i])) == 0 {
			continue
		}
		hash, _, err := LineHash(lines[i])
		if err != nil {
			w.logger.Warn("malformed last line, starting a new chain head", "err", err)
			return nil
		}
		w.prev = hash
		return nil
	}
	return nil
}

// Append validates ev, sets its prev_hash to the chain head and writes it as
// one line. An event without agent_id is skipped and counted, never given a
// fabricated one: Append then returns false and a nil error. Append blocks
// for the write (and the fsync, with SyncEvery, or every Nth event with
// SyncEveryN).
//
// Append returns false and an error when the event was not written: an
// invalid event, or a failed write or fsync (a *WriteError, whose Events
// also counts earlier events a failed fsync removed). The next Append first
// re-reads the end of the file (see Writer).
func (w *Writer) Append(ev Event) (bool, error) {
	if ev.AgentID == "" {
		w.mu.Lock()
		w.skipped++
		w.mu.Unlock()
		return false, nil
	}
	ev.PrevHash = ""
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := ev.Validate(); err != nil {
		w.failed++
		return false, fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	if w.closed {
		w.failed++
		return false, errors.New("append event: writer is closed")
	}
	if err := w.reloadIfStale(); err != nil {
		w.failed++
		return false, fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	w.buf.Reset()
	hash, err := sealInto(&w.buf, &ev, w.prev)
	if err != nil {
		w.failed++
		return false, fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	w.buf.WriteByte('\n')
	n, err := w.f.WriteAt(w.buf.Bytes(), w.size)
	if err != nil || n != w.buf.Len() {
		if err == nil {
			err = io.ErrShortWrite
		}
		w.failed++
		// Undo a partial write so the file still ends on a complete line.
		w.rollback(w.size)
		return false, fmt.Errorf("append %s event: %w", ev.Type, &WriteError{Op: "write", Events: 1, Err: err})
	}
	w.size += int64(n)
	w.prev = hash
	w.written++
	w.unsynced++
	if w.opts.Sync == SyncEvery || (w.opts.Sync == SyncEveryN && w.unsynced >= int64(w.opts.SyncEveryN)) {
		if err := w.syncLocked(); err != nil {
			return false, fmt.Errorf("append %s event: %w", ev.Type, err)
		}
	}
	return true, nil
}

// reloadIfStale re-reads the end of the file after a failed write or
// fsync, so the chain continues from the line that is actually last. Lines
// this writer wrote since its last successful fsync stay unsynced: a later
// failed fsync still removes them.
func (w *Writer) reloadIfStale() error {
	if !w.stale {
		return nil
	}
	synced, unsynced := w.synced, w.unsynced
	if err := w.resume(); err != nil {
		return fmt.Errorf("re-read events file after a failed write: %w", err)
	}
	w.synced, w.unsynced = min(synced, w.size), unsynced
	w.stale = false
	w.logger.Info("events file re-read after a failed write", "size", w.size, "head", w.prev)
	return nil
}

// syncLocked fsyncs; on failure it removes every line written since the
// last successful fsync and counts their events as failed.
func (w *Writer) syncLocked() error {
	if err := w.f.Sync(); err != nil {
		lost := w.unsynced
		w.written -= lost
		w.failed += lost
		w.unsynced = 0
		w.rollback(w.synced)
		return &WriteError{Op: "fsync", Events: int(lost), Err: err}
	}
	w.synced = w.size
	w.unsynced = 0
	return nil
}

// rollback truncates the file to size after a failed write or fsync and
// marks the writer stale: the next append re-reads the file, so a failed
// truncation leaves a line the chain continues from, not one it
// contradicts.
func (w *Writer) rollback(size int64) {
	w.stale = true
	if err := w.f.Truncate(size); err != nil {
		w.logger.Error("truncate after a failed write or fsync: the lines stay and the chain continues from them",
			"offset", size, "err", err)
		return
	}
	w.size = size
}

// Written returns how many events this writer appended and still holds
// in the file: an event removed by a failed fsync no longer counts.
func (w *Writer) Written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Failed returns how many events given to Append are not in the file: the
// appends that returned an error, plus events a failed fsync removed after
// their Append had returned true. (If truncating after a failure failed
// too, an event counted here may still be in the file.)
func (w *Writer) Failed() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// Path returns the file path.
func (w *Writer) Path() string { return w.path }

// Sync flushes written events to stable storage. If the fsync fails, the
// events written since the last successful one are removed from the file
// and the error is a *WriteError counting them.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if err := w.syncLocked(); err != nil {
		return fmt.Errorf("sync events file %s: %w", w.path, err)
	}
	return nil
}

// Close fsyncs, releases the lock and closes the file. It is idempotent. A
// failed fsync removes the events written since the last successful one, as
// Sync does, and returns a *WriteError counting them.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	serr := w.syncLocked()
	cerr := w.f.Close() // closing releases the flock
	if serr != nil {
		return fmt.Errorf("close events file %s: %w", w.path, serr)
	}
	if cerr != nil {
		return fmt.Errorf("close events file %s: %w", w.path, cerr)
	}
	return nil
}

// Seal validates ev, sets its prev_hash to prev ("" starts a new head) and
// returns the line to write (canonical JSON, no trailing newline) and the
// event's chain hash, which the next event carries as prev_hash. It is the
// chain step shared by every sink (file, NATS subject).
func Seal(ev Event, prev string) (line []byte, hash string, err error) {
	ev.PrevHash = ""
	if err := ev.Validate(); err != nil {
		return nil, "", fmt.Errorf("seal %s event: %w", ev.Type, err)
	}
	var buf bytes.Buffer
	hash, err = sealInto(&buf, &ev, prev)
	if err != nil {
		return nil, "", fmt.Errorf("seal %s event: %w", ev.Type, err)
	}
	return buf.Bytes(), hash, nil
}

// sealInto writes ev's canonical form to buf, hashes it, then splices prev
// in as the last member: the hash excludes prev_hash, so its position does
// not matter to the chain.
func sealInto(buf *bytes.Buffer, ev *Event, prev string) (string, error) {
	if err := appendEvent(buf, ev, false); err != nil {
		return "", err
	}
	hash := hashBytes(buf.Bytes())
	if prev != "" {
		buf.Truncate(buf.Len() - 1)
		buf.WriteString(`,"prev_hash":"`)
		buf.WriteString(prev)
		buf.WriteString(`"}`)
	}
	return hash, nil
}
