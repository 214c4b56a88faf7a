package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandlerCachesAPagePerWindow: a page is rendered once per distinct
// value of the parameters it is rendered by (others ignored) within the
// TTL; a BadRequest render answers 400 with its message, any other
// failure 500 without it; failures are not cached; the cache is bounded.
func TestHandlerCachesAPagePerWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	h := NewHandler(func(_ context.Context, w io.Writer, q url.Values) error {
		switch q.Get("last") {
		case "bad":
			return BadRequest(errors.New(`last "bad": want a duration`))
		case "boom":
			return errors.New("store: disk on fire")
		}
		_, err := fmt.Fprintf(w, "page last=%s from=%s", q.Get("last"), q.Get("from"))
		return err
	}, HandlerOptions{TTL: time.Minute, Params: []string{"last", "from"}})
	h.now = func() time.Time { return now }
	get := func(target string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/report")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "page last= from=", body)
	code, body = get("/report?last=7d&utm=x")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "page last=7d from=", body)
	assert.Equal(t, 2, rendersOf(h))
	get("/report?utm=y&last=7d") // the same page: other parameters ignored
	get("/report")
	assert.Equal(t, 2, rendersOf(h), "served from cache within the TTL")
	now = now.Add(2 * time.Minute)
	get("/report")
	assert.Equal(t, 3, rendersOf(h), "rendered again past the TTL")

	code, body = get("/report?last=bad")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `last "bad"`)
	code, body = get("/report?last=boom")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.NotContains(t, body, "disk on fire", "an internal error stays in the log")
	renders := rendersOf(h)
	get("/report?last=bad")
	assert.Equal(t, renders, rendersOf(h), "a failure renders nothing to cache")

	for i := range 2 * maxCachedPages {
		get(fmt.Sprintf("/report?from=day-%d", i))
	}
	h.mu.Lock()
	assert.LessOrEqual(t, len(h.pages), maxCachedPages, "the cache is bounded")
	h.mu.Unlock()
}

// rendersOf returns how many times h rendered its page.
func rendersOf(h *Handler) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renders
}
