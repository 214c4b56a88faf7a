package docs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigMarkdown writes a document of n sections under nested headings, with
// fenced blocks holding lines that look like headings, and returns it.
func bigMarkdown(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 3))
	words := strings.Fields("lease grant token writer renew expire quorum replica snapshot bucket shard leader follower journal compaction window")
	var b strings.Builder
	b.WriteString("---\ntitle: big\n---\n")
	for i := range n {
		fmt.Fprintf(&b, "%s Section %d\n\n", strings.Repeat("#", 1+i%3), i)
		for p := range 1 + rng.IntN(4) {
			for range 20 + rng.IntN(60) {
				b.WriteString(words[rng.IntN(len(words))] + " ")
			}
			b.WriteString(fmt.Sprintf("ends %d.%d.\n\n", i, p))
		}
		if i%7 == 3 {
			b.WriteString("```sh\n# not a heading\n## nor this\n" + strings.Repeat("echo x\n", rng.IntN(200)) + "```\n\n")
		}
		if i%11 == 5 {
			b.WriteString("~~~~\n# inside a tilde fence\n```\nstill inside\n~~~~\n\n")
		}
	}
	return b.String()
}

// TestLargeDocumentsReadInParts: a document read a part at a time, cut
// before headings outside fences, gives exactly the chunks of reading it
// whole (ids, texts, headings, spans); every part boundary falls on a
// heading line outside a fence.
func TestLargeDocumentsReadInParts(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		src := bigMarkdown(400, seed)
		path := filepath.Join(t.TempDir(), "big.md")
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		opts := DefaultOptions()
		whole, err := Split("big.md", []byte(src), opts)
		require.NoError(t, err)
		var parts []Chunk
		size := 0
		require.NoError(t, readDocument(path, "big.md", opts, 8<<10, func(c Chunk) error {
			parts = append(parts, c)
			return nil
		}, &size))
		require.Equal(t, len(src), size)
		require.Equal(t, whole, parts, "seed %d", seed)
		for _, c := range parts {
			require.Equal(t, src[c.Span[0]:c.Span[1]], c.Text)
		}
		var cuts []int
		f, err := os.Open(path)
		require.NoError(t, err)
		require.NoError(t, readParts(f, 8<<10, func(part []byte, base int) error {
			cuts = append(cuts, base)
			return nil
		}))
		f.Close()
		require.Greater(t, len(cuts), 10, "the document was read in parts")
		for _, c := range cuts[1:] {
			require.True(t, isATXHeading([]byte(src[c:])), "cut at %d: %q", c, src[c:min(c+30, len(src))])
			require.NotContains(t, src[c:c+20], "not a heading")
			require.NotContains(t, src[c:c+25], "inside a tilde fence")
		}
	}
}

// TestLargeTextWithoutHeadingsIsCutAtBlankLines: with no heading to cut
// before, parts end at blank lines (or, failing those, at any line); no
// word is lost and every chunk's span holds its text.
func TestLargeTextWithoutHeadingsIsCutAtBlankLines(t *testing.T) {
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "Paragraph %d holds words about leases and grants and tokens.\n", i)
		if i%5 == 4 {
			b.WriteString("\n")
		}
	}
	b.WriteString(strings.Repeat("oneverylongline ", 4000) + "\n")
	src := b.String()
	for _, name := range []string{"plain.txt", "plain.md"} {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		var got []Chunk
		size := 0
		require.NoError(t, readDocument(path, name, DefaultOptions(), 4<<10, func(c Chunk) error {
			got = append(got, c)
			return nil
		}, &size))
		var words []string
		for _, c := range got {
			require.Equal(t, src[c.Span[0]:c.Span[1]], c.Text, name)
		}
		for _, c := range got {
			words = append(words, strings.Fields(c.Text)...)
		}
		all := strings.Join(words, " ")
		for i := range 3000 {
			require.Contains(t, all, fmt.Sprintf("Paragraph %d holds", i), name)
		}
	}
}

func TestFenceAndHeadingLines(t *testing.T) {
	require.True(t, isATXHeading([]byte("# a\n")))
	require.True(t, isATXHeading([]byte("   ###### a\n")))
	require.True(t, isATXHeading([]byte("##\n")))
	require.False(t, isATXHeading([]byte("    # code\n")))
	require.False(t, isATXHeading([]byte("#hashtag\n")))
	require.False(t, isATXHeading([]byte("####### seven\n")))
	f := fenceAfter(nil, []byte("```go\n"))
	require.Equal(t, "```", string(f))
	require.Equal(t, "```", string(fenceAfter(f, []byte("~~~\n"))), "another marker does not close")
	require.Equal(t, "```", string(fenceAfter(f, []byte("``` x\n"))), "a closing fence has nothing after")
	require.Nil(t, fenceAfter(f, []byte("````\n")))
	require.Nil(t, fenceAfter(nil, []byte("``` a`b\n")), "a backtick in the info string: no fence")
	require.Equal(t, "~~~~", string(fenceAfter(nil, []byte("  ~~~~\n"))))
}
