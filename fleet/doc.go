// Package fleet is the trace path after JetStream, the consumer that
// feeds package partstate: one pinned-client puller per partition of the
// traces subject, each applying its messages to the partition's
// partstate.State, snapshotting its encodings (snapshot, deltas, day
// tables, aggregate) to the KV bucket Bucket, and acking only once the
// snapshot is written; takeover from the newest snapshot with a catch-up,
// and the router that moves records of the bare subject onto their
// partitions (Fleet, New). Readers merge the partitions' published
// aggregates (ReadAggregate, the one reader) into an outcome.Reducer.
package fleet
