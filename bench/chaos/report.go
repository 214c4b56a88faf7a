package chaos

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the human-readable summary of a run.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bench chaos: seed %d, %d records in %d segments (%d equal-step rows), %d SIGKILLs + %d SIGTERM restarts (%d serve starts), %.1fs\n",
		r.Seed, r.Records, r.Segments, r.EqualStepRows, r.Kills, r.GracefulRestarts, r.ServeStarts, r.ElapsedS)
	if r.ClusterNodes > 0 {
		fmt.Fprintf(&b, "cluster: %d nodes, %d node stops (one node down across each worker stop and restart)\n", r.ClusterNodes, r.NodeStops)
	}
	fmt.Fprintf(&b, "workers: %d unplanned exits\n", r.UnplannedExits)
	fmt.Fprintf(&b, "replay: %d attempts, completed %v; drained %v; %d dead letters\n", r.ReplayAttempts, r.ReplayCompleted, r.Drained, r.DeadLetters)
	fmt.Fprintf(&b, "traces: directory %d calls / %d runs, store %d calls / %d runs: lost %d, duplicated %d, report fields differing %d\n",
		r.DirectCalls, r.DirectRuns, r.StoreCalls, r.StoreRuns, r.Lost, r.Duplicated, len(r.ReportDiffs))
	for _, d := range r.ReportDiffs {
		fmt.Fprintf(&b, "  %s\n", d)
	}
	notOnce := 0
	for _, n := range r.EvalRunsByRequest {
		if n != 1 {
			notOnce++
		}
	}
	fmt.Fprintf(&b, "eval: %d requests, %d runs stored, %d requests not run exactly once, %d not recorded as answered\n",
		r.EvalRequests, r.EvalRuns, notOnce, len(r.EvalNotRecorded))
	fmt.Fprintf(&b, "chains: %d of %d verified\n", r.ChainsVerified, len(r.Chains))
	for _, c := range r.Chains {
		verdict := "OK"
		if !c.OK {
			verdict = "FAIL"
		}
		if c.Error != "" {
			fmt.Fprintf(&b, "  %s %s: FAIL: %s\n", c.Kind, c.Name, c.Error)
			continue
		}
		fmt.Fprintf(&b, "  %s %s: %s: %d events, %d chained, %d heads, %d unverifiable, %d breaks, %d malformed, %d invalid\n",
			c.Kind, c.Name, verdict, c.Events, c.Chained, c.Heads, c.Unverifiable, c.Breaks, c.Malformed, c.Invalid)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(&b, "problems:")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	if r.Dir != "" {
		fmt.Fprintf(&b, "kept: %s (traces/, data/, logs/)\n", r.Dir)
	}
	if r.OK {
		fmt.Fprintln(&b, "verdict: OK: exactly once under faults")
	} else {
		fmt.Fprintln(&b, "verdict: FAIL")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
