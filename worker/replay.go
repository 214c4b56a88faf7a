package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/consumer"
)

// ReplayStats counts what Replay published.
type ReplayStats struct {
	Segments   int
	Rows       int      // rows published
	New        int      // rows JetStream stored
	Duplicates int      // rows JetStream dropped as already stored (same message id)
	Ignored    int      // files in the directory that are not segments
	Failed     []string // segments that could not be read, with the reason; none of their rows was published
}

// ReplayOptions tune Replay.
type ReplayOptions struct {
	// Strict stops at the first corrupt segment instead of skipping it.
	Strict bool
	// MaxInFlight bounds publishes awaiting their acknowledgement; the
	// publisher waits for the oldest before sending more. 0 means 1024.
	MaxInFlight int
	// AckTimeout bounds the wait for one acknowledgement before the row is
	// published again (with the same message id, so never twice); 0 means
	// 30 s. A row is tried at most 5 times.
	AckTimeout time.Duration
	// Progress, when set, is called with the running count of acknowledged
	// rows.
	Progress func(rows int)
}

// Replay publishes every row of every segment in dir, in segment order
// (nanos, then sequence, from the file names) and row order, to subject as
// per-call JSON records. Each row carries Nats-Msg-Id SegmentRowID(digest,
// row), and the trace handler deduplicates on the same key, so replaying a
// directory twice never counts a row twice.
//
// A segment is read whole and validated before any of its rows is
// published, so a corrupt segment contributes nothing: it is reported in
// Failed and the rest still replays, unless opts.Strict. Publishing applies
// backpressure (at most MaxInFlight unacknowledged rows), so a slow server
// slows the replay down rather than failing it. Replay blocks until every
// row is acknowledged or ctx is done.
func Replay(ctx context.Context, js jetstream.JetStream, subject, dir string, opts ReplayOptions) (ReplayStats, error) {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 1024
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = 30 * time.Second
	}
	segs, ignored, err := consumer.ListSegments(dir)
	if err != nil {
		return ReplayStats{}, err
	}
	st := ReplayStats{Ignored: ignored}
	p := &publisher{js: js, subject: subject, opts: opts, st: &st}
	for _, seg := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		digest, err := fileDigest(seg.Path)
		if err != nil {
			return st, err
		}
		// Validation pass: a segment that fails anywhere publishes nothing.
		if verr := consumer.ReadSegment(seg.Path, func(calls.Call) error { return nil }); verr != nil {
			if opts.Strict || !consumer.IsSegmentError(verr) {
				return st, fmt.Errorf("replay %s: %w", seg.Path, verr)
			}
			st.Failed = append(st.Failed, verr.Error())
			continue
		}
		row := uint64(0)
		rerr := consumer.ReadSegment(seg.Path, func(c calls.Call) error {
			b, err := json.Marshal(RecordOf(c))
			if err != nil {
				return err
			}
			if err := p.publish(ctx, b, SegmentRowID(digest, row)); err != nil {
				return fmt.Errorf("publish row %d: %w", row, err)
			}
			row++
			return nil
		})
		if rerr != nil {
			// The file changed between the two passes, or publishing
			// failed: rows already published stay deduplicated by id.
			return st, fmt.Errorf("replay %s: %w", seg.Path, rerr)
		}
		st.Segments++
	}
	if err := p.drain(ctx, 0); err != nil {
		return st, err
	}
	if opts.Progress != nil {
		opts.Progress(st.New + st.Duplicates)
	}
	return st, nil
}

// publisher keeps a bounded window of asynchronous publishes.
type publisher struct {
	js      jetstream.JetStream
	subject string
	opts    ReplayOptions
	st      *ReplayStats
	window  []pending
}

type pending struct {
	fut   jetstream.PubAckFuture
	data  []byte
	id    string
	tries int
}

func (p *publisher) publish(ctx context.Context, data []byte, id string) error {
	if err := p.drain(ctx, p.opts.MaxInFlight-1); err != nil {
		return err
	}
	fut, err := p.send(ctx, data, id)
	if err != nil {
		return err
	}
	p.window = append(p.window, pending{fut: fut, data: data, id: id, tries: 1})
	p.st.Rows++
	return nil
}

// send publishes asynchronously, waiting while the client's own pending
// limit is reached instead of failing.
func (p *publisher) send(ctx context.Context, data []byte, id string) (jetstream.PubAckFuture, error) {
	for {
		fut, err := p.js.PublishAsync(p.subject, data, jetstream.WithMsgID(id))
		if err == nil {
			return fut, nil
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return nil, err
		}
		select {
		case <-p.js.PublishAsyncComplete():
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drain waits for acknowledgements until at most keep publishes are in
// flight, re-publishing a row whose ack failed or timed out.
func (p *publisher) drain(ctx context.Context, keep int) error {
	for len(p.window) > keep {
		head := &p.window[0]
		timer := time.NewTimer(p.opts.AckTimeout)
		var ackErr error
		select {
		case ack := <-head.fut.Ok():
			if ack.Duplicate {
				p.st.Duplicates++
			} else {
				p.st.New++
			}
		case ackErr = <-head.fut.Err():
		case <-timer.C:
			ackErr = fmt.Errorf("no acknowledgement after %s", p.opts.AckTimeout)
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		timer.Stop()
		if ackErr != nil {
			if head.tries >= 5 {
				return fmt.Errorf("publish %s: %d tries: %w", head.id, head.tries, ackErr)
			}
			fut, err := p.send(ctx, head.data, head.id)
			if err != nil {
				return fmt.Errorf("publish %s: %w", head.id, err)
			}
			head.fut, head.tries = fut, head.tries+1
			// Keep order: the retried row stays at the head.
			continue
		}
		p.window = p.window[1:]
		if n := p.st.New + p.st.Duplicates; p.opts.Progress != nil && n%1024 == 0 {
			p.opts.Progress(n)
		}
	}
	return nil
}
