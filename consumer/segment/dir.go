package segment

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/verdryx/verdryx/calls"
)

// Segment is one TokenFuse segment file of a directory.
type Segment struct {
	Path  string
	PID   uint64
	Nanos uint64
	Seq   uint64
	Size  int64
}

// ParseName parses a TokenFuse segment file name,
// calls-{pid:x}-{nanos:x}-{seq:08}.parquet (pid and nanos lowercase hex, seq
// decimal of at least 8 digits).
func ParseName(base string) (pid, nanos, seq uint64, ok bool) {
	rest, found := strings.CutPrefix(base, "calls-")
	if !found {
		return 0, 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".parquet")
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 || len(parts[2]) < 8 {
		return 0, 0, 0, false
	}
	isHex := func(s string) bool {
		return s != "" && strings.Trim(s, "0123456789abcdef") == ""
	}
	if !isHex(parts[0]) || !isHex(parts[1]) || strings.Trim(parts[2], "0123456789") != "" {
		return 0, 0, 0, false
	}
	var err error
	if pid, err = strconv.ParseUint(parts[0], 16, 64); err != nil {
		return 0, 0, 0, false
	}
	if nanos, err = strconv.ParseUint(parts[1], 16, 64); err != nil {
		return 0, 0, 0, false
	}
	if seq, err = strconv.ParseUint(parts[2], 10, 64); err != nil {
		return 0, 0, 0, false
	}
	return pid, nanos, seq, true
}

// List returns the segment files of dir in replay order: by the
// nanos in their names, then sequence, then pid. Files whose names do not
// match the segment pattern, and directories, are left out; ignored
// returns how many.
func List(dir string) (segs []Segment, ignored int, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list trace directory: %w", err)
	}
	for _, e := range entries {
		pid, nanos, seq, ok := ParseName(e.Name())
		if !ok || e.IsDir() {
			ignored++
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, 0, fmt.Errorf("stat segment %s: %w", e.Name(), err)
		}
		segs = append(segs, Segment{Path: filepath.Join(dir, e.Name()), PID: pid, Nanos: nanos, Seq: seq, Size: info.Size()})
	}
	slices.SortFunc(segs, func(a, b Segment) int {
		return cmp.Or(cmp.Compare(a.Nanos, b.Nanos), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.PID, b.PID))
	})
	return segs, ignored, nil
}

// Read calls fn with every call of the segment at path, in row
// order, every column read. It stops at the first error, from the segment
// (a *Error) or from fn (returned as is). Memory is one batch plus
// the segment's distinct strings.
func Read(path string, fn func(calls.Call) error) error {
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	sc := NewScanner(calls.AllFields, runs, syms)
	return sc.ScanFile(path, func(b *calls.Batch) error {
		for i := range b.Len {
			if err := fn(b.Call(i, runs, syms)); err != nil {
				return err
			}
		}
		return nil
	})
}

// IsError reports whether err is a bad segment (as opposed to an I/O
// or callback error).
func IsError(err error) bool {
	var se *Error
	return errors.As(err, &se)
}
