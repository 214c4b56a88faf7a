package rag_test

import (
	"os"
	"strings"
	"testing"

	"github.com/verdryx/verdryx/rag"
)

// FuzzParseCorpus feeds arbitrary bytes to the corpus parser: it must
// never panic, and an accepted corpus must satisfy the label contract.
func FuzzParseCorpus(f *testing.F) {
	for _, p := range []string{"../testdata/grimoire/corpus.json", "../testdata/lighthouse/corpus.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"label_fields":["s"],"source_field":"s","entries":[{"id":"a","text":"t","s":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := rag.ParseCorpus(b)
		if err != nil {
			return
		}
		for _, e := range c.Entries {
			label := c.Label(e)
			if !strings.HasPrefix(label, "[CONTEXT id="+e.ID+" ") || strings.Count(label, "]") != 1 || strings.Contains(label, "\n") {
				t.Fatalf("malformed label %q", label)
			}
			_ = c.Digest()
		}
	})
}

// FuzzParseGolden: the golden parser never panics, and an accepted
// answerable case always requires its own citation.
func FuzzParseGolden(f *testing.F) {
	b, err := os.ReadFile("../testdata/grimoire/golden.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		cases, err := rag.ParseGolden(b)
		if err != nil {
			return
		}
		for _, gc := range cases {
			if gc.ExpectAbstention {
				continue
			}
			found := false
			for _, s := range gc.MustContain {
				found = found || s == rag.Cite(gc.ExpectedRetrievedID)
			}
			if !found {
				t.Fatalf("case %q accepted without its citation", gc.CaseID)
			}
		}
	})
}

// FuzzCheckGolden grades arbitrary answers: the checker (match keys,
// quantity parsing, sentence and citation spans) must never panic.
func FuzzCheckGolden(f *testing.F) {
	es, err := rag.LoadEvalSet("../testdata/grimoire/evalset.json")
	if err != nil {
		f.Fatal(err)
	}
	k := rag.NewChecker(es.Corpus)
	gc := es.Cases[0]
	rec := rag.Record{RetrievedIDs: gc.ExpectedRankedIDs, Answer: gc.ExpectedAnswer}
	for _, s := range []string{gc.ExpectedAnswer, "3-dram [x] 1,000 a dozen half a pint [", "З drams ３ ½ 1⁄2 M2 A-7 ]][[", "un-", "never"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		rec.Answer = answer
		_ = k.Check(gc, rec)
	})
}
