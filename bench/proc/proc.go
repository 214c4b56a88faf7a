// Package proc runs the verdryx child processes of the benchmark
// harnesses (chaos, soak): each in its own process group, killed with the
// harness, its output in a log file.
package proc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Child is one verdryx child process of a benchmark harness. Its stdout
// and stderr go to the log file Log. Its methods are safe for concurrent
// use.
type Child struct {
	Name string
	cmd  *exec.Cmd
	Log  string
	done chan struct{}
	err  error
}

// ChildEnv is the environment of every child: the harness's, without
// VERDRYX_* variables, so a caller's VERDRYX_NATS_URL or VERDRYX_DATA never
// points a child at something other than the harness's own data directory.
func ChildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VERDRYX_") {
			env = append(env, kv)
		}
	}
	return env
}

// Spawn starts bin with args, logging to logDir/name.log. The process is
// in its own process group (a Ctrl-C on the harness reaches the harness
// only, which then kills its children) and, on Linux, is killed if the
// harness dies.
func Spawn(bin, logDir, name string, args ...string) (*Child, error) {
	return SpawnCapture(bin, logDir, name, nil, args...)
}

// SpawnCapture is Spawn with stdout written to stdout instead of the log
// file when stdout is non-nil; it must not be read before the child's done
// channel is closed.
func SpawnCapture(bin, logDir, name string, stdout io.Writer, args ...string) (*Child, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("child %s: log file: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.Env = ChildEnv()
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("child %s: start %s: %w", name, bin, err)
	}
	c := &Child{Name: name, cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// Exited reports whether the process has ended (and been waited for).
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// ExitCode returns the exit code once exited: -1 when killed by a signal.
func (c *Child) ExitCode() int {
	if c.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Signal sends sig unless the process has already ended.
func (c *Child) Signal(sig syscall.Signal) {
	if c.Exited() {
		return
	}
	_ = c.cmd.Process.Signal(sig)
}

// Wait waits at most d for the process to end and reports whether it did.
func (c *Child) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// Kill sends SIGKILL and waits (at most 30 s) for the process to be reaped.
func (c *Child) Kill() bool {
	c.Signal(syscall.SIGKILL)
	return c.Wait(30 * time.Second)
}

// Describe is the exit status in words, for problems and logs.
func (c *Child) Describe() string {
	if !c.Exited() {
		return "still running"
	}
	if c.err == nil {
		return "exit 0"
	}
	return c.err.Error()
}

// LastLine returns the last non-empty line of the child's log (read from
// its final 64 KiB), for problems that name why a child failed.
func (c *Child) LastLine() string {
	f, err := os.Open(c.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 64 << 10
	if info, err := f.Stat(); err == nil && info.Size() > tail {
		if _, err := f.Seek(info.Size()-tail, io.SeekStart); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, tail))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Pid returns the process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Done is closed once the process has ended and been waited for.
func (c *Child) Done() <-chan struct{} { return c.done }

// DirBytes is the size of the files under path (0 when missing).
func DirBytes(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}
