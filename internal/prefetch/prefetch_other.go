//go:build !amd64

package prefetch

import "unsafe"

func indexed(base unsafe.Pointer, idxs []int32, shift uint) {}

func hashed(base unsafe.Pointer, hashes []uint64, mask uint64, shift uint) {}
