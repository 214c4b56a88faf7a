// Package partstate is the pure partition state of the trace path: what
// one partition of the traces subject has reduced (the partial state of
// every run per UTC day or hour, the dedupe keys of the calls applied, the
// rows of each segment applied, the days folded into day tables and those
// pruned), how a call is folded into it and undone, its encodings (the
// snapshot VDXSNAP1, the delta VDXDLTA1, the day table VDXDAY01; see
// docs/formats.md), and the Aggregate that merges the partitions' states
// into an outcome.Reducer for a report. It links no NATS, no SQL and no
// Parquet, directly or not (TestImportsNoNATSAndNoSQL): package fleet consumes the stream, feeds
// the state, persists its encodings to the KV bucket and acks.
//
// Contracts. A State, a DayTable and an Aggregate are not safe for
// concurrent use: one goroutine (a partition's handler) owns each.
// Aggregate.Reducer reads its Aggregate from goroutines of its own: do
// not change an Aggregate while it runs. Units: ts_millis and watermarks are
// Unix milliseconds; a day is an int32 count of UTC days since
// 1970-01-01 (DayOf, DayMillis); costs are integer micro-USD, sums
// refused on int64 overflow; written times of day tables are Unix
// seconds. Decoders refuse another format's magic by name and truncated
// input with an error; a day table also a bad checksum
// (FuzzDecodeDayTable).
package partstate
