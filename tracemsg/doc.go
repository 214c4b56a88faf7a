// Package tracemsg defines what a per-call message on the traces subjects
// is and who it belongs to: a call's dedupe key (RecordKey over a
// calls.Record decoded by calls.DecodeRecord, RowKey, HashKey; the one
// place keys are defined), its partition (PartitionOf, RecordPartition)
// and the headers that carry identity across routing and re-drives. Every
// publisher (segpub, tailfwd, the fleet's router) and the fleet's
// partitions agree through it.
package tracemsg
