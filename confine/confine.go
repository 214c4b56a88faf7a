// Package confine reads files named by untrusted messages. Every read goes
// through one rule: the name resolves, after symlinks are evaluated, under
// one of the configured roots; the file is a regular file (never a FIFO,
// device, socket or directory, checked before the open and again on the
// opened descriptor, which is opened non-blocking so a FIFO swapped in
// between can never block); at most MaxBytes are read; and the read ends
// after Timeout. A refusal wraps ErrRefused and names the file and the
// rule it broke.
package confine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultMaxBytes bounds a file named by a message (64 MiB) unless
// configured otherwise (serve --files-max-bytes).
const DefaultMaxBytes = 64 << 20

// DefaultTimeout bounds one read of a file named by a message (30 s)
// unless configured otherwise (serve --files-timeout).
const DefaultTimeout = 30 * time.Second

// ErrRefused marks every refusal: outside the roots, not a regular file,
// too large, or too slow.
var ErrRefused = errors.New("confine: file refused")

// ErrOutsideRoots is returned (wrapped with ErrRefused) for a path that
// escapes every root or does not exist under one. The two are not told
// apart, and the error quotes only the name the message gave (never the
// path it resolved to or a root), so a refusal is no oracle for which
// files exist or where the roots are.
var ErrOutsideRoots = fmt.Errorf("%w: path is outside the allowed roots or missing", ErrRefused)

// Roots are the directories paths named in messages may resolve under. A
// path outside every root, or a symlink leading out of one, is refused
// before anything is opened.
type Roots []string

// Resolve returns the real path of name if it lies under a root. A
// relative name is tried against each root in order; an absolute name
// must itself resolve under one. The error never quotes file content.
func (r Roots) Resolve(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: %q contains a NUL byte", ErrRefused, name)
	}
	var candidates []string
	if filepath.IsAbs(name) {
		candidates = []string{name}
	} else {
		for _, root := range r {
			candidates = append(candidates, filepath.Join(root, name))
		}
	}
	for _, c := range candidates {
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		if r.contains(real) {
			return real, nil
		}
		return "", fmt.Errorf("%w: %q", ErrOutsideRoots, name)
	}
	return "", fmt.Errorf("%w: %q", ErrOutsideRoots, name)
}

// contains reports whether the real path p lies under a root.
func (r Roots) contains(p string) bool {
	for _, root := range r {
		rr, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if p == rr || strings.HasPrefix(p, rr+string(os.PathSeparator)) {
			return true
		}
	}
	return false
}

// Reader reads files named by messages under the confinement rule. The
// zero MaxBytes and Timeout mean the defaults. A Reader is safe for
// concurrent use.
type Reader struct {
	Roots    Roots
	MaxBytes int64
	Timeout  time.Duration
}

func (c *Reader) maxBytes() int64 {
	if c.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return c.MaxBytes
}

func (c *Reader) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// Resolve returns the real path of name under the roots, refusing
// anything that is not a regular file within the size limit.
func (c *Reader) Resolve(name string) (string, error) {
	p, err := c.Roots.Resolve(name)
	if err != nil {
		return "", err
	}
	st, err := os.Lstat(p) // p has no symlinks left
	if err != nil {
		return "", fmt.Errorf("%w: %q", ErrOutsideRoots, name)
	}
	if err := c.check(name, st); err != nil {
		return "", err
	}
	return p, nil
}

func (c *Reader) check(name string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (%s)", ErrRefused, name, kind(st.Mode()))
	}
	if st.Size() > c.maxBytes() {
		return fmt.Errorf("%w: %s is %d bytes, more than the limit of %d", ErrRefused, name, st.Size(), c.maxBytes())
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeDir != 0:
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return m.Type().String()
}

// ReadFile reads name under the rule and returns its bytes. It satisfies
// evalrun.Deps.ReadFile.
func (c *Reader) ReadFile(name string) ([]byte, error) {
	return c.ReadFileContext(context.Background(), name)
}

// ReadFileContext is ReadFile ending early when ctx is done.
func (c *Reader) ReadFileContext(ctx context.Context, name string) ([]byte, error) {
	_, b, err := c.ReadResolved(ctx, name)
	return b, err
}

// ReadResolved reads name under the rule and returns its real path with
// its bytes.
func (c *Reader) ReadResolved(ctx context.Context, name string) (string, []byte, error) {
	p, err := c.Resolve(name)
	if err != nil {
		return "", nil, err
	}
	b, err := c.readOpen(ctx, name, p)
	if err != nil {
		return "", nil, err
	}
	return p, b, nil
}

func (c *Reader) readOpen(ctx context.Context, name, p string) ([]byte, error) {
	// O_NONBLOCK: should the file have been swapped for a FIFO since the
	// Lstat, the open returns at once and the mode check below refuses it.
	// O_NOFOLLOW: nor may it have become a symlink.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|oNoFollow, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrRefused, name, bare(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, bare(err))
	}
	if err := c.check(name, st); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(f, c.maxBytes()+1))
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("read %s: %w", name, bare(r.err))
		}
		if int64(len(r.b)) > c.maxBytes() {
			return nil, fmt.Errorf("%w: %s grew past the limit of %d bytes", ErrRefused, name, c.maxBytes())
		}
		return r.b, nil
	case <-ctx.Done():
		_ = f.SetReadDeadline(time.Now()) // unblocks pollable files; Close below does the rest
		return nil, fmt.Errorf("%w: reading %s took longer than %s", ErrRefused, name, c.timeout())
	}
}

// bare strips the resolved path from an *fs.PathError, leaving the
// operation's reason: errors quote the name the message gave, never the
// path it resolved to.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
