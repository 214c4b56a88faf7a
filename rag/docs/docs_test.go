package docs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"golang.org/x/net/html"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/rag"
)

const manual = "testdata/manual"

// copyDir copies the regular files of src into a new temporary folder.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	require.NoError(t, err)
	return dst
}

func load(t *testing.T, dir string, opts Options) Result {
	t.Helper()
	res, err := loadDir(dir, opts)
	require.NoError(t, err)
	return res
}

// chunksOf returns the corpus entries of one source.
func chunksOf(res Result, source string) []Chunk {
	var out []Chunk
	for _, e := range res.Corpus.Entries {
		if e.Metadata["source"] != source {
			continue
		}
		c := Chunk{ID: e.ID, Text: e.Text}
		for _, h := range e.Metadata["headings"].([]any) {
			c.Headings = append(c.Headings, h.(string))
		}
		span := e.Metadata["span"].([]any)
		for i := range 2 {
			n, err := span[i].(interface{ Int64() (int64, error) }).Int64()
			if err != nil {
				panic(err)
			}
			c.Span[i] = int(n)
		}
		out = append(out, c)
	}
	return out
}

// TestFolderSpansPointAtSourceBytes: every chunk of a Markdown or text
// file is exactly the bytes its span covers; an HTML chunk's words are
// all in the text of the bytes its span covers; every file read gives
// chunks, and script, style, noscript and template text is not among
// them.
func TestFolderSpansPointAtSourceBytes(t *testing.T) {
	for _, tokens := range []int{300, 40, 12} {
		res := load(t, manual, Options{ChunkTokens: tokens, ChunkOverlap: tokens / 4})
		require.Len(t, res.Files, 4)
		for _, f := range res.Files {
			src, err := os.ReadFile(filepath.Join(manual, f.Source))
			require.NoError(t, err)
			cs := chunksOf(res, f.Source)
			require.NotEmpty(t, cs, f.Source)
			require.Equal(t, f.Chunks, len(cs))
			for _, c := range cs {
				require.True(t, 0 <= c.Span[0] && c.Span[0] < c.Span[1] && c.Span[1] <= len(src), "%s span %v", c.ID, c.Span)
				got := string(src[c.Span[0]:c.Span[1]])
				if f.Kind != "html" {
					assert.Equal(t, got, c.Text, "%s (tokens %d)", c.ID, tokens)
					assert.LessOrEqual(t, len(c.Text), tokens*BytesPerToken, c.ID)
					continue
				}
				words := map[string]bool{}
				for _, w := range hashembed.Tokenize(html.UnescapeString(got)) {
					words[w] = true
				}
				for _, w := range hashembed.Tokenize(c.Text) {
					assert.True(t, words[w], "%s: word %q is not in its span %q", c.ID, w, got)
				}
				for _, gone := range []string{"secret", "serif", "chart", "template", "Locks FAQ"} {
					assert.NotContains(t, c.Text, gone, c.ID)
				}
			}
		}
	}
}

// mdHeadingStarts returns the offsets of the lines starting top-level
// headings, as goldmark parses src.
func mdHeadingStarts(src []byte) []int {
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	var out []int
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if h, ok := n.(*ast.Heading); ok && h.Lines().Len() > 0 {
			out = append(out, bytes.LastIndexByte(src[:h.Lines().At(0).Start], '\n')+1)
		}
	}
	return out
}

// TestChunksNeverCrossHeadings: no chunk's span holds the start of a
// heading past its own first byte (Markdown by goldmark's headings, HTML
// by h1..h6 tags), and each chunk's headings are the path to its section.
func TestChunksNeverCrossHeadings(t *testing.T) {
	res := load(t, manual, Options{ChunkTokens: 300, ChunkOverlap: 60})
	src, err := os.ReadFile(filepath.Join(manual, "locks/install.md"))
	require.NoError(t, err)
	starts := mdHeadingStarts(src)
	require.Len(t, starts, 5)
	cs := chunksOf(res, "locks/install.md")
	for _, c := range cs {
		for _, h := range starts {
			assert.False(t, c.Span[0] < h && h < c.Span[1], "%s %v crosses the heading at %d", c.ID, c.Span, h)
		}
	}
	paths := map[string]bool{}
	for _, c := range cs {
		paths[strings.Join(c.Headings, " > ")] = true
	}
	assert.Equal(t, map[string]bool{
		"Installing the lock service":                               true,
		"Installing the lock service > Requirements":                true,
		"Installing the lock service > Install on Linux":            true,
		"Installing the lock service > Install on Linux > Upgrades": true,
		"Installing the lock service > Install on Windows":          true,
	}, paths)

	faq, err := os.ReadFile(filepath.Join(manual, "faq.html"))
	require.NoError(t, err)
	for _, c := range chunksOf(res, "faq.html") {
		inner := strings.ToLower(string(faq[c.Span[0]+1 : c.Span[1]]))
		for l := '1'; l <= '6'; l++ {
			assert.NotContains(t, inner, "<h"+string(l), "%s crosses a heading", c.ID)
		}
		require.NotEmpty(t, c.Headings, c.ID)
		assert.Equal(t, "Frequently asked questions", c.Headings[0])
	}
}

// TestLongParagraphSplitsAtSentenceEnds: a paragraph longer than the
// chunk limit is cut between sentences, every piece within the limit,
// consecutive pieces sharing whole sentences as overlap; a sentence
// longer than the limit is cut between words.
func TestLongParagraphSplitsAtSentenceEnds(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("# Title\n\n")
	var sentences []string
	for i := range 30 {
		s := "Sentence number " + itoa(i) + " tells about lease " + itoa(i*7) + "."
		sentences = append(sentences, s)
	}
	sb.WriteString(strings.Join(sentences, " "))
	sb.WriteString("\n")
	src := []byte(sb.String())
	opts := Options{ChunkTokens: 30, ChunkOverlap: 12}
	cs, err := Split("long.md", src, opts)
	require.NoError(t, err)
	require.Greater(t, len(cs), 5)
	isSentence := map[string]bool{}
	for _, s := range sentences {
		isSentence[s] = true
	}
	for i, c := range cs {
		assert.LessOrEqual(t, len(c.Text), 30*BytesPerToken, c.ID)
		assert.Equal(t, string(src[c.Span[0]:c.Span[1]]), c.Text)
		body := strings.TrimPrefix(c.Text, "# Title\n\n")
		for _, s := range strings.SplitAfter(body, ". ") {
			assert.True(t, isSentence[strings.TrimSpace(s)], "chunk %d holds %q, not a whole sentence", i, s)
		}
		if i > 0 {
			prev := cs[i-1]
			assert.Less(t, c.Span[0], prev.Span[1], "chunk %d does not overlap the one before", i)
			assert.Greater(t, c.Span[1], prev.Span[1], "chunk %d adds nothing", i)
		}
	}
	assert.Equal(t, "long.md#title-1", cs[0].ID)
	assert.True(t, strings.HasPrefix(cs[0].Text, "# Title\n\nSentence number 0 "), cs[0].Text)
	assert.True(t, strings.HasSuffix(cs[len(cs)-1].Text, sentences[29]))

	words := strings.Repeat("word ", 100) + "end"
	cs, err = Split("run.txt", []byte(words), Options{ChunkTokens: 10, ChunkOverlap: 0})
	require.NoError(t, err)
	require.Greater(t, len(cs), 5)
	var joined []string
	for _, c := range cs {
		assert.LessOrEqual(t, len(c.Text), 40)
		joined = append(joined, c.Text)
	}
	assert.Equal(t, words, strings.Join(joined, " "), "pieces cut inside a word or lost text")
}

// TestIDsStableUniqueAndCitable: ids are unique, citable as [id], the
// same on a rebuild, and an edit of one section changes only that
// section's chunks (ids and texts elsewhere unchanged).
func TestIDsStableUniqueAndCitable(t *testing.T) {
	dir := copyDir(t, manual)
	opts := Options{ChunkTokens: 60, ChunkOverlap: 10}
	a := load(t, dir, opts)
	b := load(t, dir, opts)
	assert.Equal(t, a.Corpus, b.Corpus)
	seen := map[string]bool{}
	for _, e := range a.Corpus.Entries {
		assert.False(t, seen[e.ID], "repeated id %s", e.ID)
		seen[e.ID] = true
		assert.False(t, strings.ContainsAny(e.ID, "[]' \t\n"), e.ID)
	}
	assert.True(t, seen["locks/install.md#installing-the-lock-service/install-on-linux/upgrades-1"], "ids: %v", a.Corpus.IDs())

	p := filepath.Join(dir, "locks/install.md")
	src, err := os.ReadFile(p)
	require.NoError(t, err)
	edited := bytes.Replace(src, []byte("2 GiB of memory"), []byte("4 GiB of memory"), 1)
	require.NotEqual(t, src, edited)
	require.NoError(t, os.WriteFile(p, edited, 0o644))
	c := load(t, dir, opts)
	before := map[string]string{}
	for _, e := range a.Corpus.Entries {
		before[e.ID] = e.Text
	}
	changed := 0
	for _, e := range c.Corpus.Entries {
		old, ok := before[e.ID]
		require.True(t, ok, "new id %s after editing one section", e.ID)
		if old != e.Text {
			changed++
			assert.Contains(t, e.ID, "/requirements-", "a chunk outside the edited section changed")
		}
	}
	assert.Equal(t, 1, changed)
	assert.Len(t, c.Corpus.Entries, len(a.Corpus.Entries))
}

// TestDuplicateHeadingsAndPaths: sibling sections of one title and two
// paths of one slug still get distinct ids.
func TestDuplicateHeadingsAndPaths(t *testing.T) {
	dir := t.TempDir()
	doc := "# A\n\n## Example\n\nFirst example.\n\n## Example\n\nSecond example.\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x y.md"), []byte(doc), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x-y.md"), []byte(doc), 0o644))
	res := load(t, dir, DefaultOptions())
	assert.Equal(t, []string{"x-y.md#a/example-1", "x-y.md#a/example~2-1", "x-y.md#a/example-1~2", "x-y.md#a/example~2-1~2"}, res.Corpus.IDs())
}

// TestSkippedAndRefused: files of other kinds, symbolic links (to a file
// or a folder, never followed) and hidden folders are listed as skipped;
// a document that is not UTF-8 is refused naming it and the byte.
func TestSkippedAndRefused(t *testing.T) {
	dir := copyDir(t, manual)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.md"), []byte("# Outside\n\nNever read from outside.\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(dir, "link.md")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "linked-dir")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "HEAD.md"), []byte("# hidden\n\nhidden text\n"), 0o644))
	res := load(t, dir, DefaultOptions())
	reasons := map[string]string{}
	for _, s := range res.Skipped {
		reasons[s.Source] = s.Reason
	}
	assert.Equal(t, map[string]string{
		".git":        "hidden directory, not read",
		"diagram.png": "not .md, .markdown, .txt, .html or .htm",
		"metrics.csv": "not .md, .markdown, .txt, .html or .htm",
		"link.md":     "symbolic link, not followed",
		"linked-dir":  "symbolic link, not followed",
	}, reasons)
	for _, e := range res.Corpus.Entries {
		assert.NotContains(t, e.Text, "Outside")
		assert.NotContains(t, e.Text, "hidden")
	}

	bad := append([]byte("# Fine\n\nok "), 0xff, 'x')
	require.NoError(t, os.WriteFile(filepath.Join(dir, "locks", "bad.md"), bad, 0o644))
	_, err := loadDir(dir, DefaultOptions())
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotUTF8), err)
	assert.Contains(t, err.Error(), "locks/bad.md")
	assert.Contains(t, err.Error(), "at byte 11")
}

// TestTextParagraphs: a text file's paragraphs are split at blank lines
// and packed; a small limit puts each in its own chunk.
func TestTextParagraphs(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(manual, "changelog.txt"))
	require.NoError(t, err)
	cs, err := Split("changelog.txt", src, Options{ChunkTokens: 22, ChunkOverlap: 0})
	require.NoError(t, err)
	var texts []string
	for _, c := range cs {
		texts = append(texts, c.Text)
		assert.Empty(t, c.Headings)
	}
	assert.Equal(t, []string{
		"Version 2.4 adds lease renewal batching.\nRenewals of one client share one round trip.",
		"Version 2.3 fixes a leak of expired leases.",
		"Version 2.2 is the first release with fencing tokens.",
	}, texts)
	assert.Equal(t, []string{"changelog.txt#1", "changelog.txt#2", "changelog.txt#3"}, []string{cs[0].ID, cs[1].ID, cs[2].ID})
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{ChunkTokens: 4}, {ChunkTokens: 100, ChunkOverlap: 100}, {ChunkTokens: 100, ChunkOverlap: -1}} {
		_, err := loadDir(manual, o)
		assert.Error(t, err, "%+v", o)
	}
}

// TestCorpusFileRoundTrips: the corpus file a generation of the folder
// records parses to the very corpus Load returns, with the digest the
// generation was built with.
func TestCorpusFileRoundTrips(t *testing.T) {
	res := load(t, manual, Options{ChunkTokens: 40, ChunkOverlap: 8})
	store := index.NewStore(t.TempDir(), index.StoreOptions{})
	each := func(yield func(rag.Entry) error) error {
		for _, e := range res.Corpus.Entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}
	m, _, err := rag.BuildGeneration(context.Background(), store, res.Corpus, hashembed.New(64), rag.BuildOptions{}, each, time.Now())
	require.NoError(t, err)
	_, path, err := store.Generation(m.ID)
	require.NoError(t, err)
	parsed, err := rag.LoadCorpus(path)
	require.NoError(t, err)
	assert.Equal(t, m.CorpusDigest, parsed.Digest())
	assert.Equal(t, res.Corpus, parsed)
	assert.Equal(t, res.Corpus.Digest(), parsed.Digest())
	assert.Equal(t, "docs-manual", parsed.ID)
	assert.Equal(t, []string{"source", "section"}, parsed.LabelFields)
	e, ok := parsed.Entry("faq.html#frequently-asked-questions/how-many-leases-can-one-node-hold-1")
	require.True(t, ok, "ids: %v", parsed.IDs())
	assert.Equal(t, "[CONTEXT id=faq.html#frequently-asked-questions/how-many-leases-can-one-node-hold-1 source='faq.html' section='Frequently asked questions > How many leases can one node hold?']", parsed.Label(e))
}

// TestFrontMatterIsNotChunked: a Markdown file's YAML or TOML front
// matter is skipped, spans stay offsets of the file, and a leading
// thematic break with no closing marker is Markdown.
func TestFrontMatterIsNotChunked(t *testing.T) {
	body := "# Leases\n\nA lease lasts 30 seconds unless renewed.\n"
	for name, fm := range map[string]string{
		"yaml":        "---\ntitle: Leases\ntags:\n  - locks\n\ndraft: false\n---\n",
		"yaml-dots":   "---\ntitle: Leases\n...\n",
		"toml":        "+++\ntitle = \"Leases\"\n+++\n",
		"crlf":        "---\r\ntitle: Leases\r\n---\r\n",
		"bom":         "\uFEFF---\ntitle: Leases\n---\n",
		"empty-block": "---\n---\n",
	} {
		t.Run(name, func(t *testing.T) {
			src := []byte(fm + body)
			cs, err := Split("leases.md", src, DefaultOptions())
			require.NoError(t, err)
			require.Len(t, cs, 1)
			assert.NotContains(t, cs[0].Text, "title")
			assert.NotContains(t, cs[0].Text, "locks")
			assert.Equal(t, []string{"Leases"}, cs[0].Headings)
			assert.Equal(t, cs[0].Text, string(src[cs[0].Span[0]:cs[0].Span[1]]))
			assert.Equal(t, len(fm), cs[0].Span[0])
		})
	}
	t.Run("thematic break", func(t *testing.T) {
		src := []byte("---\n\nAn opening rule, then text that is read.\n")
		cs, err := Split("rule.md", src, DefaultOptions())
		require.NoError(t, err)
		require.Len(t, cs, 1)
		assert.Contains(t, cs[0].Text, "text that is read")
	})
	t.Run("text files keep it", func(t *testing.T) {
		src := []byte("---\ntitle: x\n---\n\nplain words\n")
		cs, err := Split("notes.txt", src, DefaultOptions())
		require.NoError(t, err)
		assert.Contains(t, cs[0].Text, "title: x")
	})
}
