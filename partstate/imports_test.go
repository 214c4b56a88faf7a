package partstate

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportsNoNATSAndNoSQL: the partition state is pure. No file of the
// package (tests included) imports a path naming NATS or SQL; the
// consumer (package fleet) and the store own those.
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
			for _, banned := range []string{"nats", "sql"} {
				require.NotContains(t, strings.ToLower(path), banned, "%s imports %s", fset.Position(spec.Pos()), path)
			}
		}
	}
}
