package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/producer"
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
	// Partitions is the partition count: each row goes to
	// <subject>.<PartitionOf(run_id)> (a row without run id: of its RowKey).
	// 0 means DefaultPartitions.
	Partitions int
	// Logger, when set, hears (once per 10 s) of acknowledgements that
	// fail while the server is away, and of the rows sent again.
	Logger *slog.Logger
}

// Replay publishes every row of every segment in dir, in segment order
// (nanos, then sequence, from the file names) and row order, to its
// partition subject under subject (see PartitionOf) as per-call JSON
// records. Each row carries Nats-Msg-Id SegmentRowID(digest,
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
	segs, ignored, err := segment.List(dir)
	if err != nil {
		return ReplayStats{}, err
	}
	st := ReplayStats{Ignored: ignored}
	p := producer.NewAsyncPublisher(js, subject, producer.AsyncOptions{MaxInFlight: opts.MaxInFlight, AckTimeout: opts.AckTimeout, Progress: opts.Progress, Logger: opts.Logger})
	// stats is st with the publisher's counts.
	stats := func() ReplayStats {
		ps := p.Stats()
		st.Rows, st.New, st.Duplicates = ps.Published, ps.New, ps.Duplicates
		return st
	}
	for _, seg := range segs {
		if err := ctx.Err(); err != nil {
			return stats(), err
		}
		digest, err := fileDigest(seg.Path)
		if err != nil {
			return stats(), err
		}
		// Validation pass: a segment that fails anywhere publishes nothing.
		if verr := segment.Read(seg.Path, func(calls.Call) error { return nil }); verr != nil {
			if opts.Strict || !segment.IsError(verr) {
				return stats(), fmt.Errorf("replay %s: %w", seg.Path, verr)
			}
			st.Failed = append(st.Failed, verr.Error())
			continue
		}
		row := uint64(0)
		// The segment's name orders its rows among other segments'.
		hdr := nats.Header{HeaderSegment: []string{filepath.Base(seg.Path)}}
		rerr := segment.Read(seg.Path, func(c calls.Call) error {
			b, err := json.Marshal(RecordOf(c))
			if err != nil {
				return err
			}
			id := SegmentRowID(digest, row)
			part := PartitionOf(MsgIDKey(id), opts.Partitions)
			if c.HasRunID {
				part = PartitionOf(c.RunID, opts.Partitions)
			}
			if err := p.PublishWithHeader(ctx, TraceSubject(subject, part), hdr, b, id); err != nil {
				return fmt.Errorf("publish row %d: %w", row, err)
			}
			row++
			return nil
		})
		if rerr != nil {
			// The file changed between the two passes, or publishing
			// failed: rows already published stay deduplicated by id.
			return stats(), fmt.Errorf("replay %s: %w", seg.Path, rerr)
		}
		st.Segments++
	}
	if err := p.Drain(ctx); err != nil {
		return stats(), err
	}
	if opts.Progress != nil {
		ps := p.Stats()
		opts.Progress(ps.New + ps.Duplicates)
	}
	return stats(), nil
}
