// Package hugepage asks the kernel to back large, randomly accessed tables
// with transparent huge pages, where the system leaves that to the
// program (Linux's "madvise" THP mode, the common default). A table of
// several MiB touched at random costs a TLB miss on most accesses with
// 4 KiB pages, and under a hypervisor each miss walks two sets of page
// tables; with 2 MiB pages the whole table needs a handful of TLB entries.
// The advice changes no contents and no result: it is a hint, ignored
// where unsupported. Safe for concurrent use.
package hugepage

import "unsafe"

// Size is the huge page size the advice is aligned to.
const Size = 2 << 20

// Min is the smallest table worth advising: below a few huge pages the
// TLB covers a table anyway.
const Min = 2 * Size

// Advise hints that the whole huge pages inside s's backing array be
// huge pages. Arrays shorter than Min are left alone. It must be called
// before the array is first written to take effect on pages not yet
// faulted in (a fresh make of a large slice is not yet touched).
func Advise[T any](s []T) {
	n := uintptr(cap(s)) * unsafe.Sizeof(*new(T))
	if n < Min {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s[:cap(s)])))
	lo := (start + Size - 1) &^ (Size - 1)
	hi := (start + n) &^ (Size - 1)
	if hi > lo {
		advise(lo, hi-lo)
	}
}
