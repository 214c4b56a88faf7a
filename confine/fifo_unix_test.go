//go:build unix

package confine

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestFIFOIsRefusedWithoutBlocking(t *testing.T) {
	root := t.TempDir()
	fifo := filepath.Join(root, "corpus.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, err := (&Reader{Roots: Roots{root}}).ReadFile("corpus.json")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("FIFO: %v", err)
	}
}
