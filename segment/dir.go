package segment

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/segname"
)

// DirEnv is the environment variable naming the TokenFuse gateway's data
// directory, where it writes its segments.
const DirEnv = "TOKENFUSE_DATA_DIR"

// EnvDir is the segment directory $TOKENFUSE_DATA_DIR names, "" when it
// is not set: the directory a reader of traces given no other source
// reads.
func EnvDir() string { return os.Getenv(DirEnv) }

// Segment is one TokenFuse segment file of a directory. A segment named
// the earlier way, calls-{seq:08}.parquet, has PID and Nanos 0 and Legacy
// set.
type Segment struct {
	Path   string
	PID    uint64
	Nanos  uint64
	Seq    uint64
	Size   int64
	Legacy bool
}

// Compare orders segments as the gateway wrote them: by the nanos in their
// names, then sequence, then pid (earlier-named segments, nanos 0, first,
// by their counter); equal names, impossible in one directory, compare by
// path.
func Compare(a, b Segment) int {
	return cmp.Or(cmp.Compare(a.Nanos, b.Nanos), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.PID, b.PID),
		cmp.Compare(a.Path, b.Path))
}

// Stat returns the Segment of the file at path, or ok false when its name
// is not a segment name.
func Stat(path string) (seg Segment, ok bool, err error) {
	base := filepath.Base(path)
	pid, nanos, seq, ok := segname.Parse(base)
	if !ok {
		return Segment{}, false, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return Segment{}, true, fmt.Errorf("stat segment %s: %w", base, err)
	}
	return Segment{Path: path, PID: pid, Nanos: nanos, Seq: seq, Size: info.Size(), Legacy: segname.IsLegacy(base)}, true, nil
}

// List returns the segment files of dir, of either naming, in replay
// order (Compare). Files whose names do not match a segment pattern, and
// directories, are left out; ignored returns how many.
func List(dir string) (segs []Segment, ignored int, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list trace directory: %w", err)
	}
	for _, e := range entries {
		pid, nanos, seq, ok := segname.Parse(e.Name())
		if !ok || e.IsDir() {
			ignored++
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, 0, fmt.Errorf("stat segment %s: %w", e.Name(), err)
		}
		segs = append(segs, Segment{Path: filepath.Join(dir, e.Name()), PID: pid, Nanos: nanos, Seq: seq,
			Size: info.Size(), Legacy: segname.IsLegacy(e.Name())})
	}
	slices.SortFunc(segs, Compare)
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
