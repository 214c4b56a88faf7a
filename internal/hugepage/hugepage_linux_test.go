package hugepage

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// freshArray returns n bytes (a multiple of Size) of a private anonymous
// mapping no test has hinted or touched, aligned to Size, and unmaps it
// when the test ends. The mapping has a huge page to spare on each side,
// so Advise's rounding hints no other mapping.
func freshArray(t *testing.T, n int) []byte {
	t.Helper()
	m, err := syscall.Mmap(-1, 0, n+2*Size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, syscall.Munmap(m)) })
	off := Size - int(uintptr(unsafe.Pointer(unsafe.SliceData(m)))&(Size-1))
	return m[off : off+n : off+n]
}
