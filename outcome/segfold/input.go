package segfold

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/segment"
)

// parquetMagic starts (and ends) every Parquet file.
var parquetMagic = []byte("PAR1")

// Stdin is the input name that reads standard input.
const Stdin = "-"

// ReduceInput folds the calls of one --input into r:
//
//   - "-": standard input (stdin), Parquet when it starts with PAR1, else
//     records in the format its first byte says (a JSON array, NDJSON or
//     CSV);
//   - a directory: every .parquet file in it, whatever its name, TokenFuse
//     segments first in the gateway's order (segment.List), then the
//     others by name; other files are ignored;
//   - a file named .parquet or starting with PAR1: its rows, read as a
//     segment's (the call columns, docs/traces.md "TokenFuse segments");
//   - any other file: records (calls.ScanRecordsFile).
//
// Unlike a --traces directory, a bad Parquet file is an error, naming the
// file, row group and column. files is how many Parquet files were read.
func ReduceInput(ctx context.Context, path string, stdin io.Reader, r *outcome.Reducer, procs int) (files int, err error) {
	if path == Stdin {
		return reduceStdin(ctx, stdin, r, procs)
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("records: %w", err)
	}
	if st.IsDir() {
		segs, err := parquetFiles(path)
		if err != nil {
			return 0, err
		}
		if len(segs) == 0 {
			return 0, fmt.Errorf("records %s: no .parquet files in the directory", path)
		}
		return reduceParquet(ctx, segs, r, procs)
	}
	isPQ, err := isParquet(path)
	if err != nil {
		return 0, err
	}
	if isPQ {
		return reduceParquet(ctx, []segment.Segment{{Path: path, Size: st.Size()}}, r, procs)
	}
	return 0, outcome.ReadRecordsFile(path, r)
}

func reduceParquet(ctx context.Context, segs []segment.Segment, r *outcome.Reducer, procs int) (int, error) {
	st, err := ReduceSegments(ctx, segs, 0, r, DirOptions{Strict: true, Procs: procs})
	return st.Segments, err
}

// isParquet reports whether path is named .parquet or starts with PAR1.
func isParquet(path string) (bool, error) {
	if strings.EqualFold(filepath.Ext(path), ".parquet") {
		return true, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("open records: %w", err)
	}
	defer f.Close()
	head := make([]byte, len(parquetMagic))
	n, _ := io.ReadFull(f, head)
	return bytes.Equal(head[:n], parquetMagic), nil
}

// parquetFiles lists the .parquet files of dir: segments in segment.List
// order, then the others by name.
func parquetFiles(dir string) ([]segment.Segment, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	var segs, others []segment.Segment
	for _, e := range entries {
		if e.IsDir() || !strings.EqualFold(filepath.Ext(e.Name()), ".parquet") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		s, isSeg, err := segment.Stat(path)
		if err != nil {
			return nil, err
		}
		if isSeg {
			segs = append(segs, s)
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("records: %w", err)
		}
		others = append(others, segment.Segment{Path: path, Size: info.Size()})
	}
	slices.SortFunc(segs, segment.Compare)
	slices.SortFunc(others, func(a, b segment.Segment) int { return strings.Compare(a.Path, b.Path) })
	return append(segs, others...), nil
}

// reduceStdin reads standard input: Parquet is spooled to a temporary
// file (a Parquet reader needs its footer first), records are streamed.
func reduceStdin(ctx context.Context, stdin io.Reader, r *outcome.Reducer, procs int) (int, error) {
	if stdin == nil {
		stdin = os.Stdin
	}
	br := bufio.NewReaderSize(stdin, 64<<10)
	head, _ := br.Peek(len(parquetMagic))
	if !bytes.Equal(head, parquetMagic) {
		return 0, outcome.ReadRecords(br, "standard input", r)
	}
	f, err := os.CreateTemp("", "verdryx-stdin-*.parquet")
	if err != nil {
		return 0, fmt.Errorf("spool standard input: %w", err)
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, br)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("spool standard input: %w", err)
	}
	return reduceParquet(ctx, []segment.Segment{{Path: f.Name(), Size: n}}, r, procs)
}
