package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/consumer"
	"github.com/verdryx/verdryx/outcome"
)

// ReplayStats counts what Replay published.
type ReplayStats struct {
	Segments int
	Rows     int
	Ignored  int      // files in the directory that are not segments
	Failed   []string // segments that could not be read, with the reason
}

// Replay publishes every row of every segment in dir, in segment order
// (nanos, then sequence, from the file names) and row order, to subject as
// per-call JSON records. Each row carries Nats-Msg-Id SegmentRowID(digest,
// row), and the trace handler deduplicates on the same key, so replaying a
// directory twice never counts a row twice. progress, when set, is called
// with the running row count. A corrupt segment is reported in Failed and
// the rest still replays, unless strict.
func Replay(ctx context.Context, js jetstream.JetStream, subject, dir string, strict bool, progress func(rows int)) (ReplayStats, error) {
	segs, ignored, err := consumer.ListSegments(dir)
	if err != nil {
		return ReplayStats{}, err
	}
	st := ReplayStats{Ignored: ignored}
	for _, seg := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		digest, err := fileDigest(seg.Path)
		if err != nil {
			return st, err
		}
		row := uint64(0)
		rerr := consumer.ReadSegment(seg.Path, func(c outcome.Call) error {
			b, err := json.Marshal(RecordOf(c))
			if err != nil {
				return err
			}
			if _, err := js.PublishAsync(subject, b, jetstream.WithMsgID(SegmentRowID(digest, row))); err != nil {
				return fmt.Errorf("publish row %d: %w", row, err)
			}
			row++
			st.Rows++
			if progress != nil && st.Rows%1024 == 0 {
				progress(st.Rows)
			}
			return nil
		})
		if rerr != nil {
			if strict || !consumer.IsSegmentError(rerr) {
				return st, fmt.Errorf("replay %s: %w", seg.Path, rerr)
			}
			st.Failed = append(st.Failed, rerr.Error())
			continue
		}
		st.Segments++
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return st, ctx.Err()
	case <-time.After(5 * time.Minute):
		return st, fmt.Errorf("replay: publish acks not complete after 5 minutes")
	}
	if progress != nil {
		progress(st.Rows)
	}
	return st, nil
}
