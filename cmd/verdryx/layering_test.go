package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering holds the module's folders to what they are
// (docs/architecture.md): internal/ holds leaf utilities, importing no
// other package of verdryx; bench/ (the harnesses behind verdryx bench)
// is imported only by cmd/verdryx and bench/ itself; testkit/ (test
// helpers) only by tests and testkit/ itself. It reads the imports with
// go list.
func TestLayering(t *testing.T) {
	const module = "github.com/verdryx/verdryx/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports ","}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, " ")
		pkg = strings.TrimPrefix(pkg, module)
		pkgs++
		for _, imp := range strings.Split(imps, ",") {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			switch {
			case strings.HasPrefix(pkg, "internal/"):
				t.Errorf("%s imports %s: internal/ holds leaf utilities only", pkg, dep)
			case strings.HasPrefix(dep, "bench/") && pkg != "cmd/verdryx" && !strings.HasPrefix(pkg, "bench/"):
				t.Errorf("%s imports %s: only cmd/verdryx reaches the bench harnesses", pkg, dep)
			case strings.HasPrefix(dep, "testkit/") && !strings.HasPrefix(pkg, "testkit/"):
				t.Errorf("%s imports %s outside its tests: testkit/ is for tests", pkg, dep)
			}
		}
	}
	if pkgs < 20 {
		t.Fatalf("only %d packages listed: the listing is broken", pkgs)
	}
}
