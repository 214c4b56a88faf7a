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
