// Package prefetch asks the CPU to load memory that a loop is about to
// touch at random, so that the loads of many iterations overlap instead of
// each waiting on a cache miss. The calls are hints: they read and write
// nothing a program can observe, never fault, and do nothing on
// architectures without an implementation. Safe for concurrent use.
package prefetch

import "unsafe"

// Indexed hints the loads of base + idx<<shift for every idx of idxs:
// the elements idxs names of an array of 1<<shift-byte elements at base.
// Negative indexes are hinted like any other address (a hint never
// faults), so callers need not filter them.
func Indexed(base unsafe.Pointer, idxs []int32, shift uint) {
	if len(idxs) > 0 {
		indexed(base, idxs, shift)
	}
}

// Hashed hints the loads of base + (h&mask)<<shift for every h of hashes:
// the home slots of hashed keys in an open-addressing table of
// 1<<shift-byte slots at base.
func Hashed(base unsafe.Pointer, hashes []uint64, mask uint64, shift uint) {
	if len(hashes) > 0 {
		hashed(base, hashes, mask, shift)
	}
}
