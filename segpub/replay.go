package segpub

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/streams"
)

// ErrStreams marks Replay's failure to ensure the streams, before
// anything was published. Test with errors.Is.
var ErrStreams = errors.New("segpub: ensuring the streams")

// streamsErr is an error of EnsureStreams: its message, and ErrStreams.
type streamsErr struct{ err error }

func (e streamsErr) Error() string   { return e.err.Error() }
func (e streamsErr) Unwrap() []error { return []error{e.err, ErrStreams} }

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// FollowOptions tune the publish (Options) and, with Follow, the
	// follower (Settle, Poll, OnPublished). Options.Partitions is
	// Subjects.Partitions whatever it is set to.
	FollowOptions
	// Subjects are the streams ensured and the traces subject published
	// to.
	Subjects streams.Subjects
	// Follow keeps following the directory (Follower) instead of
	// publishing what it holds once (Publish).
	Follow bool
}

// Replay ensures the streams of opts.Subjects (streams.EnsureStreams; an
// error wraps ErrStreams), then publishes the segments of dir to the traces subject: once, as
// Publish does, returning its counts; or with opts.Follow as a Follower
// does until ctx is done, which is then a clean end (nil error, the
// follower's totals left to OnPublished).
func Replay(ctx context.Context, js jetstream.JetStream, dir string, opts ReplayOptions) (Stats, error) {
	s := opts.Subjects
	if _, _, err := streams.EnsureStreams(ctx, js, s, 0); err != nil {
		return Stats{}, streamsErr{err}
	}
	opts.Partitions = s.Partitions
	if !opts.Follow {
		return Publish(ctx, js, s.Traces, dir, opts.Options)
	}
	err := NewFollower(js, s.Traces, dir, opts.FollowOptions).Run(ctx)
	if errors.Is(err, context.Canceled) {
		return Stats{}, nil
	}
	return Stats{}, err
}
