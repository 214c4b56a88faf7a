//go:build unix

package proc

import (
	"syscall"
	"time"
)

// SelfCPU returns the user plus system CPU time of this process so far
// (getrusage), 0 where unavailable.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
