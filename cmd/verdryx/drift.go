package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/qualitylog"
	"github.com/verdryx/verdryx/store"
)

// newBaselineCmd makes the baseline command, which snapshots a stored run as a baseline.
func newBaselineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baseline RUN_ID",
		Short: "snapshot a stored run as a baseline",
		Long: "Snapshot a stored run's mean score as a baseline for drift.\nA run with no graded case is refused: its mean is unmeasured.\n" +
			"A label names the newest baseline that carries it: the same run and label again answers the existing baseline\n" +
			"(no new one); a label given to another run moves to the new baseline, and the old one keeps its id and label.\n" +
			"drift --baseline takes the id or the label. The first line is \"Baseline <id>  (run=<run>, mean_score=<mean>)\",\n" +
			"as the Python verdryx prints it.\n" +
			"With --nats the store first catches up from the fleet's quality log (so a run any worker graded can be named),\n" +
			"and the baseline is recorded on the log, so every store has it; the log orders baselines, and a label names the\n" +
			"latest in the log: when another worker's baseline of the same label lands after this one, it says so.",
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	label := fs.String("label", "", "a label for the baseline, e.g. v1 (drift --baseline accepts it)")
	asJSON := fs.Bool("json", false, "print the baseline as JSON")
	nf := addNATSFlags(fs, "", "NATS server URL of the fleet: catch the store up from its quality log and record the baseline there")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) != 1 {
			return usageErrorf("baseline: want exactly one RUN_ID, have %d arguments", len(pos))
		}
		mode := storeWriteExisting
		if *nf.url != "" {
			mode = storeWrite // a store that only follows the log may be new
		}
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, mode)
		if err != nil {
			return err
		}
		defer st.Close()
		var lg *qualitylog.Log
		if *nf.url != "" {
			var closeNC func()
			if lg, closeNC, err = openQualityLog(ctx, nf, st, "verdryx-baseline"); err != nil {
				return err
			}
			defer closeNC()
			if _, err := lg.Sync(ctx); err != nil {
				return serviceError(err)
			}
		}
		p, err := st.PutBaseline(ctx, store.BaselineSpec{RunID: pos[0], Label: *label}, time.Now())
		if err != nil {
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnmeasured) || errors.Is(err, store.ErrBadLabel) {
				return inputError(err)
			}
			return err
		}
		var superseded *store.Put
		if lg != nil {
			if superseded, err = recordBaseline(ctx, lg, st, p); err != nil {
				return err
			}
		}
		if *asJSON {
			return writeJSON(stdout, struct {
				store.Put
				SupersededBy *drift.Baseline `json:"superseded_by,omitempty"`
			}{p, supersededBaseline(superseded)})
		}
		fmt.Fprintf(stdout, "Baseline %s  (run=%s, mean_score=%.3f)\n", p.ID, p.RunID, p.MeanScore)
		if superseded != nil {
			fmt.Fprintf(stdout, "  label %q was taken later in the fleet's quality log by %s of run %s: drift --baseline %s uses that one; this baseline keeps its id\n",
				p.Label, superseded.ID, superseded.RunID, p.Label)
		}
		switch {
		case !p.Created:
			fmt.Fprintf(stdout, "  already stored: this run's baseline%s\n", labelNote(p.Label))
		case p.Previous != nil:
			fmt.Fprintf(stdout, "  label %q now names this baseline (it named %s of run %s, which keeps its id)\n", p.Label, p.Previous.ID, p.Previous.RunID)
		case p.Label != "":
			fmt.Fprintf(stdout, "  label %q\n", p.Label)
		}
		return nil
	}
	return cmd
}

// supersededBaseline is the baseline of a superseding Put, nil for none.
func supersededBaseline(p *store.Put) *drift.Baseline {
	if p == nil {
		return nil
	}
	return &p.Baseline
}

// labelNote is " (label "x")", or "" without a label.
func labelNote(label string) string {
	if label == "" {
		return ""
	}
	return fmt.Sprintf(" (label %q)", label)
}

// newBaselinesCmd lists the stored baselines.
func newBaselinesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baselines",
		Short: "list stored baselines",
		Long:  "List stored baselines, oldest first: id, label, run, creation time, the run's case count and mean score.",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	asJSON := fs.Bool("json", false, "print the baselines as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, storeRead)
		if err != nil {
			return err
		}
		defer st.Close()
		list, err := st.BaselineList(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			if list == nil {
				list = []store.BaselineInfo{}
			}
			return writeJSON(stdout, list)
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "no baselines stored (verdryx baseline RUN_ID --label L makes one)")
			return nil
		}
		fmt.Fprintf(stdout, "%-32s  %-12s  %-36s  %-20s  %5s  %s\n", "BASELINE", "LABEL", "RUN", "CREATED", "CASES", "MEAN")
		for _, b := range list {
			label := b.Label
			if label == "" {
				label = "-"
			}
			fmt.Fprintf(stdout, "%-32s  %-12s  %-36s  %-20s  %5d  %.3f\n", b.ID, label, b.RunID, b.CreatedAt.Format(time.RFC3339), b.Cases, b.MeanScore)
		}
		return nil
	}
	return cmd
}

// newDriftCmd makes the drift command, which compares the most recent runs with a baseline. Exit 0 on-track,
// 1 regressed, 2 usage or input error (including a changed eval set).
func newDriftCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drift",
		Short: "compare recent runs against a baseline",
		Long: "Compare the most recent runs of the baseline's eval set and model with the baseline.\n" +
			"The window takes only runs graded under the baseline run's settings (judge, semantic checks and threshold, index generation,\n" +
			"embedder, retrieval, top_k, generator, typed template; verdryx runs shows them) and says which it skipped and why;\n" +
			"--allow-changed-settings pools them and the report names what differed.\n" +
			"Pooled mean, delta against the baseline mean (regressed at delta <= -threshold), Welch's t, a seeded bootstrap CI\n" +
			"(regressed when ci_high < 0) and a paired per-case test. Emits quality_drift only when regressed.\n" +
			"Every report says whether the drop is significant (ci_high < 0, or paired p < --alpha); the verdict rule is unchanged.\n" +
			"Exit 0: on-track (or, with --require-significance, a regression that is not significant); 1: regressed;\n" +
			"2: usage or input error (a changed eval set is refused unless --allow-changed-set; no run graded under the\n" +
			"baseline's settings unless --allow-changed-settings).",
	}
	fs := cmd.Flags()
	c := addEvalFlags(fs, g)
	baseline := fs.String("baseline", "", "baseline id or label (required; verdryx baselines lists them)")
	window := fs.Int("window", 3, "number of most recent runs pooled (the baseline's own run is left out)")
	threshold := fs.Float64("threshold", drift.DefaultThreshold, "regressed when mean - baseline <= -threshold")
	allow := fs.Bool("allow-changed-set", false, "compare runs whose eval set changed since the baseline (the report says so)")
	allowSettings := fs.Bool("allow-changed-settings", false, "pool runs graded under other settings than the baseline's run (the report names what differed)")
	seedFlag := fs.String("seed", "", "seed for the bootstrap and permutation draws (default: derived from the baseline and window run ids)")
	alpha := fs.Float64("alpha", drift.DefaultAlpha, "a drop is significant when the bootstrap CI lies below 0 or the paired test's p < alpha")
	requireSig := fs.Bool("require-significance", false, "exit 1 only for a significant regression (for CI gates on small sets)")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) != 0 {
			return usageErrorf("drift: unexpected arguments %q", pos)
		}
		if *baseline == "" {
			return usageErrorf("drift: --baseline is required")
		}
		if *threshold == 0 { // --window, --threshold and --alpha are range-checked at parse (ranges.go)
			return usageErrorf("drift: --threshold must be in (0, 1]")
		}
		var seed *uint64
		if *seedFlag != "" {
			var v uint64
			if _, err := fmt.Sscan(*seedFlag, &v); err != nil {
				return usageErrorf("drift: --seed %q is not an unsigned integer", *seedFlag)
			}
			seed = &v
		}
		s, err := openEvalSinks(ctx, cmd.ErrOrStderr(), c, storeRead)
		if err != nil {
			return err
		}
		started := time.Now()
		rep, err := evalrun.CheckDrift(ctx, s.store, evalrun.DriftRequest{
			BaselineID: *baseline, Window: *window, Threshold: *threshold, AllowChangedSet: *allow, AllowChangedSettings: *allowSettings, Seed: seed, Alpha: *alpha,
		})
		if err != nil {
			s.close(ctx)
			if errors.Is(err, grading.ErrBadRequest) {
				return inputError(err)
			}
			return err
		}
		printWarnings(stderr, emitDrift(ctx, s, rep, *c.agentID, started))
		unwritten := s.eventsNotWritten(stderr)
		if *c.asJSON {
			if err := writeJSON(stdout, rep); err != nil {
				return err
			}
		} else {
			printDrift(stdout, rep)
		}
		if driftFails(rep, *requireSig) || unwritten > 0 {
			return failed()
		}
		return nil
	}
	return cmd
}

// emitDrift appends the drift events and the span of rep
// (evalrun.EmitDrift), closes the sinks and returns the problems met.
func emitDrift(ctx context.Context, s *evalSinks, rep drift.Report, agentID string, started time.Time) []string {
	d := s.deps()
	problems := evalrun.EmitDrift(ctx, d.Events, d.Spans, rep, agentID, started, time.Now())
	if err := s.close(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	if s.spansErr != nil {
		problems = append(problems, s.spansErr.Error())
	}
	return problems
}

// driftFails is the exit rule: a regressed verdict fails; with
// requireSignificance only a significant regression does.
func driftFails(r drift.Report, requireSignificance bool) bool {
	return r.Verdict == drift.VerdictRegressed && (!requireSignificance || r.Significant)
}

func printDrift(w io.Writer, r drift.Report) {
	fmt.Fprintf(w, "drift of %s / %s against baseline %s (run %s)\n", r.EvalSetID, r.Model, r.BaselineID, r.BaselineRunID)
	if r.ChangedSet {
		fmt.Fprintf(w, "WARNING: the eval set changed since the baseline (--allow-changed-set); changed cases: %s\n", strings.Join(r.ChangedCases, ", "))
	}
	if r.ChangedSettings {
		fmt.Fprintf(w, "WARNING: runs graded under other settings than the baseline's are pooled (--allow-changed-settings):\n")
		for _, c := range r.SettingsChanges {
			fmt.Fprintf(w, "  run %s: %s\n", c.RunID, strings.Join(c.Changes, ", "))
		}
	}
	fmt.Fprintf(w, "  settings      %s\n", grading.SettingsText(r.BaselineSettings, false))
	if r.SettingsUnknown {
		fmt.Fprintf(w, "NOTE: the baseline's run records no settings (the Python verdryx's, or stored before verdryx recorded them):\n"+
			"  the window's runs are pooled whatever their settings; take a new baseline to compare runs graded alike\n")
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "  skipped       %d runs graded under other settings (--allow-changed-settings pools them):\n", len(r.Skipped))
		for _, c := range r.Skipped {
			fmt.Fprintf(w, "                run %s: %s\n", c.RunID, strings.Join(c.Changes, ", "))
		}
	}
	fmt.Fprintf(w, "  window        %d runs, %d graded scores: %s\n", r.Window, r.WindowN, strings.Join(r.WindowRunIDs, ", "))
	fmt.Fprintf(w, "  mean          %.4f (baseline %.4f, %d scores)\n", r.MeanScore, r.BaselineMean, r.BaselineN)
	fmt.Fprintf(w, "  delta         %+.4f (threshold %.4f)\n", r.Delta, r.Threshold)
	if r.CILow != nil {
		t := "undefined (both sides constant)"
		if r.TStatistic != nil {
			t = fmt.Sprintf("%.4f", *r.TStatistic)
		}
		if r.TStatistic != nil && r.WelchDF != nil && r.WelchP != nil {
			t += fmt.Sprintf(", df %.2f, two-sided p %.4f", *r.WelchDF, *r.WelchP)
		}
		fmt.Fprintf(w, "  welch t       %s\n", t)
		fmt.Fprintf(w, "  bootstrap CI  [%.4f, %.4f] (95%%, %d resamples, seed %d)\n", *r.CILow, *r.CIHigh, r.Resamples, r.Seed)
	} else {
		fmt.Fprintf(w, "  significance  not computed (fewer than 2 graded scores on a side)\n")
	}
	if p := r.Paired; p != nil {
		fmt.Fprintf(w, "  paired        %d cases, mean delta %+.4f, CI [%.4f, %.4f], sign-flip p %.4f\n", p.Cases, p.MeanDelta, p.CILow, p.CIHigh, p.PValue)
	}
	fmt.Fprintf(w, "  significance  %s\n", r.Significance)
	fmt.Fprintf(w, "verdict %s (%s)\n", r.VerdictText(), strings.Join(r.Why, "; "))
}

// newRunsCmd makes the runs command, which lists stored runs.
func newRunsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "list stored eval runs",
		Long: "List stored eval runs, most recent first, with the settings that changed their scores (drift pools only runs\n" +
			"graded alike): judge, sem (semantic judge) and sem@ (its threshold), idx (index generation), emb (embedder),\n" +
			"ret (retrieval), k (top_k), gen (generator), typed (typryx template); \"none\" when the run used none of them,\n" +
			"\"not recorded\" for runs stored before verdryx recorded them (and the Python verdryx's).",
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	asJSON := fs.Bool("json", false, "print the runs as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) != 0 {
			return usageErrorf("runs: unexpected arguments %q", pos)
		}
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, storeRead)
		if err != nil {
			return err
		}
		defer st.Close()
		runs, err := st.Runs(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			if runs == nil {
				runs = []store.RunInfo{}
			}
			return writeJSON(stdout, runs)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "verdryx: store %s\n", dbPath(*db, g.data))
		if note := historyNote(ctx, st); note != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "verdryx: %s\n", note)
		}
		if len(runs) == 0 {
			fmt.Fprintln(stdout, "no runs stored")
			return nil
		}
		fmt.Fprintf(stdout, "%-36s  %-20s  %-18s  %-10s  %-22s  %s\n", "RUN", "STARTED", "EVAL SET", "MODEL", "MEAN (graded/cases)", "SETTINGS")
		for _, r := range runs {
			mean := "unmeasured"
			if r.MeanScore != nil {
				mean = fmt.Sprintf("%.3f", *r.MeanScore)
			}
			mean = fmt.Sprintf("%s (%d/%d)", mean, r.Graded, r.Cases)
			fmt.Fprintf(stdout, "%-36s  %-20s  %-18s  %-10s  %-22s  %s\n", r.ID, r.StartedAt.Format(time.RFC3339), r.EvalSetID, r.Model, mean, grading.SettingsText(r.Settings, true))
		}
		return nil
	}
	return cmd
}
