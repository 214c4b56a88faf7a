package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxExported is the most exported names a package of the module may
// declare: a package with more holds more than one thing and wants
// splitting. calls, the call schema every layer speaks, is exempt.
const maxExported = 55

// exportedExempt are the packages (directories relative to the module
// root) allowed more than maxExported exported names.
var exportedExempt = map[string]bool{"calls": true}

// TestPackagesAtMost55ExportedNames fails listing every package of the
// module, other than those in exportedExempt, that declares more than
// maxExported exported names in its non-test files. Names are counted as
// go doc lists them: each exported function, type, and method of an
// exported type, and each const or var declaration with an exported name
// (a parenthesised group counts once). A name declared in several files
// for different platforms counts once. Directories holding their own
// go.mod (another module) are skipped.
func TestPackagesAtMost55ExportedNames(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from the package directory: %v", err)
	}
	counts, err := exportedNames(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) < 10 {
		t.Fatalf("only %d packages counted under %s: the walk is broken", len(counts), root)
	}
	var over []string
	for dir, names := range counts {
		if !exportedExempt[dir] && len(names) > maxExported {
			over = append(over, dir)
		}
	}
	sort.Strings(over)
	for _, dir := range over {
		t.Errorf("package %s declares %d exported names, over %d: split it or unexport what no other package uses", dir, len(counts[dir]), maxExported)
	}
}

// exportedNames maps each package directory under root (relative, with
// slashes) to the set of its exported names, counted as
// TestPackagesAtMost55ExportedNames describes.
func exportedNames(root string) (map[string]map[string]bool, error) {
	counts := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if counts[rel] == nil {
			counts[rel] = map[string]bool{}
		}
		addExported(counts[rel], f)
		return nil
	})
	return counts, err
}

// addExported adds the exported names of f to names, keyed so that one
// go doc entry is one key.
func addExported(names map[string]bool, f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				names[d.Name.Name] = true
				continue
			}
			if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
				names[recv+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			var group []string
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names[s.Name.Name] = true
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							group = append(group, n.Name)
						}
					}
				}
			}
			if len(group) > 0 {
				sort.Strings(group)
				names[d.Tok.String()+" "+strings.Join(group, ",")] = true
			}
		}
	}
}

// receiverName is the type name of a method's receiver.
func receiverName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiverName(t.X)
	case *ast.IndexExpr:
		return receiverName(t.X)
	case *ast.IndexListExpr:
		return receiverName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}
