// Package doclinks holds one test: every relative link of the README and
// docs/*.md resolves to a file, and every #anchor to a heading of it.
package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	linkRE    = regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	headingRE = regexp.MustCompile(`(?m)^#+\s+(.*)$`)
	punctRE   = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation but
// '-' and '_' dropped, spaces as '-'.
func slug(heading string) string {
	return strings.ReplaceAll(punctRE.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}

func anchorsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if m := headingRE.FindStringSubmatch(line); m != nil && !inFence {
			out[slug(m[1])] = true
		}
	}
	return out
}

func TestEveryDocLinkResolves(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	require.Greater(t, len(files), 5)
	links := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target, anchor := m[1], m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), target)
			}
			links++
			_, err := os.Stat(path)
			require.NoError(t, err, "%s links to %s, which does not exist", f, target)
			if anchor != "" && strings.HasSuffix(path, ".md") {
				require.True(t, anchorsOf(t, path)[anchor[1:]], "%s links to %s%s: no such heading", f, target, anchor)
			}
		}
	}
	require.Greater(t, links, 10, "the link pattern still finds the docs' links")
}

func TestSlugIsGitHubs(t *testing.T) {
	require.Equal(t, "performance-verdryx-bench-index-numpy-in-the-same-run-bench-toolsindexsh",
		slug("Performance (`verdryx bench index`; NumPy in the same run: `bench-tools/index.sh`)"))
	require.Equal(t, "the-worker-verdryx-serve", slug("The worker: `verdryx serve`"))
}
