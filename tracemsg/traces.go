package tracemsg

// HeaderRouted marks a trace record the worker routed from the bare traces
// subject to its partition: its Nats-Msg-Id is the routing's own, and its
// identity is HeaderOrigMsgID (possibly empty).
const HeaderRouted = "Verdryx-Routed"

// HeaderMsgID is JetStream's deduplication header (nats.MsgIdHdr), named
// here so that the trace identity rules do not import the NATS client.
const HeaderMsgID = "Nats-Msg-Id"

// Headers is what MsgID reads of a message's headers; nats.Header has it.
type Headers interface {
	Get(key string) string
}

// MsgID returns the message id a trace message's identity uses: the
// original id of a re-driven dead letter or a routed record, else its
// Nats-Msg-Id (never a routing id).
func MsgID(h Headers) string {
	if id := h.Get(HeaderOrigMsgID); id != "" {
		return id
	}
	if h.Get(HeaderRouted) != "" {
		return ""
	}
	return h.Get(HeaderMsgID)
}

// HeaderOrigMsgID carries a re-driven message's original Nats-Msg-Id: the
// re-drive publishes under an id of its own (so re-driving twice does not
// publish twice, and JetStream does not drop it as a duplicate of the
// original), and the trace handler deduplicates on the original id.
const HeaderOrigMsgID = "Verdryx-Orig-Msg-Id"

// MaxBatchBytes is the largest row batch a worker applies (the server's
// default max payload is 1 MiB); a larger one is dead-lettered.
const MaxBatchBytes = 1 << 20
