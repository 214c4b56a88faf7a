// Package outcome turns TokenFuse call records into cost per outcome and SLO
// error budgets. A Reducer folds calls (from Parquet segments read by package segment,
// from NDJSON/CSV records, or one by one from a store) into a few words of
// state per run, in any order, exactly as TokenFuse's compute_outcomes
// reduces them: a run's outcome is its last non-empty tag by step, blocked
// calls are counted but never costed, a run with no tag is "(untagged)".
// Reports are built from that state on demand; memory grows with runs, not
// calls.
package outcome
