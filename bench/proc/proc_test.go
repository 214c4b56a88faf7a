package proc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDirBytesSumsFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "x"), make([]byte, 10), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "y"), make([]byte, 5), 0o644))
	require.EqualValues(t, 15, DirBytes(dir))
	require.EqualValues(t, 0, DirBytes(filepath.Join(dir, "missing")))
}
