//go:build !linux

package proc

import "syscall"

// sysProcAttr sets nothing outside Linux: a child shares the harness's
// process group and outlives a harness that is itself SIGKILLed.
func sysProcAttr() *syscall.SysProcAttr { return nil }
