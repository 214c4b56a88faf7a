package segpub

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/segment"
)

// FollowOptions tune Follow.
type FollowOptions struct {
	Options
	// Settle is how long a segment may stay incomplete (or unreadable)
	// without growing before it is reported, once; 0 means DefaultSettle.
	Settle time.Duration
	// Poll is the interval of the directory scan that backs up file
	// system events (and replaces them where the file system has none);
	// 0 means DefaultPoll.
	Poll time.Duration
	// OnPublished, when set, is called after each segment is published
	// with its path and the replay's counts.
	OnPublished func(path string, st Stats)
}

// Follow defaults.
const (
	DefaultSettle = time.Minute
	DefaultPoll   = 2 * time.Second
)

// EnsureDefaults fills the zero fields of o that have a default and
// returns o: Settle DefaultSettle, Poll DefaultPoll, Logger one that
// discards, and Options' (Options.EnsureDefaults).
func (o *FollowOptions) EnsureDefaults() *FollowOptions {
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Options.EnsureDefaults()
	return o
}

// Follower publishes the segments of a directory as the gateway completes
// them. Its methods are safe for concurrent use.
type Follower struct {
	js      jetstream.JetStream
	subject string
	dir     string
	opts    FollowOptions

	mu      sync.Mutex
	pending map[string]*pendingSeg // by path: seen, not published yet
	done    map[string]bool        // published this run
	stats   Stats                  // totals of what was published
}

// pendingSeg is a segment not published yet.
type pendingSeg struct {
	seen     time.Time // first seen
	size     int64
	modTime  time.Time
	changed  time.Time // last seen growing or changing
	reported bool      // reported as stuck since the last change
	lastErr  error
}

// NewFollower returns a follower of dir publishing to subject as Publish
// does.
func NewFollower(js jetstream.JetStream, subject, dir string, opts FollowOptions) *Follower {
	opts.EnsureDefaults()
	opts.Strict = false // a bad segment waits for a change; it never stops the follower
	return &Follower{js: js, subject: subject, dir: dir, opts: opts,
		pending: map[string]*pendingSeg{}, done: map[string]bool{}}
}

// Pending returns how many segments are seen but not published yet, and
// the age of the oldest of them (0 with none).
func (f *Follower) Pending() (n int, oldest time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for _, p := range f.pending {
		oldest = max(oldest, now.Sub(p.seen))
	}
	return len(f.pending), oldest
}

// Run follows the directory until ctx is done: every segment present at
// the start and every one completed later is published once (in the
// directory's segment order among those ready together), each as Publish
// publishes it, so that a restart republishes only what the workers drop
// as already applied (the segment digest). A segment whose Parquet footer
// is not there yet, or that does not read whole, is waited for; one that
// stays so for Settle without changing is reported once (a warning naming
// it) and tried again when it changes. Directory events come from
// inotify (fsnotify), backed by a scan every Poll, which alone serves file
// systems without events. Run returns ctx's error, or the error of a
// publish that failed for good (the server refused it past the retries).
func (f *Follower) Run(ctx context.Context) error {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		f.opts.Logger.Warn("follow: no file system events, polling", "dir", f.dir, "every", f.opts.Poll, "err", err)
	} else {
		defer w.Close()
		if err := w.Add(f.dir); err != nil {
			f.opts.Logger.Warn("follow: no file system events, polling", "dir", f.dir, "every", f.opts.Poll, "err", err)
		} else {
			events, errs = w.Events, w.Errors
		}
	}
	tick := time.NewTicker(f.opts.Poll)
	defer tick.Stop()
	for {
		if err := f.scan(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
			} else {
				f.opts.Logger.Warn("follow: file system events", "dir", f.dir, "err", err)
			}
		}
	}
}

// scan lists the directory and publishes every segment that is complete.
func (f *Follower) scan(ctx context.Context) error {
	segs, _, err := segment.List(f.dir)
	if err != nil {
		f.opts.Logger.Warn("follow: list", "dir", f.dir, "err", err)
		return nil
	}
	now := time.Now()
	// Memory is bounded by the directory: segments gone from it (rotated
	// away by the operator) are forgotten.
	listed := make(map[string]bool, len(segs))
	for _, s := range segs {
		listed[s.Path] = true
	}
	f.mu.Lock()
	for p := range f.done {
		if !listed[p] {
			delete(f.done, p)
		}
	}
	for p := range f.pending {
		if !listed[p] {
			delete(f.pending, p)
		}
	}
	f.mu.Unlock()
	for _, s := range segs {
		f.mu.Lock()
		done := f.done[s.Path]
		p := f.pending[s.Path]
		if !done && p == nil {
			p = &pendingSeg{seen: now, changed: now, size: -1}
			f.pending[s.Path] = p
		}
		f.mu.Unlock()
		if done {
			continue
		}
		info, err := os.Stat(s.Path)
		if err != nil {
			continue // gone between the listing and now
		}
		if info.Size() != p.size || !info.ModTime().Equal(p.modTime) {
			p.size, p.modTime, p.changed, p.reported = info.Size(), info.ModTime(), now, false
		} else if p.lastErr != nil {
			// Unchanged since it last failed: nothing new to try.
			f.stuck(s.Path, p, now)
			continue
		}
		s.Size = info.Size()
		if err := complete(s.Path); err != nil {
			p.lastErr = err
			f.stuck(s.Path, p, now)
			continue
		}
		st, err := ReplaySegments(ctx, f.js, f.subject, []segment.Segment{s}, 0, f.opts.Options)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("follow %s: %w", f.dir, err)
		}
		if len(st.Failed) > 0 {
			p.lastErr = errors.New(st.Failed[0])
			f.stuck(s.Path, p, now)
			continue
		}
		f.mu.Lock()
		delete(f.pending, s.Path)
		f.done[s.Path] = true
		f.stats.Segments += st.Segments
		f.stats.Rows += st.Rows
		f.stats.New += st.New
		f.stats.Duplicates += st.Duplicates
		f.mu.Unlock()
		if f.opts.OnPublished != nil {
			f.opts.OnPublished(s.Path, st)
		}
	}
	return nil
}

// stuck reports p once when it has not changed for Settle.
func (f *Follower) stuck(path string, p *pendingSeg, now time.Time) {
	if p.reported || now.Sub(p.changed) < f.opts.Settle {
		return
	}
	p.reported = true
	f.opts.Logger.Warn("follow: segment incomplete or unreadable and not growing; retried when it changes",
		"segment", path, "since", p.changed.UTC().Format(time.RFC3339), "err", p.lastErr)
}

// complete reports (nil) whether the file at path holds a whole Parquet
// file as far as its ends tell: PAR1 at the start, and a footer length
// that fits before the closing PAR1.
func complete(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	if size < 12 {
		return fmt.Errorf("%d bytes: no footer yet", size)
	}
	var head [4]byte
	var tail [8]byte
	if _, err := fh.ReadAt(head[:], 0); err != nil {
		return err
	}
	if _, err := fh.ReadAt(tail[:], size-8); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if string(head[:]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return fmt.Errorf("%d bytes: no footer yet", size)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n+12 > size {
		return fmt.Errorf("%d bytes: footer of %d bytes does not fit", size, n)
	}
	return nil
}
