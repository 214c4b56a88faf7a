package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a function of this package may span,
// from its func line to its closing brace: cmd maps flags and prints;
// logic longer than this belongs in a package of its own, with its tests.
const maxFuncLines = 80

// TestFunctionsAtMost80Lines fails naming every function declared in a
// non-test file of this package that spans more than maxFuncLines lines.
func TestFunctionsAtMost80Lines(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			checked++
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, over %d: move its logic to the package it belongs to", fset.Position(fd.Pos()), fd.Name.Name, n, maxFuncLines)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no function checked: run from the package directory")
	}
}

// maxFileLines is the most lines a non-test Go file of the module may
// have: past it a file holds more than one thing a reader looks for.
const maxFileLines = 900

// moduleGoFiles returns the paths of the module's non-test Go files
// (hidden folders skipped), failing the test if the walk finds too few to
// be the module.
func moduleGoFiles(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	var paths []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 100 {
		t.Fatalf("only %d files found: the walk is broken", len(paths))
	}
	return paths
}

// TestFilesAtMost900Lines fails naming every non-test Go file of the
// module over maxFileLines lines.
func TestFilesAtMost900Lines(t *testing.T) {
	for _, path := range moduleGoFiles(t) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			t.Errorf("%s is %d lines, over %d: split it by what its parts do", path, n, maxFileLines)
		}
	}
}
