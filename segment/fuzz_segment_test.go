package segment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/verdryx/verdryx/calls"
)

// FuzzReadSegmentBytes feeds arbitrary bytes to the segment reader (footer,
// schema, page headers through parquet-go): it returns an error or rows,
// never panics. Run for a minute with
//
//	go test ./segment -run '^$' -fuzz '^FuzzReadSegmentBytes$' -fuzztime 1m
func FuzzReadSegmentBytes(f *testing.F) {
	segs, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*", "*.parquet"))
	if len(segs) == 0 {
		f.Fatal("no committed segment fixtures to seed the corpus with")
	}
	for i, p := range segs {
		if i >= 4 {
			break
		}
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = readBytes("fuzz.parquet", data, func(calls.Call) error { return nil })
	})
}
