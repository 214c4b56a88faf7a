package streams

import (
	"context"
	"errors"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// ensureStream creates cfg's stream, or updates it when what verdryx sets
// (subjects, and the duplicate window and retention when cfg sets them:
// a Duplicates below 0 is unset, DuplicateWindow for a new stream) differs or
// it has fewer replicas than cfg (replicas are raised, never lowered). A stream that already
// matches is only read: a restart needs no cluster-wide change, so it
// works while a node of the cluster is down.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	switch {
	case err == nil:
		have := s.CachedInfo().Config
		// A duplicate window left unset is the server's default (2 min).
		// Replicas are raised, never lowered: a client started without
		// --replicas (a replay, dlq) must not scale an R3 stream down.
		// Retention (MaxAge, MaxBytes) left unset (0, and -1 for bytes)
		// keeps the stream's own: only a worker configures it.
		if cfg.MaxAge == 0 {
			cfg.MaxAge = have.MaxAge
		}
		if cfg.Duplicates < 0 {
			cfg.Duplicates = have.Duplicates
		}
		if cfg.MaxBytes <= 0 {
			cfg.MaxBytes = have.MaxBytes
		}
		if have.Replicas >= max(cfg.Replicas, 1) && (cfg.Duplicates == 0 || have.Duplicates == cfg.Duplicates) &&
			sameSet(have.Subjects, cfg.Subjects) && have.MaxAge == cfg.MaxAge && have.MaxBytes == cfg.MaxBytes {
			return s, nil
		}
		cfg.Replicas = max(cfg.Replicas, have.Replicas)
		return js.UpdateStream(ctx, cfg)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if cfg.MaxBytes == 0 {
			cfg.MaxBytes = -1 // the server's "unlimited"
		}
		if cfg.Duplicates < 0 {
			cfg.Duplicates = DuplicateWindow
		}
		s, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return js.Stream(ctx, cfg.Name) // another worker created it first
		}
		return s, err
	default:
		return nil, err
	}
}

// EnsureKV binds cfg's bucket, creating it, or updating it when its TTL or
// history differ or it has fewer replicas than cfg (an existing
// one-replica bucket gains the configured replicas; none loses any).
func EnsureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	switch {
	case err == nil:
		st, err := kv.Status(ctx)
		if err != nil {
			return nil, err
		}
		if info, ok := st.(*jetstream.KeyValueBucketStatus); ok {
			c := info.StreamInfo().Config
			if c.Replicas >= max(cfg.Replicas, 1) && c.MaxAge == cfg.TTL && c.MaxMsgsPerSubject == int64(max(cfg.History, 1)) {
				return kv, nil
			}
			cfg.Replicas = max(cfg.Replicas, c.Replicas) // raised, never lowered
		}
		return js.UpdateKeyValue(ctx, cfg)
	case errors.Is(err, jetstream.ErrBucketNotFound):
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.KeyValue(ctx, cfg.Bucket)
		}
		return kv, err
	default:
		return nil, err
	}
}

// ensureConsumer binds the durable consumer cfg.Durable of stream, creating
// or updating it when its filter, acks or limits differ.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := js.Consumer(ctx, stream, cfg.Durable)
	if err == nil {
		have := c.CachedInfo().Config
		if have.FilterSubject == cfg.FilterSubject && have.AckPolicy == cfg.AckPolicy && have.AckWait == cfg.AckWait &&
			have.MaxDeliver == cfg.MaxDeliver && have.MaxAckPending == cfg.MaxAckPending {
			return c, nil
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	}
	return js.CreateOrUpdateConsumer(ctx, stream, cfg)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
