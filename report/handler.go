package report

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RenderFunc writes a complete page to w.
type RenderFunc func(ctx context.Context, w io.Writer) error

// Handler serves a rendered page over HTTP (GET and HEAD), caching it for
// a TTL so a burst of requests renders once. Requests that arrive while a
// render runs wait for it. A failed render answers 500 with a generic
// message (the error goes to the log) and is not cached.
type Handler struct {
	render RenderFunc
	ttl    time.Duration
	log    *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	page    []byte
	renders int
	at      time.Time
}

// HandlerOptions configure a Handler.
type HandlerOptions struct {
	// TTL is how long a rendered page is served from cache; 0 means 5 s.
	TTL time.Duration
	// Logger receives render errors; nil discards them.
	Logger *slog.Logger
}

// NewHandler returns a Handler around render.
func NewHandler(render RenderFunc, opts HandlerOptions) *Handler {
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{render: render, ttl: opts.TTL, log: opts.Logger, now: time.Now}
}

// Renders reports how many times the page was rendered (for tests and
// metrics).
func (h *Handler) Renders() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renders
}

func (h *Handler) get(ctx context.Context) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.page != nil && h.now().Sub(h.at) < h.ttl {
		return h.page, nil
	}
	var buf bytes.Buffer
	if err := h.render(ctx, &buf); err != nil {
		return nil, err
	}
	h.page, h.at = buf.Bytes(), h.now()
	h.renders++
	return h.page, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	page, err := h.get(r.Context())
	if err != nil {
		h.log.Error("render report", "err", err)
		http.Error(w, "report could not be rendered; see the worker log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Length", strconv.Itoa(len(page)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(page)
}
