package worker

import (
	"fmt"
	"github.com/verdryx/verdryx/calls"

	"github.com/nats-io/nats.go"
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
