package calls

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsOnlyHugepageOfVerdryx holds the package doc's promise: of
// verdryx, the package's non-test files import the leaf utilities
// internal/hugepage and internal/strictjson only.
func TestImportsOnlyLeavesOfVerdryx(t *testing.T) {
	const module = "github.com/verdryx/verdryx/"
	allowed := map[string]bool{module + "internal/hugepage": true, module + "internal/strictjson": true}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(path, module) && !allowed[path] {
				t.Errorf("%s imports %s: the package doc says calls imports only internal/hugepage of verdryx", fset.Position(imp.Pos()), path)
			}
		}
	}
}
