// Package tail follows an NDJSON file across truncation and rotation
// (Tailer, at-least-once delivery with a committed position) and classifies
// each line it delivers (LineChecker, with the LineKind family).
package tail

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/verdryx/verdryx/internal/strictjson"
)

// Tailer defaults.
const (
	DefaultPollInterval = 200 * time.Millisecond
	DefaultMaxLineBytes = 1 << 20
	DefaultCommitEvery  = 1

	// tailHeadMax bounds the prefix of a file hashed into its identity.
	tailHeadMax = 1024
	// tailReadChunk is the initial read buffer; it grows up to MaxLineBytes+1.
	tailReadChunk = 64 << 10
)

// Options tune a Tailer. The zero value of a field means its default.
type Options struct {
	// StatePath is the offset file. When set, the position (offset, line
	// number and file identity) is loaded on start and saved atomically
	// (temp file, fsync, rename, fsync of the directory). Empty: nothing is
	// persisted and every Run starts afresh.
	StatePath string
	// FromStart makes a Run with no usable saved position start at byte 0
	// of the file instead of at the end of its last complete line. A saved
	// position always wins; delete the offset file to re-read a file.
	FromStart bool
	// Once makes Run return nil as soon as the file at the path is read to
	// its end, instead of polling for more. A partial last line (no newline
	// yet) is not delivered nor committed; Stats().PartialBytes reports it.
	Once bool
	// PollInterval is how often the file is checked for new data,
	// truncation and rotation once it has been read to its end.
	// Default 200ms.
	PollInterval time.Duration
	// MaxLineBytes is the longest line delivered, newline excluded. A longer
	// line is skipped and delivered as a Line with Oversize set.
	// Default 1 MiB.
	MaxLineBytes int
	// CommitEvery is how many handled lines may go unsaved: 1 (default)
	// saves after every line, so a crash re-delivers at most the line being
	// handled; N saves every N lines (and whenever the tailer is idle or
	// stops), so a crash may re-deliver up to N lines. Each save costs two
	// fsyncs; batching is faster but handle must then be idempotent.
	CommitEvery int
	// Logger receives the tailer's logs; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.PollInterval < 0 || o.MaxLineBytes < 0 || o.CommitEvery < 0 {
		return o, fmt.Errorf("tail options: negative poll interval, max line bytes or commit interval")
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.CommitEvery == 0 {
		o.CommitEvery = DefaultCommitEvery
	}
	return o, nil
}

// FileID identifies a file independently of its name.
type FileID struct {
	Dev uint64
	Ino uint64
}

func (id FileID) String() string { return fmt.Sprintf("%d:%d", id.Dev, id.Ino) }

// Line is one complete line of the tailed file.
type Line struct {
	// Bytes is the line without its trailing newline (a '\r' before it is
	// kept). It aliases the tailer's buffer: it is valid only until handle
	// returns. Nil when Oversize is set.
	Bytes []byte
	// Path is the name the file was opened by (a rotated file keeps the
	// tailed path, the name it had when it was opened).
	Path string
	// Offset is the byte offset of the line's first byte in the file.
	Offset int64
	// Number is the 1-based line number in the file.
	Number int64
	// File is the identity of the file the line was read from; it changes
	// on rotation.
	File FileID
	// Oversize is non-zero when the line was longer than MaxLineBytes: it is
	// the line's length in bytes (newline excluded). Such a line is skipped:
	// it is delivered only so that it can be reported.
	Oversize int64
}

// Stats are counters of a Tailer, safe to read while it runs.
type Stats struct {
	Lines        int64 // lines handled (oversize ones included)
	Oversize     int64 // lines skipped for exceeding MaxLineBytes
	Truncations  int64 // times the file shrank below the read position
	Rotations    int64 // switches to a new file at the path
	Commits      int64 // saves of the offset file
	PartialBytes int64 // bytes of a pending partial last line at the last EOF
}

// Tailer follows an NDJSON file like tail -F. Create it with New and
// call Run once.
type Tailer struct {
	path   string
	opts   Options
	logger *slog.Logger

	lines, oversize, truncations, rotations, commits, partial atomic.Int64
}

// New returns a tailer for the file at path.
func New(path string, opts Options) (*Tailer, error) {
	if path == "" {
		return nil, errors.New("tail: empty file path")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Tailer{path: path, opts: opts, logger: logger.With("component", "tail", "path", path)}, nil
}

// Stats returns the tailer's counters.
func (t *Tailer) Stats() Stats {
	return Stats{
		Lines: t.lines.Load(), Oversize: t.oversize.Load(), Truncations: t.truncations.Load(),
		Rotations: t.rotations.Load(), Commits: t.commits.Load(), PartialBytes: t.partial.Load(),
	}
}

// tailState is the offset file's content.
type tailState struct {
	Path       string `json:"path"`
	Dev        uint64 `json:"dev"`
	Ino        uint64 `json:"ino"`
	HeadLen    int    `json:"head_len"`
	HeadSHA256 string `json:"head_sha256"`
	Offset     int64  `json:"offset"`
	Line       int64  `json:"line"`
}

// tailFile is an open file being read.
type tailFile struct {
	f       *os.File
	id      FileID
	headLen int    // bytes of the head hashed so far (<= tailHeadMax)
	headSum string // hex SHA-256 of the first headLen bytes
	pos     int64  // offset of the next undelivered byte (start of the next line)
	line    int64  // lines delivered before pos
}

// Run follows the file, calling handle for each complete line in order, and
// blocks until ctx is cancelled (then it returns nil), handle returns an
// error (returned wrapped, with the line not committed), or, with
// Options.Once, the file is drained. A missing file is waited for (with Once
// it is an error).
//
// Delivery is at least once: a line's position is committed only after
// handle returns nil for it, so a crash between handle's effect and the
// commit re-delivers the line on restart. handle must be idempotent, or
// CommitEvery must be 1 so that at most the line in flight is repeated.
//
// Truncation (the file shrinks below the read position, or its first bytes
// change) restarts at byte 0. Rotation (another file appears at the path)
// finishes the old file to its end, then switches to the new one from byte
// 0. If the tailer was stopped across a rotation, the old file is looked for
// by identity in the same directory and finished first.
//
// Run must not be called concurrently or twice.
func (t *Tailer) Run(ctx context.Context, handle func(context.Context, Line) error) error {
	cur, pending, err := t.start(ctx)
	if err != nil || cur == nil {
		return err
	}
	defer func() {
		cur.f.Close()
		if pending != nil {
			pending.f.Close()
		}
	}()
	r := tailRun{t: t, handle: handle, buf: make([]byte, 0, min(tailReadChunk, t.opts.MaxLineBytes+1))}
	// pending is a rotated-away file found on start: finish it first.
	if pending != nil {
		if err := r.drain(ctx, pending); err != nil {
			return r.stop(ctx, pending, err)
		}
		if n := len(r.buf) + int(r.skipped); n > 0 {
			t.logger.Warn("rotated file ends with a partial line: dropped", "file", pending.id, "offset", pending.pos, "bytes", n)
		}
		r.reset()
		pending.f.Close()
		pending = nil
		t.rotations.Add(1)
		if err := r.commit(cur); err != nil {
			return err
		}
	}
	for {
		// Truncation is checked before reading, so that content rewritten
		// over the old is not read from the old offset.
		truncated, err := t.truncated(cur)
		if err != nil {
			return r.stop(ctx, cur, err)
		}
		if truncated {
			t.truncations.Add(1)
			t.logger.Warn("file truncated: restarting at byte 0", "offset", cur.pos)
			cur.pos, cur.line, cur.headLen, cur.headSum = 0, 0, 0, ""
			r.reset()
			if err := r.commit(cur); err != nil {
				return err
			}
		}
		if err := r.drain(ctx, cur); err != nil {
			return r.stop(ctx, cur, err)
		}
		next, err := t.rotated(cur)
		if err != nil {
			return r.stop(ctx, cur, err)
		}
		if next != nil {
			// Finish whatever was appended to the old file between the
			// drain above and the rotation check, then switch.
			if err := r.drain(ctx, cur); err != nil {
				next.f.Close()
				return r.stop(ctx, cur, err)
			}
			if n := len(r.buf) + int(r.skipped); n > 0 {
				t.logger.Warn("rotated file ends with a partial line: dropped", "file", cur.id, "offset", cur.pos, "bytes", n)
			}
			cur.f.Close()
			cur = next
			r.reset()
			t.rotations.Add(1)
			t.logger.Info("file rotated: following the new file", "file", cur.id)
			if err := r.commit(cur); err != nil {
				return err
			}
			continue
		}
		if r.dirty {
			if err := r.commit(cur); err != nil {
				return err
			}
		}
		if t.opts.Once {
			return nil
		}
		timer := time.NewTimer(t.opts.PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// tailRun is the state of one Run.
type tailRun struct {
	t      *Tailer
	handle func(context.Context, Line) error
	// buf holds the bytes read after the current file's pos that do not yet
	// form a complete line.
	buf []byte
	// skipped counts the bytes of an oversize line discarded so far (the
	// line starts at pos); zero when not skipping.
	skipped   int64
	uncommits int
	dirty     bool
}

func (r *tailRun) reset() {
	r.buf = r.buf[:0]
	r.skipped = 0
}

// stop ends Run after err: a cancelled context is a clean stop, with the
// handled lines committed.
func (r *tailRun) stop(ctx context.Context, cur *tailFile, err error) error {
	if ctx.Err() != nil {
		if r.dirty {
			if cerr := r.commit(cur); cerr != nil {
				return cerr
			}
		}
		return nil
	}
	if r.dirty {
		// Keep what was handled before the failing line.
		if cerr := r.commit(cur); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return err
}

// drain reads tf from pos+len(buf) to its end, delivering complete lines.
func (r *tailRun) drain(ctx context.Context, tf *tailFile) error {
	maxLine := r.t.opts.MaxLineBytes
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(r.buf) == cap(r.buf) {
			if cap(r.buf) <= maxLine {
				nb := make([]byte, len(r.buf), min(2*cap(r.buf), maxLine+1))
				copy(nb, r.buf)
				r.buf = nb
			} else {
				// A full buffer of maxLine+1 bytes and no newline: the line is
				// too long. Discard it up to its newline.
				r.skipped += int64(len(r.buf))
				r.buf = r.buf[:0]
			}
		}
		readAt := tf.pos + r.skipped + int64(len(r.buf))
		n, err := tf.f.ReadAt(r.buf[len(r.buf):cap(r.buf)], readAt)
		if n > 0 {
			scanFrom := len(r.buf)
			r.buf = r.buf[:len(r.buf)+n]
			if err := r.deliver(ctx, tf, scanFrom); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			r.t.partial.Store(r.skipped + int64(len(r.buf)))
			return nil
		}
		if err != nil {
			return fmt.Errorf("tail %s: read at %d: %w", r.t.path, readAt, err)
		}
	}
}

// deliver hands every complete line in buf to handle, scanning for newlines
// from scanFrom, and keeps the remainder at the start of buf.
func (r *tailRun) deliver(ctx context.Context, tf *tailFile, scanFrom int) error {
	start := 0
	for {
		i := bytes.IndexByte(r.buf[scanFrom:], '\n')
		if i < 0 {
			break
		}
		end := scanFrom + i
		if err := ctx.Err(); err != nil {
			r.buf = r.buf[:copy(r.buf, r.buf[start:])]
			return err
		}
		ln := Line{Path: r.t.path, Offset: tf.pos, Number: tf.line + 1, File: tf.id}
		length := int64(end - start)
		if r.skipped > 0 || length > int64(r.t.opts.MaxLineBytes) {
			ln.Oversize = r.skipped + length
		} else {
			ln.Bytes = r.buf[start:end]
		}
		if err := r.handle(ctx, ln); err != nil {
			// The position stays before this line: it is not committed.
			r.buf = r.buf[:copy(r.buf, r.buf[start:])]
			return fmt.Errorf("tail %s: line %d (offset %d): %w", r.t.path, ln.Number, ln.Offset, err)
		}
		if ln.Oversize > 0 {
			r.t.oversize.Add(1)
			r.t.logger.Warn("line too long: skipped", "line", ln.Number, "offset", ln.Offset, "bytes", ln.Oversize)
		}
		r.t.lines.Add(1)
		tf.pos += r.skipped + length + 1
		tf.line++
		r.skipped = 0
		start = end + 1
		scanFrom = start
		r.dirty = true
		r.uncommits++
		if r.uncommits >= r.t.opts.CommitEvery {
			if err := r.commit(tf); err != nil {
				return err
			}
		}
	}
	r.buf = r.buf[:copy(r.buf, r.buf[start:])]
	return nil
}

// commit saves tf's position to the offset file, if there is one.
func (r *tailRun) commit(tf *tailFile) error {
	r.dirty = false
	r.uncommits = 0
	// The identity's head covers only delivered bytes, so that a later
	// rewrite of them is recognised as a truncation.
	if tf.headLen < tailHeadMax && tf.pos > int64(tf.headLen) {
		n, sum, err := headHash(tf.f, min(tf.pos, tailHeadMax))
		if err != nil {
			return fmt.Errorf("tail %s: %w", r.t.path, err)
		}
		tf.headLen, tf.headSum = n, sum
	}
	if r.t.opts.StatePath == "" {
		return nil
	}
	st := tailState{
		Path: r.t.path, Dev: tf.id.Dev, Ino: tf.id.Ino, HeadLen: tf.headLen, HeadSHA256: tf.headSum,
		Offset: tf.pos, Line: tf.line,
	}
	if err := writeStateFile(r.t.opts.StatePath, st); err != nil {
		return err
	}
	r.t.commits.Add(1)
	return nil
}

// truncated reports whether the current file shrank below the read
// position or its first bytes changed.
func (t *Tailer) truncated(cur *tailFile) (bool, error) {
	fi, err := cur.f.Stat()
	if err != nil {
		return false, fmt.Errorf("tail %s: stat: %w", t.path, err)
	}
	if fi.Size() < cur.pos {
		return true, nil
	}
	if cur.headLen > 0 {
		n, sum, err := headHash(cur.f, int64(cur.headLen))
		if err != nil {
			return false, fmt.Errorf("tail %s: %w", t.path, err)
		}
		if n != cur.headLen || sum != cur.headSum {
			return true, nil
		}
	}
	return false, nil
}

// rotated returns the new file at the path after a rotation, or nil. A
// missing path keeps the current file.
func (t *Tailer) rotated(cur *tailFile) (next *tailFile, err error) {
	pfi, err := os.Stat(t.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // renamed away, new file not created yet
		}
		return nil, fmt.Errorf("tail %s: %w", t.path, err)
	}
	if id, ok := fileID(pfi); ok && id == cur.id {
		return nil, nil
	}
	nf, err := t.open()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	if nf.id == cur.id {
		nf.f.Close()
		return nil, nil
	}
	return nf, nil
}

// open opens the file at the path at position 0.
func (t *Tailer) open() (*tailFile, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return nil, fmt.Errorf("tail: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tail %s: stat: %w", t.path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("tail %s: not a regular file", t.path)
	}
	id, _ := fileID(fi)
	return &tailFile{f: f, id: id}, nil
}

// start opens the file and positions it: at the saved position when the
// offset file names this very file, else at 0 or at the end. It also returns
// the rotated-away file the saved position refers to, when it is found.
func (t *Tailer) start(ctx context.Context) (cur, pending *tailFile, err error) {
	var st *tailState
	if t.opts.StatePath != "" {
		st, err = readStateFile(t.opts.StatePath)
		if err != nil {
			return nil, nil, err
		}
		if st != nil && st.Path != t.path {
			abs1, _ := filepath.Abs(st.Path)
			abs2, _ := filepath.Abs(t.path)
			if abs1 != abs2 {
				return nil, nil, fmt.Errorf("tail: offset file %s belongs to %s, not %s", t.opts.StatePath, st.Path, t.path)
			}
		}
	}
	for {
		cur, err = t.open()
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) || t.opts.Once {
			return nil, nil, err
		}
		t.logger.Debug("waiting for the file to appear")
		timer := time.NewTimer(t.opts.PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, nil, nil
		case <-timer.C:
		}
	}
	if st != nil {
		if cur.id == (FileID{st.Dev, st.Ino}) {
			ok, err := matchesState(cur, st)
			if err != nil {
				cur.f.Close()
				return nil, nil, err
			}
			if ok {
				cur.pos, cur.line, cur.headLen, cur.headSum = st.Offset, st.Line, st.HeadLen, st.HeadSHA256
				t.logger.Info("resuming at the saved offset", "offset", st.Offset, "line", st.Line)
				return cur, nil, nil
			}
			t.logger.Warn("file changed since the saved offset (truncated or replaced): starting at byte 0", "saved_offset", st.Offset)
			return cur, nil, nil
		}
		// Rotated while stopped: finish the old file if it is still nearby.
		pending, err = t.findRotated(st)
		if err != nil {
			cur.f.Close()
			return nil, nil, err
		}
		if pending == nil {
			t.logger.Warn("saved offset refers to a file no longer found: starting the new file at byte 0",
				"saved_file", FileID{st.Dev, st.Ino}, "saved_offset", st.Offset)
		}
		return cur, pending, nil
	}
	if !t.opts.FromStart {
		if err := seekToEnd(cur); err != nil {
			cur.f.Close()
			return nil, nil, fmt.Errorf("tail %s: %w", t.path, err)
		}
	}
	return cur, nil, nil
}

// matchesState reports whether tf still holds the content st was saved for:
// at least st.Offset bytes, with the same first st.HeadLen bytes.
func matchesState(tf *tailFile, st *tailState) (bool, error) {
	fi, err := tf.f.Stat()
	if err != nil {
		return false, fmt.Errorf("tail: stat: %w", err)
	}
	if fi.Size() < st.Offset {
		return false, nil
	}
	n, sum, err := headHash(tf.f, int64(st.HeadLen))
	if err != nil {
		return false, fmt.Errorf("tail: %w", err)
	}
	return n == st.HeadLen && sum == st.HeadSHA256, nil
}

// findRotated looks in the tailed file's directory for the file st was
// saved for (same device, inode and head), positioned at the saved offset.
func (t *Tailer) findRotated(st *tailState) (*tailFile, error) {
	dir := filepath.Dir(t.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tail: look for the rotated file: %w", err)
	}
	want := FileID{st.Dev, st.Ino}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		name := filepath.Join(dir, e.Name())
		fi, err := os.Stat(name)
		if err != nil {
			continue
		}
		if id, ok := fileID(fi); !ok || id != want {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("tail: open rotated file: %w", err)
		}
		tf := &tailFile{f: f, id: want}
		ok, err := matchesState(tf, st)
		if err != nil || !ok {
			f.Close()
			return nil, err
		}
		tf.pos, tf.line, tf.headLen, tf.headSum = st.Offset, st.Line, st.HeadLen, st.HeadSHA256
		t.logger.Info("finishing the rotated file first", "rotated", name, "offset", st.Offset)
		return tf, nil
	}
	return nil, nil
}

// seekToEnd positions tf after the last newline of the file and counts the
// lines before it.
func seekToEnd(tf *tailFile) error {
	buf := make([]byte, tailReadChunk)
	var off, lines, lastEnd int64
	for {
		n, err := tf.f.ReadAt(buf, off)
		chunk := buf[:n]
		lines += int64(bytes.Count(chunk, []byte{'\n'}))
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			lastEnd = off + int64(i) + 1
		}
		off += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("count lines: %w", err)
		}
	}
	tf.pos, tf.line = lastEnd, lines
	return nil
}

// headHash hashes the first n bytes of f, returning how many it could read.
func headHash(f *os.File, n int64) (int, string, error) {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, "", fmt.Errorf("read head: %w", err)
	}
	sum := sha256.Sum256(buf[:got])
	return got, hex.EncodeToString(sum[:]), nil
}

// readStateFile loads the offset file; a missing one is nil, nil.
func readStateFile(path string) (*tailState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tail: read offset file: %w", err)
	}
	var st tailState
	if err := strictjson.Decode(b, &st); err != nil { // another build's file is refused, named
		return nil, fmt.Errorf("tail: offset file %s: %w", path, err)
	}
	if st.Offset < 0 || st.Line < 0 || st.HeadLen < 0 || st.HeadLen > tailHeadMax {
		return nil, fmt.Errorf("tail: offset file %s: offset, line or head_len out of range", path)
	}
	return &st, nil
}

// writeStateFile replaces the offset file atomically and durably.
func writeStateFile(path string, st tailState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("tail: encode offset: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("tail: save offset: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("tail: save offset: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("tail: save offset: sync dir: %w", err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("tail: save offset: sync dir: %w", err)
	}
	return nil
}
