package rag_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/provider/openai"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// countingEmbedder wraps an embedder and counts its calls.
type countingEmbedder struct {
	index.Embedder
	calls atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.calls.Add(1)
	return c.Embedder.Embed(ctx, texts)
}

func TestAskRecordsEveryStage(t *testing.T) {
	c := loadGrimoire(t)
	p, err := rag.NewOffline(context.Background(), "../testdata/grimoire/corpus.json", rag.Options{})
	require.NoError(t, err)
	q := "Under GRIM-VERDANT, what dose of verdigris blossom elixir is prescribed for tarnish fever, and when is it administered?"
	rec, err := p.Ask(context.Background(), q)
	require.NoError(t, err)
	require.NoError(t, rec.Validate())

	verdant, _ := c.Entry("verdigris-dose-verdant")
	amber, _ := c.Entry("verdigris-dose-amber")
	wantPayload := "[CONTEXT id=verdigris-dose-verdant grimoire_id='GRIM-VERDANT' folio=21]\n" + verdant.Text + "\n[END CONTEXT id=verdigris-dose-verdant]" +
		"\n\n" +
		"[CONTEXT id=verdigris-dose-amber grimoire_id='GRIM-AMBER' folio=22]\n" + amber.Text + "\n[END CONTEXT id=verdigris-dose-amber]"
	assert.Equal(t, wantPayload, rec.ContextPayload)
	require.Len(t, rec.Messages, 2)
	assert.Equal(t, "system", rec.Messages[0].Role)
	assert.Contains(t, rec.Messages[0].Content, "exactly INSUFFICIENT_CONTEXT and nothing else")
	assert.Contains(t, rec.Messages[0].Content, "repeat that block's grimoire_id")
	assert.Equal(t, "Context:\n\n"+wantPayload+"\n\nQuestion: "+q, rec.Messages[1].Content)
	assert.Equal(t, verdant.Metadata, rec.Chunks[0].Metadata)
	assert.Equal(t, c.Digest(), rec.CorpusDigest)
	assert.Regexp(t, `^memory:[0-9a-f]{32}$`, rec.IndexGeneration)
	for i := range rec.Chunks {
		assert.Equal(t, 1-rec.Similarities[i], rec.Distances[i])
	}

	// The record's JSON uses the documented names.
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	for _, k := range []string{"question", "retrieved_ids", "retrieved_chunks", "distances", "similarities", "context_payload", "generation_messages", "answer", "index_generation", "corpus_digest"} {
		assert.Contains(t, string(b), `"`+k+`":`)
	}
}

func TestAskIsSafeForConcurrentUse(t *testing.T) {
	const corpus = "../testdata/grimoire/corpus.json"
	cases, err := golden.Load("../testdata/grimoire/golden.json")
	require.NoError(t, err)
	p, err := rag.NewOffline(context.Background(), corpus, rag.Options{})
	require.NoError(t, err)
	want := make([]rag.Record, len(cases))
	for i, gc := range cases {
		want[i], err = p.Ask(context.Background(), gc.Question)
		require.NoError(t, err)
	}
	// A fresh pipeline whose first asks are concurrent: what it computes
	// on first use (the generator's term statistics) is computed once.
	p, err = rag.NewOffline(context.Background(), corpus, rag.Options{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(cases))
	for range 8 {
		for i, gc := range cases {
			wg.Go(func() {
				rec, err := p.Ask(context.Background(), gc.Question)
				if err != nil || rec.Answer != want[i].Answer || rec.ContextPayload != want[i].ContextPayload {
					errs <- gc.CaseID
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for id := range errs {
		t.Errorf("concurrent ask of %s differed", id)
	}
}

func TestOpenPersistedAndRefuseStaleBeforeProviders(t *testing.T) {
	data := t.TempDir()
	c := loadGrimoire(t)
	store := index.NewStore(data, index.StoreOptions{})
	each := func(yield func(rag.Entry) error) error {
		for _, e := range c.Entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}
	m, _, err := rag.BuildGeneration(context.Background(), store, c, hashembed.New(0), rag.BuildOptions{}, each, time.Now())
	require.NoError(t, err)

	emb := &countingEmbedder{Embedder: hashembed.New(0)}
	p, err := rag.Open(store, c, emb, rag.NewExtractive(0), rag.Options{})
	require.NoError(t, err)
	assert.Equal(t, int64(0), emb.calls.Load(), "opening embeds nothing")
	rec, err := p.Ask(context.Background(), "Under GRIM-UMBRAL-BOTANY, when may a shadeglass orchid be harvested?")
	require.NoError(t, err)
	assert.Equal(t, m.ID, rec.IndexGeneration)
	assert.Equal(t, int64(1), emb.calls.Load())

	edited := loadGrimoire(t)
	edited.Entries[0].Text = strings.Replace(edited.Entries[0].Text, "11 grains", "12 grains", 1)
	other := &countingEmbedder{Embedder: hashembed.New(512)}
	for _, tc := range []struct {
		name   string
		corpus rag.Corpus
		emb    *countingEmbedder
		want   string
	}{
		{"corpus edited", edited, &countingEmbedder{Embedder: hashembed.New(0)}, "was built from corpus"},
		{"embedder model changed", c, other, "was built with embedder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rag.Open(store, tc.corpus, tc.emb, rag.NewExtractive(0), rag.Options{})
			require.ErrorIs(t, err, index.ErrStale)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, int64(0), tc.emb.calls.Load(), "a stale generation is refused before any provider call")
		})
	}
}

func TestExtractiveGenerator(t *testing.T) {
	c := loadGrimoire(t)
	chunk := func(id string) rag.Chunk {
		e, _ := c.Entry(id)
		return rag.Chunk{ID: e.ID, Text: e.Text, Metadata: e.Metadata}
	}
	g := rag.NewExtractive(0)
	ask := func(q string, ids ...string) string {
		req := rag.Request{Question: q, SourceField: c.SourceField, SubjectField: c.SubjectField}
		for _, id := range ids {
			req.Chunks = append(req.Chunks, chunk(id))
		}
		a, err := g.Generate(context.Background(), req)
		require.NoError(t, err)
		return a
	}
	// The named source wins even when ranked second.
	a := ask("Under GRIM-AMBER, what dose of verdigris blossom elixir is prescribed for tarnish fever?", "verdigris-dose-verdant", "verdigris-dose-amber")
	assert.Contains(t, a, "9 drams")
	assert.Contains(t, a, "[verdigris-dose-amber] (grimoire_id: GRIM-AMBER)")
	assert.NotContains(t, a, "3 drams")
	// A named source is never swapped for a better-matching other source:
	// here the other source matches more of the question, the named one
	// too little, so the answer is an abstention, not the wrong source.
	src := func(id, source, text string) rag.Chunk {
		return rag.Chunk{ID: id, Text: text, Metadata: map[string]any{"src": source, "subject": "elixir"}}
	}
	a2, err := g.Generate(context.Background(), rag.Request{
		Question:    "Per SRC-B, how many drams of elixir at dawn?",
		Chunks:      []rag.Chunk{src("a", "SRC-A", "Give 3 drams of elixir at dawn."), src("b", "SRC-B", "Give 9 drams of elixir after dusk.")},
		SourceField: "src", SubjectField: "subject",
	})
	require.NoError(t, err)
	assert.Equal(t, rag.Abstention, a2)
	// The subject wins over a higher-ranked near-synonym.
	a = ask("How many grains of pearl salt does ground moonpetal take?", "moonflower-golden-vapor", "moonpetal-silver-vapor")
	assert.Contains(t, a, "11 grains")
	assert.Contains(t, a, "[moonpetal-silver-vapor]")
	// ... even when the near-synonym's text matches more of the question.
	a = ask("How many grains of pearl salt and what golden vapor does ground moonpetal give?", "moonflower-golden-vapor", "moonpetal-silver-vapor")
	assert.Contains(t, a, "[moonpetal-silver-vapor]")
	assert.NotContains(t, a, "17 grains")
	// A chunk on the right subject that does not speak to the question is no support.
	assert.Equal(t, rag.Abstention, ask("What colour are moonpetal roots in winter?", "moonpetal-silver-vapor", "moonflower-golden-vapor"))
	assert.Equal(t, rag.Abstention, ask("what is it?", "moonpetal-silver-vapor"), "no focus terms")
	assert.Equal(t, rag.Abstention, ask("How many grains of pearl salt does ground moonpetal take?"), "no context")
	// Only the sentences that speak to the question are copied, verbatim.
	a = ask("Does direct sun exposure invalidate anything for a shadeglass orchid?", "shadeglass-orchid-harvest")
	assert.True(t, strings.HasPrefix(a, "A shadeglass orchid grown entirely in shade may be harvested after 7 moon-phases. Any exposure to direct sun invalidates this harvest window."), a)
	// Threshold: with support 1.0 required, a partial match abstains.
	strict := rag.NewExtractive(1)
	req := rag.Request{Question: "What dose of verdigris blossom elixir treats tarnish fever in winter?", Chunks: []rag.Chunk{chunk("verdigris-dose-verdant")}, SourceField: "grimoire_id", SubjectField: "subject"}
	a, err = strict.Generate(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rag.Abstention, a)
	a, err = g.Generate(context.Background(), req)
	require.NoError(t, err)
	assert.Contains(t, a, "3 drams")
}

func TestChatGenerator(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		want    string
		wantErr string
	}{
		{"answer verbatim", 200, `{"choices":[{"message":{"role":"assistant","content":"  3 drams [x] (grimoire_id: G)\n"}}]}`, "  3 drams [x] (grimoire_id: G)\n", ""},
		{"abstention", 200, `{"choices":[{"message":{"content":"INSUFFICIENT_CONTEXT"}}]}`, "INSUFFICIENT_CONTEXT", ""},
		{"error body", 400, `{"error":{"message":"model not found","type":"invalid_request_error"}}`, "", "HTTP 400: model not found (invalid_request_error)"},
		{"no choices", 200, `{"choices":[]}`, "", "malformed response: no choices"},
		{"null content", 200, `{"choices":[{"message":{"role":"assistant","content":null}}]}`, "", "no message content"},
		{"empty content", 200, `{"choices":[{"message":{"role":"assistant","content":""}}]}`, "", "empty answer"},
		{"not json", 200, `<html>`, "", "decode response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			var got map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				assert.Equal(t, "/v1/chat/completions", r.URL.Path)
				assert.Equal(t, "Bearer k", r.Header.Get("Authorization"))
				b, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(b, &got)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "k"})
			require.NoError(t, err)
			g, err := rag.NewChat(c, "gpt-test")
			require.NoError(t, err)
			msgs := []rag.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}
			a, err := g.Generate(context.Background(), rag.Request{Messages: msgs})
			assert.Equal(t, int64(1), calls.Load(), "one attempt, no retries")
			assert.Equal(t, "gpt-test", got["model"])
			assert.Equal(t, 0.0, got["temperature"])
			assert.Equal(t, []any{map[string]any{"role": "system", "content": "s"}, map[string]any{"role": "user", "content": "u"}}, got["messages"])
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, a)
		})
	}
}
