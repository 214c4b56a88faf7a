package hugepage

import "golang.org/x/sys/unix"

// advise calls madvise(MADV_HUGEPAGE) on [addr, addr+n), both aligned to
// Size. An error (a kernel without THP, a range the kernel refuses) only
// means the hint is not taken.
func advise(addr, n uintptr) {
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, addr, n, unix.MADV_HUGEPAGE)
}
