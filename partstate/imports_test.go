package partstate

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bannedImport names what the partition state must not reach: the NATS
// client, SQL, and the Parquet reader.
func bannedImport(path string) bool {
	p := strings.ToLower(path)
	return strings.Contains(p, "nats") || strings.Contains(p, "sql") || strings.Contains(p, "parquet")
}

// TestImportsNoNATSAndNoSQL: the partition state is pure. No file of the
// package (tests included) imports a path naming NATS, SQL or Parquet,
// and neither does anything the package links, however indirectly
// (go list -deps): the consumer (package fleet), the store and the
// segment reader own those.
func TestImportsNoNATSAndNoSQL(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			require.NoError(t, err, "%s: import %s", name, spec.Path.Value)
			require.False(t, bannedImport(path), "%s imports %s", fset.Position(spec.Pos()), path)
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH for go list -deps")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "go list -deps: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/verdryx/verdryx/calls", "go list -deps listed the package's imports")
	for _, dep := range deps {
		require.False(t, bannedImport(dep), "partstate links %s", dep)
	}
}
