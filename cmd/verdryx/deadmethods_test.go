package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// externalInterfaceMethods are the names of methods of ours that exist to
// satisfy an interface of another module (encoding/json, log/slog,
// net/http, OpenTelemetry's IDGenerator, gonum/plot's DataRanger): called
// through that interface, never by name.
var externalInterfaceMethods = map[string]string{
	"MarshalJSON":   "encoding/json.Marshaler",
	"UnmarshalJSON": "encoding/json.Unmarshaler",
	"LogValue":      "log/slog.LogValuer",
	"ServeHTTP":     "net/http.Handler",
	"NewIDs":        "go.opentelemetry.io/otel/sdk/trace.IDGenerator",
	"NewSpanID":     "go.opentelemetry.io/otel/sdk/trace.IDGenerator",
	"DataRange":     "gonum.org/v1/plot.DataRanger",
}

// TestExportedMethodsHaveCallers keeps what .ci/deadcode cannot see from
// coming back: deadcode keeps a method alive when any interface has a
// method of its name, so an exported method only tests call passes it.
// Here an exported method of a non-test file of the module must be named
// in a selector (x.Method) of some non-test file, be a method of one of
// the module's interfaces, or satisfy an interface of another module
// (externalInterfaceMethods). By name, not by type: a method sharing its
// name with one that is called passes (a guard, not a proof).
func TestExportedMethodsHaveCallers(t *testing.T) {
	fset := token.NewFileSet()
	type method struct{ pos, name string }
	var methods []method
	called, ifaces := map[string]bool{}, map[string]bool{}
	for _, path := range moduleGoFiles(t) {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				called[n.Sel.Name] = true
			case *ast.InterfaceType:
				for _, m := range n.Methods.List {
					for _, name := range m.Names {
						ifaces[name.Name] = true
					}
				}
			case *ast.FuncDecl:
				if n.Recv != nil && n.Name.IsExported() {
					methods = append(methods, method{fset.Position(n.Pos()).String(), n.Name.Name})
				}
			}
			return true
		})
	}
	if len(methods) < 100 {
		t.Fatalf("only %d exported methods found: the walk is broken", len(methods))
	}
	for _, m := range methods {
		if !called[m.name] && !ifaces[m.name] && externalInterfaceMethods[m.name] == "" {
			t.Errorf("%s: exported method %s is called by no non-test code: delete it, or move it into the tests that use it", m.pos, m.name)
		}
	}
}
