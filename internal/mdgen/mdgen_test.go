package mdgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGenerateIsDeterministic: the same seed writes the same bytes, of
// about the size asked, with headings, lists and code blocks.
func TestGenerateIsDeterministic(t *testing.T) {
	read := func(dir string) string {
		b, err := os.ReadFile(filepath.Join(dir, "part-000", "doc-00001.md"))
		require.NoError(t, err)
		return string(b)
	}
	a, b := t.TempDir(), t.TempDir()
	na, err := Generate(a, 200_000, 4, 7)
	require.NoError(t, err)
	nb, err := Generate(b, 200_000, 4, 7)
	require.NoError(t, err)
	assert.Equal(t, na, nb)
	assert.Equal(t, read(a), read(b))
	assert.InDelta(t, 200_000, float64(na), 10_000)
	doc := read(a)
	for _, want := range []string{"# ", "\n## ", "\n- ", "\n```\n"} {
		assert.Contains(t, doc, want)
	}
	c := t.TempDir()
	_, err = Generate(c, 200_000, 4, 8)
	require.NoError(t, err)
	assert.False(t, strings.EqualFold(read(a), read(c)), "another seed, other bytes")
}
