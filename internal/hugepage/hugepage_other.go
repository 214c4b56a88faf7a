//go:build !linux

package hugepage

func advise(addr, n uintptr) {}

func populate(addr, n uintptr) bool { return false }

func readMaps(buf []byte) ([]byte, bool) { return buf, false }
