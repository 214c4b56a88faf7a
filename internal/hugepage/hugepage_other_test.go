//go:build !linux

package hugepage

import "testing"

// freshArray skips the test: only Linux has the huge page hints to test.
func freshArray(t *testing.T, n int) []byte {
	t.Skip("no huge page hints outside Linux")
	return nil
}
