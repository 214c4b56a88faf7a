package rag

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
)

// retrievalQuestions are the questions of testdata/retrieval: answerable
// ones name the chunk holding the answer and the fact the answer states;
// the unanswerable ones are about what no section says.
type retrievalQuestions struct {
	Answerable []struct {
		Question string `json:"question"`
		Chunk    string `json:"chunk"`
		Fact     string `json:"fact"`
	} `json:"answerable"`
	Unanswerable []string `json:"unanswerable"`
}

func loadRetrievalFixture(t *testing.T) (Corpus, retrievalQuestions) {
	t.Helper()
	c, err := LoadCorpus("testdata/retrieval/corpus.json")
	require.NoError(t, err)
	b, err := os.ReadFile("testdata/retrieval/questions.json")
	require.NoError(t, err)
	var qs retrievalQuestions
	require.NoError(t, json.Unmarshal(b, &qs))
	require.NotEmpty(t, qs.Answerable)
	require.NotEmpty(t, qs.Unanswerable)
	for _, q := range qs.Answerable {
		e, ok := c.Entry(q.Chunk)
		require.True(t, ok, "question %q names chunk %q", q.Question, q.Chunk)
		require.Contains(t, e.Text, q.Fact, "question %q", q.Question)
	}
	return c, qs
}

// hitRates returns, for k = 1..3, the share of questions whose chunk is
// among the top k retrieved.
func hitRates(t *testing.T, p *Pipeline, qs retrievalQuestions) [3]float64 {
	t.Helper()
	var hits [3]int
	for _, q := range qs.Answerable {
		chunks, err := p.retrieve(context.Background(), q.Question, 3, nil)
		require.NoError(t, err)
		at := slices.IndexFunc(chunks, func(c Chunk) bool { return c.ID == q.Chunk })
		for k := range hits {
			if at >= 0 && at <= k {
				hits[k]++
			}
		}
	}
	var out [3]float64
	for k, h := range hits {
		out[k] = float64(h) / float64(len(qs.Answerable))
	}
	return out
}

// TestHybridBeatsVector measures hit rate at 1, 2 and 3, vector-only
// against hybrid, on the same questions over testdata/retrieval (sections
// of several topics sharing vocabulary and numbers, questions phrased as
// readers ask them). Hybrid is DefaultRetrievalForDocs because it is at
// least as good at every k here.
func TestHybridBeatsVector(t *testing.T) {
	c, qs := loadRetrievalFixture(t)
	emb := hashembed.New(0)
	idx, err := BuildIndex(context.Background(), c, emb)
	require.NoError(t, err)
	rates := map[string][3]float64{}
	for _, mode := range []string{RetrievalVector, RetrievalHybrid} {
		p, err := New(c, idx, "test", emb, NewExtractive(0), Options{Retrieval: mode})
		require.NoError(t, err)
		rates[mode] = hitRates(t, p, qs)
		t.Logf("%-6s hit@1 %.3f  hit@2 %.3f  hit@3 %.3f  (%d questions, %d chunks)", mode, rates[mode][0], rates[mode][1], rates[mode][2], len(qs.Answerable), len(c.Entries))
	}
	for k := range 3 {
		require.GreaterOrEqual(t, rates[RetrievalHybrid][k], rates[RetrievalVector][k], "hybrid below vector at hit@%d", k+1)
	}
	require.GreaterOrEqual(t, rates[RetrievalHybrid][2], 0.9, "hybrid hit@3 floor")
	require.GreaterOrEqual(t, rates[RetrievalHybrid][0], 0.75, "hybrid hit@1 floor")
	require.Equal(t, RetrievalHybrid, DefaultRetrievalForDocs)
}

// TestExtractiveAnswersAndAbstains measures the offline generator over
// the hybrid top-3 of testdata/retrieval: the share of answerable
// questions answered with their fact, and the share of unanswerable ones
// abstained.
func TestExtractiveAnswersAndAbstains(t *testing.T) {
	c, qs := loadRetrievalFixture(t)
	p, err := Build(context.Background(), c, hashembed.New(0), NewExtractive(0), Options{Retrieval: RetrievalHybrid, TopK: 3})
	require.NoError(t, err)
	answered := 0
	for _, q := range qs.Answerable {
		rec, err := p.Ask(context.Background(), q.Question)
		require.NoError(t, err)
		if strings.Contains(rec.Answer, q.Fact) {
			answered++
		} else {
			t.Logf("not answered: %q -> %q", q.Question, rec.Answer)
		}
	}
	abstained := 0
	for _, q := range qs.Unanswerable {
		rec, err := p.Ask(context.Background(), q)
		require.NoError(t, err)
		if rec.Answer == Abstention {
			abstained++
		} else {
			t.Logf("answered unanswerable: %q -> %q", q, rec.Answer)
		}
	}
	ans := float64(answered) / float64(len(qs.Answerable))
	abs := float64(abstained) / float64(len(qs.Unanswerable))
	t.Logf("answered %d/%d (%.3f) answerable, abstained on %d/%d (%.3f) unanswerable", answered, len(qs.Answerable), ans, abstained, len(qs.Unanswerable), abs)
	require.GreaterOrEqual(t, ans, 0.8, "answerable questions answered with their fact")
	require.GreaterOrEqual(t, abs, 0.75, "unanswerable questions abstained")
}

// TestExtractiveAmountOfSubject: on a policy corpus with a subject field,
// a question asking only how long (how many, ...) its subject is, is
// answered by the chunk stating a number, and abstained when the chunk
// states none or the subject is not in the context.
func TestExtractiveAmountOfSubject(t *testing.T) {
	policy := func(id, subject, text string) Chunk {
		return Chunk{ID: id, Text: text, Metadata: map[string]any{"doc": "POLICY-7", "subject": subject}}
	}
	chunks := []Chunk{
		policy("parental", "parental leave", "Parental leave is 16 weeks at full pay. It is taken within a year of the birth."),
		policy("annual", "annual leave", "Annual leave is 25 days a year, booked in the HR portal."),
		policy("sick", "sick leave", "Sick leave is paid from the first day of illness."),
		policy("remote", "remote work", "Remote work is allowed two days a week with the manager's consent."),
		policy("expenses", "expenses", "Expenses are claimed within 30 days with a receipt."),
	}
	g := NewExtractive(0)
	ask := func(q string, cs ...Chunk) string {
		t.Helper()
		a, err := g.Generate(context.Background(), Request{Question: q, Chunks: cs, SourceField: "doc", SubjectField: "subject"})
		require.NoError(t, err)
		return a
	}
	a := ask("How long is parental leave?", chunks...)
	require.Contains(t, a, "16 weeks")
	require.Contains(t, a, "[parental]")
	require.NotContains(t, a, "HR portal", "only the sentences stating the amount of the subject")
	require.Contains(t, ask("How many days of annual leave do I get?", chunks[1], chunks[0]), "25 days")
	require.Equal(t, Abstention, ask("How long is sick leave?", chunks...), "the sick-leave chunk states no duration")
	require.Equal(t, Abstention, ask("How long is sabbatical leave?", chunks...), "no chunk is about sabbaticals")
}

// TestBM25AndFusion: BM25 ranks the chunk holding a rare query term first
// (its IDF outweighs a common term's counts), and hybrid scores are
// reciprocal-rank-fusion sums, at most 2/(RRFK+1).
func TestBM25AndFusion(t *testing.T) {
	b := newBM25([]string{
		"leave leave leave leave policy",
		"sabbatical leave is granted after five years",
		"leave requests go to the manager",
	})
	require.Equal(t, []int{1, 0, 2}, b.rank("sabbatical leave", nil, 10))
	require.Equal(t, []int{0, 2}, b.rank("sabbatical leave", map[int]bool{0: true, 2: true}, 10), "restricted to the allowed rows")
	require.Equal(t, []int{1}, b.rank("sabbatical leave", nil, 1))
	require.Empty(t, b.rank("gym", nil, 10))

	c, _ := loadRetrievalFixture(t)
	p, err := Build(context.Background(), c, hashembed.New(0), NewExtractive(0), Options{Retrieval: RetrievalHybrid})
	require.NoError(t, err)
	rec, err := p.AskWith(context.Background(), "How many parking spaces are there?", AskOptions{TopK: 5})
	require.NoError(t, err)
	require.Equal(t, RetrievalHybrid, rec.Retrieval)
	require.Equal(t, "office-parking", rec.RetrievedIDs[0])
	require.InDelta(t, 2.0/(RRFK+1), rec.Chunks[0].Score, 1e-12, "first in both rankings")
	for _, ch := range rec.Chunks {
		require.Greater(t, ch.Score, 0.0)
		require.LessOrEqual(t, ch.Score, 2.0/(RRFK+1))
	}
}

// TestFilter: a filter restricts both rankings to the matching chunks (a
// string field exactly, an array field by any element), keys are ANDed,
// and a key no chunk has, or a filter nothing matches, is ErrFilter.
func TestFilter(t *testing.T) {
	c, _ := loadRetrievalFixture(t)
	for _, mode := range []string{RetrievalVector, RetrievalHybrid} {
		p, err := Build(context.Background(), c, hashembed.New(0), NewExtractive(0), Options{Retrieval: mode})
		require.NoError(t, err)
		ask := func(f Filter, topK int) (Record, error) {
			return p.AskWith(context.Background(), "How long do the batteries last?", AskOptions{TopK: topK, Filter: f})
		}
		rec, err := ask(Filter{"source": "manual/thermostat.md"}, 20)
		require.NoError(t, err, mode)
		require.Len(t, rec.Chunks, 4, mode)
		require.Equal(t, "thermo-battery", rec.RetrievedIDs[0], mode)
		for _, ch := range rec.Chunks {
			require.Equal(t, "manual/thermostat.md", ch.Metadata["source"], mode)
		}
		rec, err = ask(Filter{"headings": "Battery"}, 20)
		require.NoError(t, err, mode)
		require.ElementsMatch(t, []string{"lock-battery", "thermo-battery"}, rec.RetrievedIDs, mode)
		rec, err = ask(Filter{"headings": "Battery", "source": "manual/lock.md"}, 20)
		require.NoError(t, err, mode)
		require.Equal(t, []string{"lock-battery"}, rec.RetrievedIDs, mode)
		require.Equal(t, Filter{"headings": "Battery", "source": "manual/lock.md"}, rec.Filter)

		_, err = ask(Filter{"colour": "red"}, 2)
		require.ErrorIs(t, err, ErrFilter)
		require.ErrorContains(t, err, `key "colour"`)
		_, err = ask(Filter{"source": "manual/nope.md"}, 2)
		require.ErrorIs(t, err, ErrFilter)
		require.ErrorContains(t, err, "no chunk matches source=manual/nope.md")
	}
}

// TestStoredRetrieval: OpenStored ranks by the retrieval the generation
// records ("" is vector), and refuses one it does not know.
func TestStoredRetrieval(t *testing.T) {
	file, err := os.ReadFile("testdata/retrieval/corpus.json")
	require.NoError(t, err)
	c, err := ParseCorpus(file)
	require.NoError(t, err)
	emb := hashembed.New(0)
	store := index.NewStore(t.TempDir(), index.StoreOptions{})
	for _, tc := range []struct{ stored, want, err string }{
		{"", RetrievalVector, ""},
		{RetrievalVector, RetrievalVector, ""},
		{RetrievalHybrid, RetrievalHybrid, ""},
		{"bm42", "", `records retrieval "bm42", want vector or hybrid`},
	} {
		_, _, err := BuildGeneration(context.Background(), store, c, emb, BuildOptions{Retrieval: tc.stored}, entriesOf(c), time.Now())
		require.NoError(t, err)
		p, err := OpenStored(store, "active", Providers{}, NewExtractive(0), Options{})
		if tc.err != "" {
			require.ErrorIs(t, err, index.ErrCorrupt)
			require.ErrorContains(t, err, tc.err)
			_, err = Open(store, c, emb, NewExtractive(0), Options{})
			require.ErrorIs(t, err, index.ErrCorrupt)
			continue
		}
		require.NoError(t, err)
		rec, err := p.Ask(context.Background(), "How many parking spaces are there?")
		require.NoError(t, err)
		require.Equal(t, tc.want, rec.Retrieval)
		p, err = Open(store, c, emb, NewExtractive(0), Options{Retrieval: RetrievalHybrid})
		require.NoError(t, err)
		rec, err = p.Ask(context.Background(), "How many parking spaces are there?")
		require.NoError(t, err)
		require.Equal(t, tc.want, rec.Retrieval, "Open honours the generation's retrieval")
	}
	idx, err := BuildIndex(context.Background(), c, emb)
	require.NoError(t, err)
	_, err = New(c, idx, "x", emb, NewExtractive(0), Options{Retrieval: "bm42"})
	require.ErrorContains(t, err, `retrieval "bm42": want vector or hybrid`)
	r, err := ResolveRetrieval("", true)
	require.NoError(t, err)
	require.Equal(t, DefaultRetrievalForDocs, r)
	r, err = ResolveRetrieval("", false)
	require.NoError(t, err)
	require.Equal(t, RetrievalVector, r)
}

// TestHybridConcurrentAsks: one hybrid pipeline answers concurrent asks,
// filtered or not, exactly as it answers them one at a time (run with
// -race: retrieval shares only read-only state).
func TestHybridConcurrentAsks(t *testing.T) {
	c, qs := loadRetrievalFixture(t)
	p, err := Build(context.Background(), c, hashembed.New(0), NewExtractive(0), Options{Retrieval: RetrievalHybrid})
	require.NoError(t, err)
	opts := func(i int) AskOptions {
		if i%2 == 0 {
			return AskOptions{TopK: 3}
		}
		return AskOptions{TopK: 2, Filter: Filter{"source": c.Source(c.Entries[i%len(c.Entries)])}}
	}
	want := make([]Record, len(qs.Answerable))
	for i, q := range qs.Answerable {
		want[i], err = p.AskWith(context.Background(), q.Question, opts(i))
		require.NoError(t, err)
	}
	have := make([]Record, len(qs.Answerable))
	errs := make([]error, len(qs.Answerable))
	var wg sync.WaitGroup
	for i, q := range qs.Answerable {
		wg.Go(func() { have[i], errs[i] = p.AskWith(context.Background(), q.Question, opts(i)) })
	}
	wg.Wait()
	for i := range want {
		require.NoError(t, errs[i])
		require.Equal(t, want[i], have[i], "question %d", i)
	}
}

// TestHeadingsAreSearched: a chunk cut from the middle of a section is
// found by the words of its section's titles (its "headings" metadata),
// with either retrieval, while what is cited and generated from stays the
// chunk's own text; a corpus without headings searches its texts alone.
func TestHeadingsAreSearched(t *testing.T) {
	entry := func(id, text string, headings ...any) string {
		b, err := json.Marshal(map[string]any{"id": id, "text": text, "source": "manual.md", "headings": headings})
		require.NoError(t, err)
		return string(b)
	}
	corpus, err := ParseCorpus([]byte(`{"id": "h", "label_fields": ["source"], "source_field": "source", "entries": [` + strings.Join([]string{
		entry("rotation-2", "Each grant carries a number that only grows, checked by every writer before it writes.", "Locks", "Fencing tokens"),
		entry("rotation-1", "Writers hold a grant for a number of seconds and renew it before it runs out.", "Locks", "Grants"),
		entry("backup-1", "Snapshots are written to the bucket every hour and kept for a week.", "Operations", "Backups"),
	}, ",") + `]}`))
	require.NoError(t, err)
	texts := corpus.SearchTexts()
	require.Equal(t, "Locks / Fencing tokens\n"+corpus.Entries[0].Text, texts[0])
	for _, mode := range []string{RetrievalVector, RetrievalHybrid} {
		p, err := Build(context.Background(), corpus, hashembed.New(0), NewExtractive(0), Options{Retrieval: mode, TopK: 1})
		require.NoError(t, err)
		rec, err := p.Ask(context.Background(), "What are fencing tokens for?")
		require.NoError(t, err)
		require.Equal(t, []string{"rotation-2"}, rec.RetrievedIDs, mode)
		require.Equal(t, corpus.Entries[0].Text, rec.Chunks[0].Text, "the cited text is the chunk's own")
		if mode == RetrievalHybrid {
			lex := p.bm25.rank("fencing tokens", nil, 3)
			require.NotEmpty(t, lex, "BM25 reads the headings")
			require.Equal(t, "rotation-2", p.idx.ID(lex[0]))
		}
	}
	plain, err := ParseCorpus([]byte(`{"id": "p", "label_fields": ["source"], "source_field": "source", "entries": [` +
		`{"id": "a", "text": "alpha", "source": "a.md"}, {"id": "b", "text": "beta", "source": "b.md", "headings": []}]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"alpha", "beta"}, plain.SearchTexts())
}
