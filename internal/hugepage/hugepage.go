// Package hugepage asks the kernel to back large arrays with transparent
// huge pages (2 MiB on amd64) where it allows that only on request (Linux
// with /sys/kernel/mm/transparent_hugepage/enabled set to "madvise", a
// common default). A large array touched at random, such as a reduction's
// run states or an intern table, otherwise costs a page fault per 4 KiB on
// first touch and a TLB miss per access after; a huge page is one fault
// and one TLB entry for 512 of them.
//
// AdviseHeap does the same for the whole Go heap as the runtime maps it,
// for a process that ends when its work is done (see its doc).
//
// The calls are hints: they change no memory a program can observe, and
// do nothing where the kernel or the platform does not support them. Safe
// for concurrent use.
package hugepage

import (
	"runtime"
	"unsafe"
)

// Size is the huge page size the hints are aligned to.
const Size = 2 << 20

// Min is the smallest array worth a hint: an array touched whole, at
// random (a hash table, an array of states), and at least half a huge
// page, so that the pages it shares with its neighbours do not dominate.
const Min = Size / 2

// PopulateMin is the smallest array Advise faults in without a hint.
const PopulateMin = 64 << 10

// Advise hints that the huge pages s's backing array (its capacity, not
// only its length) lies on be huge pages, and faults the array in: each of
// its pages is allocated once, as by a write (a first read would map the
// kernel's shared zero page, and the write after it would fault again and
// flush the other cores' TLBs). Where the kernel can (Linux 5.14 and
// later: MADV_POPULATE_WRITE) that is done in the system call, which the
// runtime does not wait for when it stops the world for a collection;
// elsewhere the array is zeroed, a chunk at a time, as the runtime zeroes
// large allocations. The pages the array shares at its ends are hinted
// too (the neighbouring memory is the same heap's, and a huge page is only
// used where none of its 4 KiB pages is touched yet). Call it on a freshly
// made slice, before it is filled: the array must be all zero, and memory
// already touched stays in small pages. Arrays under Min bytes get no
// hint, and are only faulted in, in the system call where there is one,
// down to PopulateMin bytes: one call instead of a fault per 4 KiB page
// (which costs several microseconds under a paravirtualised kernel).
// Smaller arrays are left alone.
func Advise[T any](s []T) {
	var zero T
	n := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if n < PopulateMin {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s[:cap(s)])))
	if n >= Min {
		lo := start &^ (Size - 1)
		hi := (start + n + Size - 1) &^ (Size - 1)
		advise(lo, hi-lo)
	}
	if populate(start, n) || n < Min {
		runtime.KeepAlive(s)
		return
	}
	// One clear of many megabytes (each huge page zeroed by the kernel
	// on its fault) cannot be preempted, and a collection waiting to stop
	// the world would stall every other goroutine behind it.
	step := max(1, int(clearChunk/unsafe.Sizeof(zero)))
	for whole := s[:cap(s)]; len(whole) > 0; {
		k := min(step, len(whole))
		clear(whole[:k])
		whole = whole[k:]
	}
}

// clearChunk is how many bytes Advise zeroes between preemption points.
const clearChunk = 256 << 10
