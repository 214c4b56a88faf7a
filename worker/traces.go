package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/consumer/segment"
	"github.com/verdryx/verdryx/store"
)

// CallRecord is the JSON shape of one trace message: a per-call record with
// the Parquet row's columns by name (calls.CallRecord; without run_id an
// independent per-call record, without step encounter order applies), or,
// when Segment is set, a segment reference: a path resolved under the
// configured roots whose rows are ingested. CallID, when set, identifies the
// call for deduplication (see RecordKey).
type CallRecord struct {
	calls.CallRecord
	CallID  string `json:"call_id,omitempty"`
	Segment string `json:"segment,omitempty"`
}

// Call converts the record; decision is required.
func (r *CallRecord) Call() (calls.Call, error) {
	if r.Decision == nil {
		return calls.Call{}, fmt.Errorf("field decision: missing")
	}
	return r.CallRecord.Call(), nil
}

// RecordOf returns the message form of a call.
func RecordOf(c calls.Call) CallRecord { return CallRecord{CallRecord: calls.RecordOf(c)} }

// CallStore is what TraceHandler needs of the store (store.Store
// implements it).
type CallStore interface {
	AddCalls(ctx context.Context, cl []store.TraceCall, segs ...store.Segment) (int, error)
	SegmentDone(ctx context.Context, digest string) (bool, error)
	CallTotals(ctx context.Context) (costMicroUSD, tokens int64, err error)
}

// TraceHandler ingests trace messages into the store: each batch is one
// transaction, deduplicated on the identity of each call (RecordKey,
// RowKey), so a redelivered or replayed record never counts twice and two
// calls that share a step both count. A segment reference is ingested whole
// or not at all.
type TraceHandler struct {
	store  CallStore
	opts   TraceOptions
	totals totals // cost and token sums, checked before every insert
}

// TraceOptions configure a TraceHandler.
type TraceOptions struct {
	// Roots are the directories a segment reference may name.
	Roots Roots
	// Files reads referenced segments; nil confines reads to Roots with
	// confine's default limits.
	Files *confine.Reader
	// Now stamps a segment done; nil means time.Now.
	Now func() time.Time
}

// NewTraceHandler returns a handler storing the calls of trace records
// and segment references in st.
func NewTraceHandler(st CallStore, opts TraceOptions) *TraceHandler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &TraceHandler{store: st, opts: opts}
}

// HandleBatch implements pull.BatchHandler.
func (h *TraceHandler) HandleBatch(ctx context.Context, msgs []pull.Msg) []error {
	errs := make([]error, len(msgs))
	cl := make([]store.TraceCall, 0, len(msgs))
	var segs []store.Segment
	settle, err := h.beginTotals(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = pull.Transient("trace totals", err)
		}
		return errs
	}
	for i, m := range msgs {
		seq := uint64(0)
		if md, err := m.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
		rec, err := DecodeCallRecord(m.Data())
		if err != nil {
			errs[i] = pull.Permanent("malformed trace record", fmt.Errorf("stream seq %d: %w", seq, err))
			continue
		}
		if rec.Segment != "" {
			segCalls, seg, err := h.readSegment(ctx, rec.Segment, seq)
			if err == nil {
				err = h.addTotals(func(i int) string { return fmt.Sprintf("segment %s row %d", rec.Segment, i) }, segCalls)
			}
			if err != nil {
				errs[i] = err
				continue
			}
			cl = append(cl, segCalls...)
			if seg != nil {
				segs = append(segs, *seg)
			}
			continue
		}
		c, err := rec.Call()
		if err != nil {
			errs[i] = pull.Permanent("invalid trace record", err)
			continue
		}
		msgID := traceMsgID(m.Headers())
		key, err := RecordKey(&rec, msgID)
		if err != nil {
			errs[i] = pull.Permanent("invalid trace record", err)
			continue
		}
		cl = append(cl, store.TraceCall{Key: key, Seq: seq << 20, Call: c})
		if err := h.addTotals(func(int) string { return fmt.Sprintf("trace record (stream seq %d, run_id %q)", seq, c.RunID) }, cl[len(cl)-1:]); err != nil {
			cl = cl[:len(cl)-1]
			errs[i] = err
			continue
		}
	}
	inserted, err := h.store.AddCalls(ctx, cl, segs...)
	settle(inserted, len(cl), err)
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = pull.Transient("store calls", err)
			}
		}
	}
	return errs
}

// HeaderRouted marks a trace record the worker routed from the bare traces
// subject to its partition: its Nats-Msg-Id is the routing's own, and its
// identity is HeaderOrigMsgID (possibly empty).
const HeaderRouted = "Verdryx-Routed"

// traceMsgID returns the message id a trace message's identity uses: the
// original id of a re-driven dead letter or a routed record, else its
// Nats-Msg-Id (never a routing id).
func traceMsgID(h nats.Header) string {
	if id := h.Get(HeaderOrigMsgID); id != "" {
		return id
	}
	if h.Get(HeaderRouted) != "" {
		return ""
	}
	return h.Get(nats.MsgIdHdr)
}

// readSegment reads every row of a referenced segment. A segment already
// ingested (same content digest) yields nothing.
func (h *TraceHandler) readSegment(ctx context.Context, name string, seq uint64) ([]store.TraceCall, *store.Segment, error) {
	path, data, err := h.files().ReadResolved(ctx, name)
	if err != nil {
		return nil, nil, pull.Permanent("segment refused", err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	done, err := h.store.SegmentDone(ctx, digest)
	if err != nil {
		return nil, nil, pull.Transient("segment lookup", err)
	}
	if done {
		return nil, nil, nil
	}
	var cl []store.TraceCall
	row := uint64(0)
	err = segment.ReadBytes(path, data, func(c calls.Call) error {
		cl = append(cl, store.TraceCall{Key: RowKey(digest, row), Seq: seq<<20 | row, Call: c})
		row++
		return nil
	})
	if err != nil {
		return nil, nil, pull.Permanent("segment corrupt", err)
	}
	return cl, &store.Segment{Digest: digest, Path: path, Rows: len(cl), DoneAt: h.opts.Now()}, nil
}

// fileDigest returns the hex SHA-256 of a file's content.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
