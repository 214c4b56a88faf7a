package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOnlyMainHandlesSignals: main turns SIGINT and SIGTERM into the
// cancellation of the context it runs a command with; no package below it
// installs a handler of its own (os/signal, oklog/run's SignalHandler).
func TestOnlyMainHandlesSignals(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bench-tools") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		checked++
		for _, imp := range f.Imports {
			if imp.Path.Value == `"os/signal"` && path != filepath.Join(root, "cmd", "verdryx", "main.go") {
				t.Errorf("%s imports os/signal: only cmd/verdryx/main.go handles signals", path)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 100)
	worker, err := filepath.Glob(filepath.Join(root, "worker", "*.go"))
	require.NoError(t, err)
	for _, p := range worker {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NotContains(t, string(b), "SignalHandler", "%s: the worker stops when its context is done, not on a signal", p)
	}
}
