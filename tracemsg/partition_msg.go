package tracemsg

import "github.com/verdryx/verdryx/calls"

// Partitioning of trace records by run.
//
// A trace record goes to the subject <Subjects.Traces>.<p>, where p is
// PartitionOf(run_id, Subjects.Partitions): the FNV-1a 32-bit hash of the
// run id's bytes modulo the partition count. That is the hash nats-server's
// subject-mapping function partition(n, wildcard-index...) applies to the
// wildcard token(s) (server/subject_transform.go, getHashPartition), so a
// producer publishing to verdryx.traces.run.<run_id> under the mapping
//
//	verdryx.traces.run.*  ->  verdryx.traces.{{partition(8,1)}}
//
// lands on the same partition as verdryx's own publishers (a run id that is
// not a valid subject token, one holding '.', '*', '>' or whitespace, or an
// empty one, cannot use that route: publish it to the bare subject, which
// the worker routes). A record without run_id (an independent call) is
// partitioned by its dedupe key (RecordKey); a segment row without a run id
// by its RowKey. Every call of a run is therefore reduced by the one worker
// that owns the run's partition, and partition aggregates simply add up.

// DefaultPartitions is the default partition count of the traces subject.
const DefaultPartitions = 8

// PartitionOf returns FNV-1a 32 of key modulo n (n <= 0 means
// DefaultPartitions). It allocates nothing.
func PartitionOf(key string, n int) int {
	if n <= 0 {
		n = DefaultPartitions
	}
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// RecordPartition returns the partition of a decoded per-call record
// published with message id msgID: by run id, else by its dedupe key.
func RecordPartition(rec *calls.Record, msgID string, n int) (int, error) {
	if rec.HasField(calls.FieldRunID) {
		return PartitionOf(string(rec.Strings[calls.FieldRunID]), n), nil
	}
	key, err := RecordKey(rec, msgID)
	if err != nil {
		return 0, err
	}
	return PartitionOf(key, n), nil
}
