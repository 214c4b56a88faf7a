package producer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Header names set on a dead-lettered copy.
const (
	HeaderDeadReason  = "Verdryx-Dead-Reason"
	HeaderDeadSubject = "Verdryx-Dead-Subject"
	HeaderDeadSeq     = "Verdryx-Dead-Stream-Seq"
	HeaderDeadMsgID   = "Verdryx-Dead-Msg-Id" // the original Nats-Msg-Id, if any
)

// DeadLetter is a message that was refused for good, with where it came
// from and why.
type DeadLetter struct {
	Data []byte
	// Header holds the original's headers, copied onto the dead letter
	// (its Nats-Msg-Id moves to HeaderDeadMsgID). May be nil.
	Header nats.Header
	// Subject is where the original came from: its subject, or a source
	// name such as "tail".
	Subject string
	// Stream and Seq are the JetStream stream and stream sequence the
	// original was read from; Stream is "" when it came from no stream.
	Stream string
	Seq    uint64
	// ID, used when Stream is "", is a stable identity of the original
	// (for a tailed line, its file identity and offset).
	ID     string
	Reason string
}

// MsgID is the Nats-Msg-Id of d's copy: "dead-<stream>-<seq>" for a message
// read from a stream, "dead-<id>" otherwise, "" when d has neither (the
// copy is then published without one). A dead letter produced again (a
// redelivery terminated twice, a tailed line re-read after a restart) is
// therefore dropped by JetStream as a duplicate.
func (d DeadLetter) MsgID() string {
	switch {
	case d.Stream != "":
		return fmt.Sprintf("dead-%s-%d", d.Stream, d.Seq)
	case d.ID != "":
		return "dead-" + d.ID
	}
	return ""
}

// DeadLetterPublisher publishes dead letters to a subject with the reason
// and origin in headers. It is safe for concurrent use.
type DeadLetterPublisher struct {
	JS      jetstream.JetStream
	Subject string
	// Retry, when set, retries a publish that fails while the stream has
	// no leader (Retrier); nil tries once.
	Retry *Retrier
}

// Publish publishes d's copy to p.Subject. It blocks until JetStream
// acknowledges the copy, ctx is done, or 10 s have passed (a try, with
// Retry: as long as its bound while the stream has no leader).
func (p *DeadLetterPublisher) Publish(ctx context.Context, d DeadLetter) error {
	out := nats.NewMsg(p.Subject)
	out.Data = d.Data
	for k, v := range d.Header {
		out.Header[k] = v
	}
	out.Header.Set(HeaderDeadReason, d.Reason)
	out.Header.Set(HeaderDeadSubject, d.Subject)
	if d.Stream != "" {
		out.Header.Set(HeaderDeadSeq, fmt.Sprint(d.Seq))
	}
	if orig := d.Header.Get(nats.MsgIdHdr); orig != "" {
		out.Header.Set(HeaderDeadMsgID, orig)
	}
	out.Header.Del(nats.MsgIdHdr)
	var opts []jetstream.PublishOpt
	if id := d.MsgID(); id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	return p.Retry.Do(ctx, "dead-letter to "+p.Subject, func(ctx context.Context) error {
		_, err := p.JS.PublishMsg(ctx, out, opts...)
		return err
	})
}
