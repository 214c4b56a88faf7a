package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIndexVerify: a built generation verifies; a byte changed in place
// (the size unchanged) goes unnoticed by ask, which opens what is cheap,
// and is found by index verify, which exits 2 naming the file.
func TestIndexVerify(t *testing.T) {
	data := t.TempDir()
	out, errOut, code := ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data)
	require.Equal(t, exitOK, code, errOut)
	id := regexp.MustCompile(`generation ([0-9a-f]{32}) active`).FindStringSubmatch(out)[1]
	out, errOut, code = ragRun(t, "index", "verify", "--data", data)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "generation "+id+" verifies")
	_, _, code = ragRun(t, "index", "verify", "--data", data, id)
	require.Equal(t, exitOK, code)

	corpus := filepath.Join(data, "index", "generations", id, "corpus.json")
	b, err := os.ReadFile(corpus)
	require.NoError(t, err)
	i := bytes.LastIndex(b, []byte("grains"))
	require.Positive(t, i)
	b[i] = 'G'
	require.NoError(t, os.Chmod(corpus, 0o644))
	require.NoError(t, os.WriteFile(corpus, b, 0o644))
	_, errOut, code = ragRun(t, "ask", "--data", data, "What is the color of the sky?")
	require.Equal(t, exitOK, code, "ask opens without reading every byte: %s", errOut)
	_, errOut, code = ragRun(t, "index", "verify", "--data", data)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "corpus.json digest")
	_, errOut, code = ragRun(t, "index", "verify", "--data", data, "not-a-generation")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "32 lowercase hex")
	_, errOut, code = ragRun(t, "index", "verify", "--data", t.TempDir())
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no active generation")
}

// TestAskNamesCopies: one document copied into two more folders takes one
// place among the sources an ask prints, the copies named under it.
func TestAskNamesCopies(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	doc := "# Leases\n\nA lease is renewed every 5 seconds by its holder and expires after 15 seconds without renewal.\n"
	other := "# Backups\n\nSnapshots are written to the bucket every hour and kept for a week.\n"
	for _, p := range []string{"leases.md", "v1/leases.md", "v2/leases.md"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(doc), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "backups.md"), []byte(other), 0o644))
	_, errOut, code := ragRun(t, "index", "build", "--docs", dir, "--data", data)
	require.Equal(t, exitOK, code, errOut)
	out, errOut, code := ragRun(t, "ask", "--data", data, "--top-k", "2", "How often is a lease renewed?")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `1\. leases\.md#leases-1 .*\n\s+the same text also in: v1/leases\.md#leases-1, v2/leases\.md#leases-1\n\s+2\. backups\.md#backups-1`, out)
}
