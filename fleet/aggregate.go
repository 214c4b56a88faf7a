package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/streams"
)

// MissingPartitionsError is returned by ReadAggregate when partitions that
// hold trace records have never had an aggregate published (no worker has
// owned them yet): a merged report without them would be wrong.
type MissingPartitionsError struct {
	Partitions []int
}

func (e *MissingPartitionsError) Error() string {
	s := make([]string, len(e.Partitions))
	for i, p := range e.Partitions {
		s[i] = fmt.Sprint(p)
	}
	return fmt.Sprintf("partition(s) %s have trace records but no published aggregate (no worker has owned them yet; start a worker or wait for one to take them over)",
		strings.Join(s, ", "))
}

// ReadAggregate reads every partition's newest published aggregate from
// the KV bucket Bucket and returns their union. A partition with
// no aggregate and no record in the stream counts as empty; one with
// records but no aggregate fails the read (MissingPartitionsError). The
// aggregates are as of each owner's last snapshot (at most SnapshotEvery
// behind what it has applied, five times that while its partition has a
// backlog; it acks only what a snapshot holds, so nothing acked is
// missing).
// It only reads.
func ReadAggregate(ctx context.Context, js jetstream.JetStream, s streams.Subjects) (*Aggregate, error) {
	return ReadAggregateFor(ctx, js, s, outcome.Options{})
}

// ReadAggregateFor is ReadAggregate for the reports of opts' time window
// only: of the folded days it reads the tables of the window's days
// alone (a day's report over a week's retention reads a seventh of
// them), and counts the others' calls as outside the window from the
// references the aggregates hold. Its Reducer refuses a window with days
// outside opts'. A window off the hour fails with ErrWindowNotWholeHours
// before anything is read.
func ReadAggregateFor(ctx context.Context, js jetstream.JetStream, s streams.Subjects, opts outcome.Options) (*Aggregate, error) {
	want, err := partstate.WindowDays(opts)
	if err != nil {
		return nil, err
	}
	n := s.PartitionCount()
	stream, err := js.Stream(ctx, s.TracesStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", s.TracesStream, err)
	}
	kv, err := js.KeyValue(ctx, Bucket)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("kv bucket %s: %w", Bucket, err)
	}
	agg := &Aggregate{Parts: map[int]*partstate.State{}, Tables: map[int]map[int32][]byte{}, Read: want}
	var missing []int
	for p := range n {
		st, tables, err := readPartAggregate(ctx, kv, p, n, want)
		if err != nil {
			return nil, err
		}
		if st != nil {
			agg.Parts[p] = st
			agg.Tables[p] = tables
			continue
		}
		last, err := lastSeqOf(ctx, stream, streams.TraceSubject(s.Traces, p))
		if err != nil {
			return nil, err
		}
		if last > 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, &MissingPartitionsError{Partitions: missing}
	}
	return agg, nil
}

// readPartAggregate reads partition p's aggregate and the tables of its
// folded days in want, nil when none was published. An object replaced
// between reading the pointer and the object is read again from the new
// pointer.
func readPartAggregate(ctx context.Context, kv jetstream.KeyValue, p, n int, want partstate.DayWindow) (*partstate.State, map[int32][]byte, error) {
	if kv == nil {
		return nil, nil, nil
	}
	for try := 0; ; try++ {
		e, err := kv.Get(ctx, partitionKey(p))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("partition %d pointer: %w", p, err)
		}
		ptr, err := decodePointer(p, e.Value())
		if err != nil {
			return nil, nil, err
		}
		if ptr.Partitions != n {
			return nil, nil, fmt.Errorf("partition %d was published with %d partitions, not %d (Subjects.Partitions)", p, ptr.Partitions, n)
		}
		b, err := getBlob(ctx, kv, ptr.Aggregate)
		if errors.Is(err, errBlobChanged) && try < 5 {
			continue // overwritten by a newer aggregate meanwhile
		}
		if err != nil {
			return nil, nil, fmt.Errorf("partition %d aggregate: %w", p, err)
		}
		st, err := partstate.DecodeState(b)
		if err != nil {
			return nil, nil, err
		}
		if st.Part != p || st.Parts != n {
			return nil, nil, fmt.Errorf("aggregate %s holds partition %d of %d", ptr.Aggregate.Prefix, st.Part, st.Parts)
		}
		err = applyDeltaBlobs(ctx, kv, st, ptr.Deltas)
		if errors.Is(err, errBlobChanged) && try < 5 {
			continue // a new base written meanwhile
		}
		if err != nil {
			return nil, nil, fmt.Errorf("partition %d aggregate: %w", p, err)
		}
		tables, err := fetchDays(ctx, kv, st, want, false)
		if errors.Is(err, errBlobChanged) && try < 5 {
			continue // a day table corrected or pruned meanwhile
		}
		if err != nil {
			return nil, nil, err
		}
		return st, tables, nil
	}
}

// applyDeltaBlobs reads the deltas refs names from the bucket and applies
// them, in order, to s. A delta deleted meanwhile (a new base written
// over it) reads as errBlobChanged: read the pointer again.
func applyDeltaBlobs(ctx context.Context, kv jetstream.KeyValue, s *partstate.State, refs []blobRef) error {
	chain := make([][]byte, len(refs))
	for i, ref := range refs {
		b, err := getBlob(ctx, kv, ref)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = fmt.Errorf("%w: %w", errBlobChanged, err)
		}
		if err != nil {
			return fmt.Errorf("delta %d of %d: %w", i+1, len(refs), err)
		}
		chain[i] = b
	}
	return s.ApplyDeltas(chain)
}

// Aggregate is the merged state of the partitions (partstate.Aggregate),
// as ReadAggregate returns it.
type Aggregate = partstate.Aggregate

// The errors a report window can be refused with (Aggregate.Reducer).
var (
	ErrWindowNotWholeHours = partstate.ErrWindowNotWholeHours
	ErrWindowCutsWholeDay  = partstate.ErrWindowCutsWholeDay
)

// DefaultFoldAfter is Options.FoldAfter's default (partstate.DefaultFoldAfter).
const DefaultFoldAfter = partstate.DefaultFoldAfter
