package fleet

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
)

// router moves records published to the bare traces subject to their
// partition subjects: a row batch to the partition it was cut for, a
// record to its run's (or key's) partition with its identity kept
// (tracemsg.HeaderOrigMsgID, tracemsg.HeaderRouted). The routed copies carry
// message ids derived from the bare message's stream sequence, so routing
// again after a crash stores nothing twice.
type router struct{ f *Fleet }

func (r *router) HandleBatch(ctx context.Context, msgs []pull.Msg) []error {
	errs := make([]error, len(msgs))
	s := r.f.opts.Subjects
	for i, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			errs[i] = pull.Transient("route trace record", err)
			continue
		}
		seq := md.Sequence.Stream
		id := tracemsg.MsgID(m.Headers())
		targets, rerr := routeTargets(m.Data(), id, s.PartitionCount())
		if rerr != nil {
			errs[i] = pull.Permanent(rerr.reason, fmt.Errorf("stream seq %d: %w", seq, rerr.err))
			continue
		}
		for _, p := range targets {
			out := nats.NewMsg(streams.TraceSubject(s.Traces, p))
			out.Data = m.Data()
			out.Header.Set(tracemsg.HeaderRouted, "1")
			if id != "" {
				out.Header.Set(tracemsg.HeaderOrigMsgID, id)
			}
			if _, err := r.f.opts.Retry.Store(ctx, r.f.js, out, fmt.Sprintf("route:%d:%d", seq, p)); err != nil {
				errs[i] = pull.Transient("route trace record", err)
				break
			}
		}
	}
	return errs
}

// routeError is a message the router can never route, with its reason.
type routeError struct {
	reason string
	err    error
}

// routeTargets returns the partitions of the n a message on the bare traces
// subject goes to: a row batch to the partition it was cut for, a record
// to its run's (or key's).
func routeTargets(data []byte, id string, n int) ([]int, *routeError) {
	if rowbatch.IsBatch(data) {
		var b rowbatch.Batch
		if err := rowbatch.Decode(data, &b); err != nil {
			return nil, &routeError{"malformed row batch", err}
		}
		if b.Parts != n {
			return nil, &routeError{"row batch for another partition count", fmt.Errorf("cut for %d partitions, the worker uses %d", b.Parts, n)}
		}
		return []int{b.Part}, nil
	}
	var rec calls.Record
	if err := calls.DecodeRecord(data, &rec); err != nil {
		return nil, &routeError{"malformed trace record", err}
	}
	p, err := tracemsg.RecordPartition(&rec, id, n)
	if err != nil {
		return nil, &routeError{"invalid trace record", err}
	}
	return []int{p}, nil
}
