package prefetch

import "unsafe"

//go:noescape
func indexed(base unsafe.Pointer, idxs []int32, shift uint)

//go:noescape
func hashed(base unsafe.Pointer, hashes []uint64, mask uint64, shift uint)
