// Package mdgen generates Markdown documents for benchmarks: titled
// sections of pseudo-word paragraphs, lists and code blocks, the same
// bytes for the same seed.
package mdgen

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// syllables make the generator's words.
const syllables = "ka lo mi ren tas vel or un dri fe gal hos ith jun qua sor bel cre dun ep"

// vocabulary returns n pseudo-words of two to four syllables.
func vocabulary(r *rand.Rand, n int) []string {
	syl := strings.Fields(syllables)
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		out[i] = b.String()
	}
	return out
}

// writer writes one generated Markdown document.
type writer struct {
	r     *rand.Rand
	words []string
	w     *bufio.Writer
	n     int64
}

func (g *writer) printf(format string, args ...any) {
	n, _ := fmt.Fprintf(g.w, format, args...)
	g.n += int64(n)
}

func (g *writer) sentence() string {
	k := 6 + g.r.IntN(16)
	ws := make([]string, k)
	for i := range ws {
		ws[i] = g.words[g.r.IntN(len(g.words))]
		if g.r.IntN(12) == 0 {
			ws[i] = fmt.Sprintf("%d", g.r.IntN(10000))
		}
	}
	if g.r.IntN(5) == 0 {
		ws[g.r.IntN(k)] = "**" + ws[g.r.IntN(k)] + "**"
	}
	s := strings.Join(ws, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func (g *writer) paragraph() {
	n := 2 + g.r.IntN(6)
	for i := range n {
		if i > 0 {
			g.printf(" ")
		}
		g.printf("%s", g.sentence())
	}
	g.printf("\n\n")
}

func (g *writer) title() string {
	k := 2 + g.r.IntN(4)
	ws := make([]string, k)
	for i := range ws {
		ws[i] = g.words[g.r.IntN(len(g.words))]
	}
	return strings.ToUpper(ws[0][:1]) + strings.Join(ws, " ")[1:]
}

// document writes sections until at least size bytes are written: a
// title, level-2 and level-3 sections of paragraphs, lists and code
// blocks.
func (g *writer) document(size int64) {
	g.printf("# %s\n\n", g.title())
	for g.n < size {
		level := 2 + g.r.IntN(2)
		g.printf("%s %s\n\n", strings.Repeat("#", level), g.title())
		for range 1 + g.r.IntN(5) {
			switch g.r.IntN(8) {
			case 0:
				for range 2 + g.r.IntN(5) {
					g.printf("- %s\n", g.sentence())
				}
				g.printf("\n")
			case 1:
				g.printf("```\n%s = %d\n%s(%s)\n```\n\n", g.words[g.r.IntN(len(g.words))], g.r.IntN(1000), g.words[g.r.IntN(len(g.words))], g.words[g.r.IntN(len(g.words))])
			default:
				g.paragraph()
			}
		}
	}
}

// Generate writes files Markdown documents of about total/files bytes
// each under dir (created), nested in folders of 100, deterministically
// from seed. It returns the bytes written.
func Generate(dir string, total int64, files int, seed uint64) (int64, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	words := vocabulary(r, 2000)
	per := max(total/int64(files), 1)
	var written int64
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("part-%03d", i/100))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return written, err
		}
		f, err := os.Create(filepath.Join(sub, fmt.Sprintf("doc-%05d.md", i)))
		if err != nil {
			return written, err
		}
		g := &writer{r: r, words: words, w: bufio.NewWriterSize(f, 1<<16)}
		g.document(per)
		err = g.w.Flush()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return written, fmt.Errorf("generate %s: %w", f.Name(), err)
		}
		written += g.n
	}
	return written, nil
}
