package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/ragask"
)

// generationPoll is how often Generations reads the active pointer when
// no file system event says it changed (events are missed on some file
// systems, and the index directory may not exist yet).
const generationPoll = 2 * time.Second

// errNoGeneration answers an ask while no generation serves (the ask
// server subscribes only once one does).
var errNoGeneration = errors.New("no index generation is active on this worker yet")

// Generations answers RAG asks from the active index generation of a data
// directory and follows it: Run watches the pointer (<data>/index/
// active.json, replaced by rename) and reads it every generationPoll, and
// when it names another generation, opens that one (rag.OpenStored) off
// the ask path and then swaps it in. An ask runs whole on the generation
// it started with; none is dropped or failed by a switch. Every record
// names the generation that answered (rag.Record.IndexGeneration, set on
// errors too). A generation that does not open leaves the one serving in
// place, logged with why, and is not tried again until the pointer names
// another. The generation served is leased (index.Store.Lease), so that
// index gc keeps it; an old generation's lease is released when the last
// ask on it ends.
type Generations struct {
	store     *index.Store
	providers rag.Providers
	gen       rag.Generator
	log       *slog.Logger
	poll      time.Duration

	cur       atomic.Pointer[served]
	ready     chan struct{}
	readyOnce sync.Once
	onServe   func(generation string)
	closeOnce sync.Once

	// Touched by check only (OpenAsks, then Run's goroutine).
	failed  string // the generation that last failed to open
	lastErr string // the last error reading the pointer, logged once
}

// served is one generation's asker with its lease. refs counts the
// current reference (while it is the one served) and each ask running on
// it; the lease goes with the last.
type served struct {
	asker      ragask.Asker
	generation string
	refs       atomic.Int64
	release    func()
}

func (s *served) unref() {
	if s.refs.Add(-1) == 0 {
		s.release()
	}
}

// newGenerations returns the follower of the active generation of store,
// having tried once to open it.
func newGenerations(store *index.Store, p rag.Providers, gen rag.Generator, log *slog.Logger) *Generations {
	g := &Generations{store: store, providers: p, gen: gen, log: log, poll: generationPoll, ready: make(chan struct{})}
	g.check()
	return g
}

// AskWith answers from the generation served when the ask starts.
func (g *Generations) AskWith(ctx context.Context, question string, o rag.AskOptions) (rag.Record, error) {
	s := g.cur.Load()
	if s == nil {
		return rag.Record{}, errNoGeneration
	}
	s.refs.Add(1)
	defer s.unref()
	rec, err := s.asker.AskWith(ctx, question, o)
	if rec.IndexGeneration == "" {
		rec.IndexGeneration = s.generation
	}
	return rec, err
}

// Generation is the id of the generation served, "" while none is.
func (g *Generations) Generation() string {
	if s := g.cur.Load(); s != nil {
		return s.generation
	}
	return ""
}

// Ready is closed once a generation serves.
func (g *Generations) Ready() <-chan struct{} { return g.ready }

// OnServe calls f with the generation served now, if any, and then with
// each one switched to. Call it before Run.
func (g *Generations) OnServe(f func(generation string)) {
	g.onServe = f
	if gen := g.Generation(); gen != "" {
		f(gen)
	}
}

// Run follows the active generation until ctx is done. It is not safe to
// run twice at once.
func (g *Generations) Run(ctx context.Context) error {
	dir := g.store.Dir()
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err != nil {
		g.log.Warn("rag generation: no file system events, polling", "dir", dir, "every", g.poll, "err", err)
		w = nil
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	watching := false
	tick := time.NewTicker(g.poll)
	defer tick.Stop()
	for {
		if w != nil && !watching {
			// The index directory may appear later: tried every poll.
			watching = w.Add(dir) == nil
		}
		due := false
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			due = true
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watching = false
			}
			// Any change in the index directory re-reads the pointer (a
			// rename replaces it); an unchanged pointer costs one read.
			due = true
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			g.log.Warn("rag generation: file system events", "dir", dir, "err", err)
		}
		if due {
			g.check()
		}
	}
}

// Close releases the lease of the generation served, once the asks on it
// end. Call it after Run returned.
func (g *Generations) Close() {
	g.closeOnce.Do(func() {
		if s := g.cur.Swap(nil); s != nil {
			s.unref()
		}
	})
}

// check serves the generation the pointer names, if it is not served
// already and did not fail to open last time.
func (g *Generations) check() {
	id, err := g.store.Active()
	if err != nil {
		if !errors.Is(err, index.ErrNoActive) && err.Error() != g.lastErr {
			g.log.Warn("rag generation: cannot read the active pointer", "err", err)
		}
		g.lastErr = err.Error()
		return
	}
	g.lastErr = ""
	cur := g.cur.Load()
	if cur != nil && cur.generation == id {
		g.failed = "" // re-activated: one that failed may be tried again
		return
	}
	if id == g.failed {
		return
	}
	serving := "none"
	if cur != nil {
		serving = cur.generation
	}
	s, err := g.open(id)
	switch {
	case err == nil:
		g.failed = ""
	case cur == nil && errors.Is(err, rag.ErrEmbedder):
		g.failed = id
		g.log.Warn("rag asks refused: the active index generation's embedder is unavailable here", "generation", id, "reason", err)
		s = &served{asker: refusedAsker{fmt.Errorf("asks refused on this worker: %w", err)}, generation: id, release: func() {}}
		s.refs.Store(1)
	case cur == nil && errors.Is(err, index.ErrNoCorpus):
		g.failed = id
		g.log.Info("rag asks disabled: no Options.RAGCorpus and no index generation with a recorded corpus; enabled when one is activated",
			"data", filepath.Dir(g.store.Dir()), "generation", id, "reason", err)
		return
	default:
		g.failed = id
		g.log.Warn("rag generation not served: it does not open", "generation", id, "serving", serving, "err", err)
		return
	}
	g.cur.Store(s)
	if cur != nil {
		cur.unref()
	}
	if p, ok := s.asker.(*rag.Pipeline); ok {
		msg := "rag asks answered from the active index generation"
		if cur != nil {
			msg = "rag generation switched"
		}
		g.log.Info(msg, "generation", id, "corpus", p.Corpus().ID, "embedder", p.Embedder(), "generator", g.gen.Name(), "previous", serving)
	}
	if g.onServe != nil {
		g.onServe(id)
	}
	g.readyOnce.Do(func() { close(g.ready) })
}

// open leases generation id and opens it.
func (g *Generations) open(id string) (*served, error) {
	release, err := g.store.Lease(id)
	if err != nil {
		return nil, err
	}
	p, err := rag.OpenStored(g.store, id, g.providers, g.gen, rag.Options{})
	if err != nil {
		release()
		return nil, err
	}
	s := &served{asker: p, generation: p.Generation(), release: release}
	s.refs.Store(1)
	return s, nil
}
