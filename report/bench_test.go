package report_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdryx/verdryx/report"
	"github.com/verdryx/verdryx/report/fixture"
)

// BenchmarkRender1000Runs200Cases loads and renders a store of 1,000 runs x
// 200 cases (made at run time) with the slo trace fixture: the budget is
// under 2 s per page and a page under 5 MiB (checked).
//
//	go test ./report/ -run '^$' -bench Render -benchtime 3x
func BenchmarkRender1000Runs200Cases(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, filepath.Join(b.TempDir(), "verdryx.db"))
	started := time.Now()
	if _, err := fixture.Populate(ctx, st, fixture.Spec{Runs: 1000, Cases: 200, Seed: 1, Regress: 900,
		UnmeasuredCase: true, UnmeasuredRun: 500, Step: 10 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	b.Logf("store of 1,000 runs x 200 cases written in %v", time.Since(started).Round(time.Millisecond))
	var size int
	b.ReportAllocs()
	for b.Loop() {
		in, err := report.Load(ctx, st, time.Time{}, 0)
		if err != nil {
			b.Fatal(err)
		}
		in.Traces = reduceFixture(b, "slo")
		var buf bytes.Buffer
		if err := report.Render(ctx, &buf, in, report.Options{Version: "bench"}); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
	if size >= 5<<20 {
		b.Fatalf("page is %d bytes, over the 5 MiB budget", size)
	}
}
