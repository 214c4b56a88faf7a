package drift_test

import (
	"fmt"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
)

func ExampleCompute() {
	mk := func(id string, vals ...float64) grading.Run {
		r := grading.Run{ID: id, EvalSetID: "demo", EvalSetDigest: "sha256:d", Model: "stub"}
		for i, v := range vals {
			r.Scores = append(r.Scores, grading.Score{CaseID: fmt.Sprint("c", i), Value: v})
		}
		return r
	}
	base := mk("run-1", 1, 1, 1, 1, 0.5, 1, 1, 1)
	bl := drift.Baseline{ID: "bl-1", RunID: "run-1", MeanScore: 0.9375}
	window := []grading.Run{mk("run-3", 1, 0, 1, 0, 0.5, 1, 0, 1), mk("run-2", 1, 0, 1, 0, 0.5, 1, 0, 1)}
	rep, err := drift.Compute(bl, base, window, drift.Options{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("mean %.4f delta %+.4f verdict %s, ci_high below 0: %v\n", rep.MeanScore, rep.Delta, rep.Verdict, *rep.CIHigh < 0)
	// Output: mean 0.5625 delta -0.3750 verdict regressed, ci_high below 0: true
}
