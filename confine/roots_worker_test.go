package confine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRootsRefuseEscapes(t *testing.T) {
	root := t.TempDir()
	r := Roots{root}
	_, err := r.Resolve("../../etc/passwd")
	require.Error(t, err)
	_, err = r.Resolve("/etc/passwd")
	require.ErrorIs(t, err, ErrOutsideRoots)
}
