package report

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// RenderFunc writes a complete page to w for the request's query
// parameters named in HandlerOptions.Params (the others are dropped).
type RenderFunc func(ctx context.Context, w io.Writer, q url.Values) error

// Handler serves a rendered page over HTTP (GET and HEAD), caching each
// page (one per distinct value of the query parameters it renders by) for
// a TTL so a burst of requests renders once. Requests that arrive while a
// render runs wait for it. A render that fails with BadRequest answers 400
// with its message; any other failure answers 500 with a generic message
// (the error goes to the log). Failures are not cached.
type Handler struct {
	render RenderFunc
	ttl    time.Duration
	log    *slog.Logger
	now    func() time.Time
	params []string

	mu      sync.Mutex
	pages   map[string]cachedPage
	renders int
}

type cachedPage struct {
	page []byte
	at   time.Time
}

// maxCachedPages bounds the pages a Handler caches (their query values
// come from clients): past it, the cache starts over.
const maxCachedPages = 32

// HandlerOptions configure a Handler.
type HandlerOptions struct {
	// TTL is how long a rendered page is served from cache; 0 means 5 s.
	TTL time.Duration
	// Logger receives render errors; nil discards them.
	Logger *slog.Logger
	// Params names the query parameters the page is rendered by (their
	// first values); none: every request gets the same page.
	Params []string
}

// badRequest is a render failure caused by the request (a bad query).
type badRequest struct{ err error }

func (e badRequest) Error() string { return e.err.Error() }
func (e badRequest) Unwrap() error { return e.err }

// BadRequest marks err as the request's fault: the Handler answers 400
// with its message.
func BadRequest(err error) error { return badRequest{err} }

// NewHandler returns a Handler around render.
func NewHandler(render RenderFunc, opts HandlerOptions) *Handler {
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{render: render, ttl: opts.TTL, log: opts.Logger, now: time.Now, params: opts.Params, pages: map[string]cachedPage{}}
}

func (h *Handler) get(ctx context.Context, r *http.Request) ([]byte, error) {
	q := url.Values{}
	for _, p := range h.params {
		if v := r.URL.Query().Get(p); v != "" {
			q.Set(p, v)
		}
	}
	key := q.Encode()
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.pages[key]; ok && h.now().Sub(c.at) < h.ttl {
		return c.page, nil
	}
	var buf bytes.Buffer
	if err := h.render(ctx, &buf, q); err != nil {
		return nil, err
	}
	if len(h.pages) >= maxCachedPages {
		clear(h.pages)
	}
	h.pages[key] = cachedPage{buf.Bytes(), h.now()}
	h.renders++
	return buf.Bytes(), nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	page, err := h.get(r.Context(), r)
	var bad badRequest
	if errors.As(err, &bad) {
		http.Error(w, bad.Error(), http.StatusBadRequest)
		return
	}
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
