package hugepage

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// advise marks [addr, addr+n) (huge page aligned) MADV_HUGEPAGE. An error
// (a kernel without transparent huge pages, a range the runtime has not
// mapped) leaves the memory as it was, which is all a hint promises.
func advise(addr, n uintptr) {
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, addr, n, syscall.MADV_HUGEPAGE)
}

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which the
// syscall package does not name.
const madvPopulateWrite = 23

// populate faults [addr, addr+n) in as writable, zeroed memory, in the
// system call (syscall.Syscall tells the runtime so: a collection does not
// wait for it), and reports whether the kernel did. The range must be
// mapped and hold only zeros already (fresh or zeroed heap memory): the
// pages already present are left as they are. addr is rounded down to a
// page.
func populate(addr, n uintptr) bool {
	const page = 4096
	lo := addr &^ (page - 1)
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, lo, addr+n-lo, madvPopulateWrite)
	return errno == 0
}

// readMaps reads /proc/self/maps into buf (grown as needed) and reports
// whether it could.
func readMaps(buf []byte) ([]byte, bool) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return buf, false
	}
	defer f.Close()
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			return buf, errors.Is(err, io.EOF)
		}
	}
}
