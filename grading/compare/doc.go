// Package compare compares models graded on one eval set: per model the
// mean with its 95% interval, the cases measured, the passes, the spend
// and the cost per correct answer; every model tested against the best
// by mean, paired on the cases both measured (drift.Paired), with Holm's
// correction across the tests; the quality-cost frontier; the cheapest
// model not distinguishable from the best, as the routing candidate; and
// the cases where the models disagree. It computes only: running the
// models and storing their runs is the caller's (verdryx compare).
package compare
