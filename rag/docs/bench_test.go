package docs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/verdryx/verdryx/internal/mdgen"
)

// BenchmarkSplitMarkdown parses and chunks one generated Markdown document
// of about 1 MB (sections, paragraphs, lists, code blocks) with the
// default options: the per-byte cost of index build --docs before
// embedding.
func BenchmarkSplitMarkdown(b *testing.B) {
	dir := b.TempDir()
	if _, err := mdgen.Generate(dir, 1e6, 1, 1); err != nil {
		b.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "part-000", "doc-00000.md"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Split("doc.md", src, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad reads a generated folder of 40 documents of 25 kB into a
// corpus: walking, parsing, chunking, encoding and validating the corpus.
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	n, err := mdgen.Generate(dir, 1e6, 40, 2)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := loadDir(dir, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
}
