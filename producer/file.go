package producer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/verdryx/verdryx/envelope"
)

// dedupeWindow is how many recent event hashes a DedupeFile remembers, and
// how much of the file's tail it reads on open (1 MiB, the writer's own
// resume window).
const (
	dedupeWindow     = 8192
	dedupeTailWindow = 1 << 20
)

// DedupeFile is a chained NDJSON file sink that drops an event already in
// the recent part of the file, as JetStream drops a message id it already
// holds: an event emitted again (a request redelivered after a crash
// between the write and the record that it was written) is not appended a
// second time. An event's identity is its hash without prev_hash, the same
// id the NATS chain publishes under. It remembers the events of the last
// 1 MiB of the file at open and the last 8,192 appended. It is safe for
// concurrent use.
type DedupeFile struct {
	w *envelope.Writer

	mu    sync.Mutex
	seen  map[string]struct{}
	order []string
}

// NewDedupeFile wraps w, whose file is path, reading the tail of the file
// for the events already in it. A line that is not an event is ignored.
func NewDedupeFile(w *envelope.Writer, path string) (*DedupeFile, error) {
	d := &DedupeFile{w: w, seen: make(map[string]struct{})}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("events file %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("events file %s: %w", path, err)
	}
	start := max(info.Size()-dedupeTailWindow, 0)
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return nil, fmt.Errorf("events file %s: %w", path, err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if start > 0 { // drop the partial first line of the window
		if _, err := br.ReadSlice('\n'); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return d, nil
		}
	}
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if hash, _, herr := envelope.LineHash(line); herr == nil {
				d.remember(hash)
			}
		}
		if err != nil {
			break
		}
	}
	return d, nil
}

func (d *DedupeFile) remember(hash string) {
	if _, ok := d.seen[hash]; ok {
		return
	}
	d.seen[hash] = struct{}{}
	d.order = append(d.order, hash)
	if len(d.order) > dedupeWindow {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
}

// Append implements Sink. An event already in the window is reported as
// appended without being written again.
func (d *DedupeFile) Append(_ context.Context, ev envelope.Event) (bool, error) {
	if ev.AgentID == "" {
		return d.w.Append(ev) // counted as skipped by the writer
	}
	_, hash, err := envelope.Seal(ev, "")
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[hash]; ok {
		return true, nil
	}
	ok, err := d.w.Append(ev)
	if err == nil && ok {
		d.remember(hash)
	}
	return ok, err
}
