package golden_test

import (
	"os"
	"testing"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// FuzzParseGolden: the golden parser never panics, and an accepted
// answerable case always requires its own citation.
func FuzzParseGolden(f *testing.F) {
	b, err := os.ReadFile("../../testdata/grimoire/golden.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		cases, err := golden.Parse(b)
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
	es, err := golden.LoadEvalSet("../../testdata/grimoire/evalset.json")
	if err != nil {
		f.Fatal(err)
	}
	k := golden.NewChecker(es.Corpus)
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
