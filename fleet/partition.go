package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/streams"
)

// partitionGroup is the priority group of every partition consumer: with
// the pinned-client policy, one client at a time receives a partition.
const partitionGroup = "verdryx"

// DefaultPinnedTTL is how long a partition stays pinned to a client that
// stopped pulling (a dead worker) before another worker takes it over.
const DefaultPinnedTTL = 10 * time.Second

// defaultAckWait is the partition consumers' ack wait by default.
const defaultAckWait = 30 * time.Second

// PartitionConsumer is the durable consumer name of partition p.
func PartitionConsumer(p int) string { return streams.TracesConsumer + "-" + strconv.Itoa(p) }

// PartitionOptions tune EnsurePartitions.
type PartitionOptions struct {
	// PinnedTTL: see DefaultPinnedTTL; 0 means that.
	PinnedTTL time.Duration
	// MaxAckPending per partition consumer; 0 means 50,000 (the worker
	// holds acks until the partition's snapshot is written).
	MaxAckPending int
	// AckWait: how long a record delivered to a worker that died waits
	// before it is redelivered; 0 means 30 s.
	AckWait time.Duration
}

// EnsurePartitions creates (or updates) the durable consumer of every
// partition of the traces stream: filtered to its partition subject,
// AckAll (the owner acks a partition's newest record once its snapshot is
// written, which acks every earlier one; see Fleet), unlimited redelivery,
// and the pinned-client priority policy with group partitionGroup. A
// partition consumer created by an earlier version with explicit acks is
// recreated from its ack floor (JetStream cannot change a consumer's ack
// policy): the records after the floor are delivered again and deduplicated.
// It is idempotent and safe from every worker. The streams must exist
// (streams.EnsureStreams).
func EnsurePartitions(ctx context.Context, js jetstream.JetStream, s streams.Subjects, opts PartitionOptions) ([]jetstream.Consumer, error) {
	if opts.PinnedTTL <= 0 {
		opts.PinnedTTL = DefaultPinnedTTL
	}
	if opts.MaxAckPending <= 0 {
		opts.MaxAckPending = 50000
	}
	if opts.AckWait <= 0 {
		opts.AckWait = defaultAckWait
	}
	out := make([]jetstream.Consumer, s.PartitionCount())
	for p := range out {
		c, err := ensurePartitionConsumer(ctx, js, s.TracesStream, jetstream.ConsumerConfig{
			Durable: PartitionConsumer(p), FilterSubject: streams.TraceSubject(s.Traces, p),
			AckPolicy: jetstream.AckAllPolicy, AckWait: opts.AckWait, MaxDeliver: -1, MaxAckPending: opts.MaxAckPending,
			PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: opts.PinnedTTL, PriorityGroups: []string{partitionGroup},
		})
		if err != nil {
			return nil, fmt.Errorf("consumer %s: %w", PartitionConsumer(p), err)
		}
		out[p] = c
	}
	return out, nil
}

// ensurePartitionConsumer creates the consumer cfg, updates it keeping the
// delivery start it was created with, or migrates one with another ack
// policy (deleted, then created to start after its ack floor).
func ensurePartitionConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := js.Consumer(ctx, stream, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return js.CreateOrUpdateConsumer(ctx, stream, cfg)
	case err != nil:
		return nil, err
	}
	info := c.CachedInfo()
	if info.Config.AckPolicy == cfg.AckPolicy {
		cfg.DeliverPolicy, cfg.OptStartSeq = info.Config.DeliverPolicy, info.Config.OptStartSeq
		return js.CreateOrUpdateConsumer(ctx, stream, cfg)
	}
	// Every record up to the ack floor is in the partition's snapshot
	// (explicit acks were sent after it); the rest are delivered again.
	if floor := info.AckFloor.Stream; floor > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, floor+1
	}
	if err := js.DeleteConsumer(ctx, stream, cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("migrate to ack-all: %w", err)
	}
	c, err = js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another worker migrated it meanwhile.
		return js.Consumer(ctx, stream, cfg.Durable)
	}
	return c, err
}

// lastSeqOf returns the stream sequence of the newest message on subject,
// 0 when there is none.
func lastSeqOf(ctx context.Context, stream jetstream.Stream, subject string) (uint64, error) {
	m, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last message of %s: %w", subject, err)
	}
	return m.Sequence, nil
}
