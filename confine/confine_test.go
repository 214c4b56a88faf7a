package confine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRefusalsAreNoOracle(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "ok.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.json"), []byte(`{"k":"v"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.json"), filepath.Join(root, "link.json")); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Roots: Roots{root}}
	if b, err := r.ReadFile("ok.json"); err != nil || string(b) != `{}` {
		t.Fatalf("a file under the root: %q, %v", b, err)
	}
	// An existing and a missing file outside, an escape by .. to an
	// existing and to a missing file, a symlink out, a missing file under
	// the root: one refusal, quoting only the name given.
	for _, name := range []string{
		filepath.Join(outside, "secret.json"), filepath.Join(outside, "nope.json"),
		"../" + filepath.Base(outside) + "/secret.json", "../" + filepath.Base(outside) + "/nope.json",
		"link.json", "nope.json",
	} {
		_, err := r.ReadFileContext(context.Background(), name)
		if !errors.Is(err, ErrOutsideRoots) {
			t.Fatalf("%s: %v, want ErrOutsideRoots", name, err)
		}
		msg := err.Error()
		for _, leak := range []string{root, outside + "/", "resolves", "no such file", "lstat"} {
			if strings.Contains(strings.ReplaceAll(msg, name, ""), leak) {
				t.Errorf("%s: refusal %q reveals %q", name, msg, leak)
			}
		}
	}
}
