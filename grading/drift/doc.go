// Package drift tells whether quality has slipped against a baseline:
// Compute compares a window of runs with a baseline run (pooled mean,
// threshold, Welch's t, a seeded bootstrap CI and a paired per-case test)
// and returns a Report with its verdict; Data and Events are the report as
// a quality_drift envelope. Baseline is the stored baseline a check names.
//
// Loading the baseline and the window from a store is evalrun.CheckDrift.
package drift
