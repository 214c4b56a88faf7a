package proc

import "syscall"

// sysProcAttr puts a child in its own process group and has the kernel
// SIGKILL it when the harness dies, so no child outlives a crashed harness.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
