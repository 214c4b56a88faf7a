package golden_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/docs"
	"github.com/verdryx/verdryx/rag/golden"
)

// bracketsFolder is a Markdown folder full of brackets that are text:
// inline and reference links, footnotes, fenced and indented code with
// array indexing, console output ([unoptimized + debuginfo]), log lines
// ([warn], [2/5]) and captions.
const bracketsFolder = "../docs/testdata/brackets"

func loadBrackets(t *testing.T) rag.Corpus {
	t.Helper()
	w, err := docs.NewWalker(bracketsFolder, docs.DefaultOptions())
	require.NoError(t, err)
	c := w.Schema()
	_, err = w.Walk(func(e rag.Entry) error {
		c.Entries = append(c.Entries, e)
		return nil
	})
	require.NoError(t, err)
	return c
}

// citationFailures returns the failed citation checks of answer graded
// against gc over rec.
func citationFailures(k *golden.Checker, gc golden.Case, rec rag.Record, answer string) []string {
	rec.Answer = answer
	var out []string
	for _, ch := range k.Check(gc, rec) {
		if !ch.OK && (ch.Name == golden.CheckCitationKnown || ch.Name == golden.CheckCitationRetrieved) {
			out = append(out, ch.Name+" ("+ch.Detail+")")
		}
	}
	return out
}

// TestMarkdownBracketsAreNotCitations: over a Markdown folder whose
// chunks hold brackets of every kind, every drafted case validates (its
// chunk's own text, brackets and all, passes every check) and offers
// only numbers of its prose as must_contain candidates, the offline
// pipeline's extractive answers never fail a citation check, and content
// brackets stay text the literal checks read. Made-up citations still
// fail: an id of the corpus's form, a variant of a real id, a made-up id
// beside a real one, and a real chunk that was not retrieved.
func TestMarkdownBracketsAreNotCitations(t *testing.T) {
	c := loadBrackets(t)
	bracketed := 0
	for _, e := range c.Entries {
		if strings.Contains(e.Text, "[") {
			bracketed++
		}
	}
	require.Equal(t, len(c.Entries), bracketed, "every chunk of the fixture holds brackets")

	cases, err := golden.Draft(c, c.IDs())
	require.NoError(t, err)
	var candidates []string
	for i := range cases {
		cases[i].Question = "What does " + cases[i].CaseID + " say?"
		candidates = append(candidates, cases[i].MustContain[2:]...)
	}
	require.NoError(t, golden.Validate(cases, c), "each chunk's own text passes its drafted case")
	// Candidates come from prose sentences only: not from console output,
	// fenced or indented code, identifiers, or listing and figure captions.
	for _, prose := range []string{"40 seconds", "3 minutes", "15 seconds", "90 seconds", "10 minutes", "2 hours", "5 times", "250 milliseconds"} {
		assert.Contains(t, candidates, prose)
	}
	for _, notProse := range []string{"0.33 secs", "THREE_HOURS", "12 steps", "9 parts", "250 ms", "500 ms", "5 tries", "14.2 bar", "6 gauges"} {
		assert.NotContains(t, candidates, notProse)
	}

	// The offline pipeline answers a question made of each chunk's own
	// words; whatever it answers, its brackets are no citation failure.
	p, err := rag.Build(context.Background(), c, hashembed.New(0), rag.NewExtractive(0), rag.Options{TopK: 2, Retrieval: rag.RetrievalHybrid})
	require.NoError(t, err)
	k := golden.NewChecker(c)
	answered := 0
	for _, gc := range cases {
		e, _ := c.Entry(gc.CaseID)
		rec, err := p.Ask(context.Background(), "What about "+strings.Join(strings.Fields(e.Text)[:12], " ")+"?")
		require.NoError(t, err)
		if rec.Answer == rag.Abstention {
			continue
		}
		answered++
		require.Contains(t, rec.Answer, "[", "the answer quotes brackets of the chunk")
		assert.Empty(t, citationFailures(k, gc, rec, rec.Answer), "%s: %s", gc.CaseID, rec.Answer)
	}
	assert.GreaterOrEqual(t, answered, len(cases)/2, "most questions are answered")

	// One case, answered with its chunk's text.
	i := slices.IndexFunc(cases, func(gc golden.Case) bool {
		e, _ := c.Entry(gc.CaseID)
		return strings.Contains(e.Text, "[unoptimized + debuginfo]")
	})
	require.GreaterOrEqual(t, i, 0)
	gc := cases[i]
	ref := golden.ReferenceAnswer(gc, c)
	rec := golden.EvidenceRecord(gc, c, ref)
	require.Empty(t, citationFailures(k, gc, rec, ref))
	src := gc.ExpectedSourceID

	// Content brackets are prose: a must_contain phrase inside them is found.
	inside := gc
	inside.MustContain = append(slices.Clone(gc.MustContain), "unoptimized debuginfo")
	assert.NotContains(t, failedChecks(t, inside, rec, c, ref), golden.CheckMustContain, "text inside content brackets is read")

	var other string
	for _, e := range c.Entries {
		if !slices.Contains(rec.RetrievedIDs, e.ID) {
			other = e.ID
			break
		}
	}
	require.NotEmpty(t, other)
	for _, tc := range []struct {
		name, answer, check string
	}{
		{"made-up id of the corpus's form", ref + " See also [" + src + "#made-up-section-9].", golden.CheckCitationKnown},
		{"made-up variant of the real id", ref + " See also [" + gc.ExpectedRetrievedID + "-appendix].", golden.CheckCitationKnown},
		{"made-up id beside the real one", ref + " See also [" + gc.ExpectedRetrievedID + ", notes.md#x-1].", golden.CheckCitationKnown},
		{"made-up id with a zero-width space", ref + " See also [" + src + "#made\u200bup-2].", golden.CheckCitationKnown},
		{"real chunk not retrieved", ref + " See also [" + other + "].", golden.CheckCitationRetrieved},
	} {
		assert.Contains(t, failedChecks(t, gc, rec, c, tc.answer), tc.check, tc.name)
	}
	for _, tc := range []struct{ name, answer string }{
		{"a link's text and label quoted", "The widget compiler is described in [the compiler guide][compiler] and in the [reference manual](https://example.com/ref) " + rag.Cite(gc.ExpectedRetrievedID) + " (source: " + src + ")."},
		{"a footnote and an index quoted", "A part is read as in parts[0] and [^speed] " + rag.Cite(gc.ExpectedRetrievedID) + " (source: " + src + ")."},
		{"double brackets around the id", ref + " [" + rag.Cite(gc.ExpectedRetrievedID) + "]"},
	} {
		assert.Empty(t, citationFailures(k, gc, rec, tc.answer), tc.name)
	}
}

// TestIDFormOfOtherCorpora: the form is learnt from the corpus's ids, so
// in a corpus of short ids ("c1") a bracketed word is text and a made-up
// id of that form a citation, unless the corpus's texts write it in
// brackets themselves ("[v2]" on a panel).
func TestIDFormOfOtherCorpora(t *testing.T) {
	c, err := rag.ParseCorpus([]byte(`{"id": "k", "label_fields": ["source"], "source_field": "source", "entries": [
		{"id": "c1", "text": "Set the valve to 3 bar. The panel shows [ok] and [v2] when it holds.", "source": "m.md"},
		{"id": "c2", "text": "Drain the tank weekly.", "source": "m.md"}]}`))
	require.NoError(t, err)
	cases, err := golden.Draft(c, []string{"c1"})
	require.NoError(t, err)
	cases[0].Question = "What pressure?"
	require.NoError(t, golden.Validate(cases, c))
	gc := cases[0]
	rec := golden.EvidenceRecord(gc, c, "")
	k := golden.NewChecker(c)
	ok := "Set the valve to 3 bar [c1] (source: m.md)."
	assert.Empty(t, citationFailures(k, gc, rec, ok+" The panel shows [ok] and [v2] and [note] and [see 2]."))
	assert.NotEmpty(t, citationFailures(k, gc, rec, ok+" See [c9]."), "c9 has the form of an id")
	assert.NotEmpty(t, citationFailures(k, gc, rec, ok+" The panel shows [v3]."), "v3 has the form of an id and no text writes it")
	assert.NotEmpty(t, citationFailures(k, gc, rec, ok+" See [c2]."), "c2 was not retrieved")
}
