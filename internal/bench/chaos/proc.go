package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// child is one verdryx child process. Its stdout and stderr go to a log
// file; done is closed once the process has been waited for, and err then
// holds its exit error (nil for exit 0).
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// childEnv is the environment of every child: the harness's, without
// VERDRYX_* variables, so a caller's VERDRYX_NATS_URL or VERDRYX_DATA never
// points a child at something other than the harness's own data directory.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VERDRYX_") {
			env = append(env, kv)
		}
	}
	return env
}

// spawn starts bin with args, logging to logDir/name.log. The process is
// in its own process group (a Ctrl-C on the harness reaches the harness
// only, which then kills its children) and, on Linux, is killed if the
// harness dies.
func spawn(bin, logDir, name string, args ...string) (*child, error) {
	return spawnCapture(bin, logDir, name, nil, args...)
}

// spawnCapture is spawn with stdout written to stdout instead of the log
// file when stdout is non-nil; it must not be read before the child's done
// channel is closed.
func spawnCapture(bin, logDir, name string, stdout io.Writer, args ...string) (*child, error) {
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
	cmd.Env = childEnv()
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("child %s: start %s: %w", name, bin, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has ended (and been waited for).
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// exitCode returns the exit code once exited: -1 when killed by a signal.
func (c *child) exitCode() int {
	if c.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// signal sends sig unless the process has already ended.
func (c *child) signal(sig syscall.Signal) {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(sig)
}

// wait waits at most d for the process to end and reports whether it did.
func (c *child) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// kill sends SIGKILL and waits (at most 30 s) for the process to be reaped.
func (c *child) kill() bool {
	c.signal(syscall.SIGKILL)
	return c.wait(30 * time.Second)
}

// describe is the exit status in words, for problems and logs.
func (c *child) describe() string {
	if !c.exited() {
		return "still running"
	}
	if c.err == nil {
		return "exit 0"
	}
	return c.err.Error()
}

// lastLine returns the last non-empty line of the child's log (read from
// its final 64 KiB), for problems that name why a child failed.
func (c *child) lastLine() string {
	f, err := os.Open(c.log)
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
