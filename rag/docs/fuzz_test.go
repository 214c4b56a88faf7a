package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSplit: for any UTF-8 input and limits, Split never panics, every
// span lies in the input, Markdown and text chunks are exactly their
// spans' bytes and within the size limit, and ids are unique.
func FuzzSplit(f *testing.F) {
	for _, name := range []string{"locks/install.md", "leases.markdown", "faq.html", "changelog.txt"} {
		b, err := os.ReadFile(filepath.Join(manual, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), uint8(filepath.Ext(name)[1]), uint16(30), uint16(6))
	}
	f.Add("# A\n\n## B\n\n- x. y! z?\n- \u2019q.\u201d r\n\n```\n```\n***\n", uint8('m'), uint16(8), uint16(7))
	f.Add("<h1>T</h1><p>a<br>b</p><pre>  x\n  y</pre><script>s</script>", uint8('h'), uint16(8), uint16(0))
	f.Fuzz(func(t *testing.T, src string, kind uint8, tokens, overlap uint16) {
		if !utf8.ValidString(src) {
			return
		}
		name := map[uint8]string{'m': "f.md", 'h': "f.html", 't': "f.txt"}[kind%128]
		if name == "" {
			name = "f.md"
		}
		opts := Options{ChunkTokens: 8 + int(tokens)%400}
		opts.ChunkOverlap = int(overlap) % opts.ChunkTokens
		cs, err := Split(name, []byte(src), opts)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, c := range cs {
			if c.Span[0] < 0 || c.Span[0] >= c.Span[1] || c.Span[1] > len(src) {
				t.Fatalf("%s: span %v outside %d bytes", c.ID, c.Span, len(src))
			}
			if seen[c.ID] || strings.ContainsAny(c.ID, "[]' \t\n") {
				t.Fatalf("id %q repeated or not citable", c.ID)
			}
			seen[c.ID] = true
			if strings.HasSuffix(name, ".html") {
				continue
			}
			if src[c.Span[0]:c.Span[1]] != c.Text {
				t.Fatalf("%s: text %q is not its span %q", c.ID, c.Text, src[c.Span[0]:c.Span[1]])
			}
			if len(c.Text) > opts.ChunkTokens*BytesPerToken {
				t.Fatalf("%s: %d bytes over the limit %d", c.ID, len(c.Text), opts.ChunkTokens*BytesPerToken)
			}
		}
	})
}
