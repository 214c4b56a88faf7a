// Package fleet is the trace path after JetStream: one pinned-client
// puller per partition of the traces subject, each partition's reduction
// state (run aggregates, dedupe keys, the rows of each segment applied)
// snapshotted to the KV bucket
// Bucket, acks held until the snapshot is written, takeover from the
// newest snapshot with a catch-up, and the router that moves records of
// the bare subject onto their partitions (Fleet, New). Readers merge the
// partitions' published aggregates (ReadAggregate, the one reader) into an
// outcome.Reducer.
package fleet
