package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index"
)

// embeddingsRequest is what the fake server decodes of a request.
type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

// fakeEmbeddings serves /embeddings with handle and counts requests.
func fakeEmbeddings(t *testing.T, handle func(w http.ResponseWriter, req embeddingsRequest)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.Error(w, "bad path "+r.URL.Path, http.StatusNotFound)
			return
		}
		var req embeddingsRequest
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sk-test" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`)
			return
		}
		handle(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func vectorsJSON(vs ...string) string {
	var items []string
	for i, v := range vs {
		items = append(items, `{"object":"embedding","index":`+string(rune('0'+i))+`,"embedding":`+v+`}`)
	}
	return `{"object":"list","data":[` + strings.Join(items, ",") + `],"model":"m"}`
}

func TestEmbedder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dims    int
		key     string
		body    string
		status  int
		wantErr string
		is      error
	}{
		{name: "ok", body: vectorsJSON("[1,0,0]", "[0,3,4]"), dims: 3},
		{name: "out of order index", body: `{"data":[{"index":1,"embedding":[0,3,4]},{"index":0,"embedding":[1,0,0]}]}`},
		{name: "error body", status: 429, body: `{"error":{"message":"Rate limit reached","type":"requests"}}`, wantErr: "HTTP 429: Rate limit reached (requests)"},
		{name: "plain error body", status: 502, body: "upstream down", wantErr: "HTTP 502: upstream down"},
		{name: "bad key", key: "sk-wrong", wantErr: "HTTP 401: Incorrect API key provided"},
		{name: "wrong dimensions", dims: 4, body: vectorsJSON("[1,0,0]", "[0,3,4]"), wantErr: "has 3 components, want 4", is: index.ErrDimension},
		{name: "ragged dimensions", body: vectorsJSON("[1,0,0]", "[0,3]"), wantErr: "data[1] has 2 components, want 3", is: index.ErrDimension},
		{name: "nan literal", body: vectorsJSON("[1,0,0]", "[NaN,0,0]"), wantErr: "decode response"},
		{name: "nan string", body: vectorsJSON("[1,0,0]", `["NaN",0,0]`), wantErr: `data[1] component 0`, is: index.ErrNonFinite},
		{name: "overflow", body: vectorsJSON("[1,0,0]", "[1e39,0,0]"), wantErr: "data[1] component 0", is: index.ErrNonFinite},
		{name: "zero vector", body: vectorsJSON("[1,0,0]", "[0,0,0]"), wantErr: "data[1]", is: index.ErrZeroVector},
		{name: "short batch", body: vectorsJSON("[1,0,0]"), wantErr: "asked for 2 vectors, response has 1"},
		{name: "repeated index", body: `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}`, wantErr: "repeated index 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got embeddingsRequest
			srv, calls := fakeEmbeddings(t, func(w http.ResponseWriter, req embeddingsRequest) {
				got = req
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				io.WriteString(w, tc.body)
			})
			key := tc.key
			if key == "" {
				key = "sk-test"
			}
			c, err := New(Options{BaseURL: srv.URL + "/v1/", APIKey: key})
			require.NoError(t, err)
			e, err := NewEmbedder(c, "text-embedding-3-small", tc.dims)
			require.NoError(t, err)
			vs, err := e.Embed(context.Background(), []string{"alpha", "beta"})
			assert.Equal(t, int64(1), calls.Load(), "exactly one attempt, no retries")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				if tc.is != nil {
					assert.ErrorIs(t, err, tc.is)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "text-embedding-3-small", got.Model)
			assert.Equal(t, []string{"alpha", "beta"}, got.Input)
			assert.Equal(t, "float", got.EncodingFormat)
			assert.Equal(t, [][]float32{{1, 0, 0}, {0, 3, 4}}, vs, "vectors in input order, unmodified")
		})
	}
}
