package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
)

// ForPull adapts p to the pull loop: a message the loop terminates
// is published through p with its subject, stream and stream sequence (so
// its dead-letter id is "dead-<stream>-<seq>").
func ForPull(p *producer.DeadLetterPublisher) pull.DeadLetterer {
	return pullDeadLetters{p}
}

type pullDeadLetters struct{ p *producer.DeadLetterPublisher }

func (d pullDeadLetters) DeadLetter(ctx context.Context, m pull.Msg, reason string) error {
	dl := producer.DeadLetter{Data: m.Data(), Header: m.Headers(), Subject: m.Subject(), Reason: reason}
	if md, err := m.Metadata(); err == nil {
		dl.Stream, dl.Seq = md.Stream, md.Sequence.Stream
	}
	return d.p.Publish(ctx, dl)
}

// DeadLetter is one message in the dead-letter stream.
type Message struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Subject   string    `json:"subject"` // where it was consumed from
	StreamSeq string    `json:"stream_seq,omitempty"`
	Reason    string    `json:"reason"`
	Size      int       `json:"bytes"`
	msg       *jetstream.RawStreamMsg
}

// Matches reports whether filter is empty or a substring of the dead
// letter's reason, subject or body.
func (d Message) Matches(filter string) bool {
	return filter == "" || strings.Contains(d.Reason, filter) || strings.Contains(d.Subject, filter) ||
		strings.Contains(string(d.msg.Data), filter)
}

// List returns the messages of the dead-letter stream, oldest
// first, that match filter (see DeadLetter.Matches).
func List(ctx context.Context, js jetstream.JetStream, s streams.Subjects, filter string) ([]Message, error) {
	stream, err := js.Stream(ctx, s.DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream %s: %w", s.DeadLetterStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream %s: %w", s.DeadLetterStream, err)
	}
	var out []Message
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted (re-driven)
		}
		if err != nil {
			return nil, fmt.Errorf("dead letter %d: %w", seq, err)
		}
		d := Message{Seq: m.Sequence, Time: m.Time, Subject: m.Header.Get(producer.HeaderDeadSubject),
			StreamSeq: m.Header.Get(producer.HeaderDeadSeq), Reason: m.Header.Get(producer.HeaderDeadReason), Size: len(m.Data), msg: m}
		if d.Matches(filter) {
			out = append(out, d)
		}
	}
	return out, nil
}

// Redrive publishes each dead letter back to the subject it was consumed
// from, with its original headers (less the dead-letter ones), waits for
// JetStream to store it, then deletes it from the dead-letter stream. A
// dead letter re-driven twice (a crash between publish and delete) is
// stored once: its message id is derived from its dead-letter sequence. It
// returns how many were re-driven before the first error.
func Redrive(ctx context.Context, js jetstream.JetStream, s streams.Subjects, dls []Message) (int, error) {
	stream, err := js.Stream(ctx, s.DeadLetterStream)
	if err != nil {
		return 0, fmt.Errorf("dead-letter stream %s: %w", s.DeadLetterStream, err)
	}
	for i, d := range dls {
		if d.Subject == "" {
			return i, fmt.Errorf("dead letter %d: no %s header: cannot tell where it came from", d.Seq, producer.HeaderDeadSubject)
		}
		out := nats.NewMsg(d.Subject)
		out.Data = d.msg.Data
		for k, v := range d.msg.Header {
			if strings.HasPrefix(k, "Verdryx-Dead-") || k == nats.MsgIdHdr {
				continue
			}
			out.Header[k] = v
		}
		if orig := d.msg.Header.Get(producer.HeaderDeadMsgID); orig != "" && out.Header.Get(tracemsg.HeaderOrigMsgID) == "" {
			out.Header.Set(tracemsg.HeaderOrigMsgID, orig)
		}
		id := "redrive:" + s.DeadLetterStream + ":" + strconv.FormatUint(d.Seq, 10)
		if _, err := producer.Store(ctx, js, out, id); err != nil {
			return i, fmt.Errorf("re-drive dead letter %d to %s: %w", d.Seq, d.Subject, err)
		}
		if err := stream.DeleteMsg(ctx, d.Seq); err != nil && !alreadyDeleted(err) {
			return i, fmt.Errorf("re-drive dead letter %d: delete after publish: %w", d.Seq, err)
		}
	}
	return len(dls), nil
}

// alreadyDeleted reports a delete of a message that is no longer there (a
// re-drive that ran before).
func alreadyDeleted(err error) bool {
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return true
	}
	// The client wraps the server's answer into text: err_code 10057, or
	// 10043 ("sequence N not found") when N is past what the stream holds.
	return strings.Contains(err.Error(), "no message found") || strings.Contains(err.Error(), "err_code=10043")
}
