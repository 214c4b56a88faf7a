package report

import (
	"fmt"
	"testing"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
)

// BenchmarkComparisonSection5Models2000Cases is the report's comparison
// section over one comparison of 5 models x 2,000 cases: the comparison
// (tests with Holm, frontier, disagreements), the chart and the rows.
func BenchmarkComparisonSection5Models2000Cases(b *testing.B) {
	const models, cases = 5, 2000
	runs := make([]grading.Run, models)
	for k := range runs {
		r := grading.Run{ID: fmt.Sprintf("run-%d", k), ComparisonID: "cmp-1", EvalSetID: "s", EvalSetDigest: "sha256:s", Model: fmt.Sprintf("m%d", k)}
		rate := 60 + 8*k
		for i := range cases {
			sc := grading.Score{CaseID: fmt.Sprintf("c%04d", i), Grader: grading.GraderExact, CostUSD: 0.0001 * float64(k+1), Output: "x"}
			if (i*(k+7)+k)%100 < rate {
				sc.Value = 1
			} else {
				sc.Checks = []grader.Check{{Name: "exact", Detail: "want y"}}
			}
			r.Scores = append(r.Scores, sc)
		}
		runs[k] = r
	}
	b.ReportAllocs()
	for b.Loop() {
		v := comparisons(runs, 1)
		if len(v) != 1 || v[0].Err != "" || v[0].Chart == "" {
			b.Fatalf("no section: %+v", v)
		}
	}
}
