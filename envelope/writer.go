package envelope

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
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

// ResumeWindow is how much of the file's tail the writer reads on open to
// find the last event (1 MiB).
const ResumeWindow = 1 << 20

// WriterOptions configures a Writer.
type WriterOptions struct {
	Sync       SyncMode
	SyncEveryN int          // events between fsyncs with SyncEveryN; must be >= 1 then
	Logger     *slog.Logger // nil discards
}

// ErrLocked is returned by OpenWriter when another writer (in this or
// another process) holds the file.
var ErrLocked = errors.New("envelope: events file is locked by another writer")

// Writer appends events to one NDJSON file as one prev_hash chain.
//
// Only one Writer may hold a file: OpenWriter takes an exclusive advisory
// lock (flock) and refuses a second one with ErrLocked. A Writer is safe for
// concurrent use; appends are serialized, so goroutines sharing it produce
// one valid chain.
//
// Each line is the event's JCS canonical form; a chained event carries its
// prev_hash as the last member. The chain advances only after the whole
// line was written; a failed write is truncated away.
type Writer struct {
	mu      sync.Mutex
	f       *os.File
	path    string
	opts    WriterOptions
	logger  *slog.Logger
	prev    string // hash of the last event; "" starts a new head
	size    int64  // bytes of complete lines in the file
	written int64
	skipped int64
	unsync  int
	buf     bytes.Buffer
	closed  bool
}

// OpenWriter opens (creating if needed) the events file at path and resumes
// its chain: it reads at most the last ResumeWindow bytes, drops a partial
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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open events file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("open events file %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock events file %s: %w", path, err)
	}
	w := &Writer{f: f, path: path, opts: opts, logger: logger.With("component", "chain", "path", path)}
	if err := w.resume(); err != nil {
		f.Close()
		return nil, fmt.Errorf("resume events file %s: %w", path, err)
	}
	return w, nil
}

func (w *Writer) resume() error {
	st, err := w.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	start := size - ResumeWindow
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
	w.size = size
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
// for the write (and the fsync, with SyncEvery).
func (w *Writer) Append(ev Event) (bool, error) {
	if ev.AgentID == "" {
		w.mu.Lock()
		w.skipped++
		w.mu.Unlock()
		return false, nil
	}
	ev.PrevHash = ""
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false, errors.New("append event: writer is closed")
	}
	w.buf.Reset()
	hash, err := sealInto(&w.buf, &ev, w.prev)
	if err != nil {
		return false, fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	w.buf.WriteByte('\n')
	n, err := w.f.WriteAt(w.buf.Bytes(), w.size)
	if err != nil || n != w.buf.Len() {
		// Undo a partial write so the file still ends on a complete line.
		if terr := w.f.Truncate(w.size); terr != nil {
			w.logger.Error("truncate after failed write", "err", terr)
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		return false, fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	w.size += int64(n)
	if err := w.maybeSync(); err != nil {
		return false, fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	w.prev = hash
	w.written++
	return true, nil
}

func (w *Writer) maybeSync() error {
	switch w.opts.Sync {
	case SyncEvery:
		return w.f.Sync()
	case SyncEveryN:
		w.unsync++
		if w.unsync >= w.opts.SyncEveryN {
			w.unsync = 0
			return w.f.Sync()
		}
	}
	return nil
}

// Head returns the hash the next event will carry as prev_hash ("" when
// the next event starts a new chain).
func (w *Writer) Head() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.prev
}

// Written returns how many events this writer appended.
func (w *Writer) Written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Skipped returns how many events were skipped for lacking an agent_id.
func (w *Writer) Skipped() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.skipped
}

// Path returns the file path.
func (w *Writer) Path() string { return w.path }

// Sync flushes written events to stable storage.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	return w.f.Sync()
}

// Close fsyncs, releases the lock and closes the file. It is idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	serr := w.f.Sync()
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
