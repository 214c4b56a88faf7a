package tracemsg

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
)

// TestMsgIDReadsNATSHeaders: the header names are the client's, and the
// identity is the original id of a re-drive, none for a routed record
// without one, else the message's own id.
func TestMsgIDReadsNATSHeaders(t *testing.T) {
	assert.Equal(t, nats.MsgIdHdr, HeaderMsgID)
	h := nats.Header{}
	assert.Equal(t, "", MsgID(h))
	h.Set(nats.MsgIdHdr, "own")
	assert.Equal(t, "own", MsgID(h))
	h.Set(HeaderRouted, "1")
	assert.Equal(t, "", MsgID(h), "a routed record's own id is the routing's")
	h.Set(HeaderOrigMsgID, "orig")
	assert.Equal(t, "orig", MsgID(h))
}
