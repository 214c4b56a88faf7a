//go:build unix

package e2e

import (
	"os"
	"runtime"
	"syscall"
)

// peakRSS is the child's peak resident set in bytes (getrusage's
// ru_maxrss: kilobytes on Linux, bytes on macOS).
func peakRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}

// minorFaults is the child's minor page faults (getrusage's ru_minflt):
// each a first touch of a page, several microseconds apiece under a
// paravirtualised kernel.
func minorFaults(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return int64(ru.Minflt)
}
