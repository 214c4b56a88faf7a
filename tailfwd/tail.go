package tailfwd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/consumer/tail"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
)

// Forwarder follows an NDJSON file and forwards what it reads. Each line
// is classified by tail.LineChecker, the classifier `verdryx tail` uses,
// so both give the same verdict for every line (kind, validity and chain
// link, including the chain seeded from the line before a saved offset on a
// restart, and records counting as chain links): agent-event envelopes are
// published to the tail subject (a chain break is logged and counted, the
// event still forwarded); call records to their partition subject (see
// tracemsg.PartitionOf), where the partition owners reduce them; invalid
// events, malformed lines and objects that are not a usable trace record go
// to the dead letters with their reason.
//
// Each line is published with Nats-Msg-Id = file identity + offset, and the
// tailer commits its offset only after the publish is acknowledged, so a
// restart neither loses nor double-counts a line.
type Forwarder struct {
	tailer   *tail.Tailer
	js       jetstream.JetStream
	subjects streams.Subjects
	opts     Options
	checker  tail.LineChecker
}

// Options configure a Forwarder.
type Options struct {
	// Logger receives the forwarder's logs; nil discards them.
	Logger *slog.Logger
	// Counted receives one call per line with its class: "event",
	// "record", "invalid", "break", "oversize" or "blank". May be nil.
	Counted func(class string)
	// Checked, when set, receives each line's verdict before the line is
	// forwarded. The Classified is valid only during the call.
	Checked func(tail.Line, tail.Classified)
	// Retry, when set, retries a publish that fails while its stream has
	// no leader (producer.Retrier), so the tailer waits on the line
	// instead of failing; nil tries once (then Run returns the error).
	Retry *producer.Retrier
}

// New returns a forwarder of what tl reads to the subjects,
// published through js.
func New(tl *tail.Tailer, js jetstream.JetStream, subjects streams.Subjects, opts Options) *Forwarder {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Forwarder{tailer: tl, js: js, subjects: subjects, opts: opts}
}

// Run tails until ctx is canceled (or the file is drained, with Once).
func (f *Forwarder) Run(ctx context.Context) error {
	return f.tailer.Run(ctx, f.handle)
}

func (f *Forwarder) count(class string) {
	if f.opts.Counted != nil {
		f.opts.Counted(class)
	}
}

func (f *Forwarder) logger() *slog.Logger { return f.opts.Logger }

func (f *Forwarder) handle(ctx context.Context, l tail.Line) error {
	c := f.checker.Check(l)
	if f.opts.Checked != nil {
		f.opts.Checked(l, c)
	}
	id := fmt.Sprintf("tail:%s:%d", l.File, l.Offset)
	line := bytes.TrimSpace(l.Bytes)
	switch c.Kind {
	case tail.KindOversize:
		f.count("oversize")
		f.logger().Warn("oversize line skipped", "path", l.Path, "line", l.Number, "bytes", l.Oversize)
		return nil
	case tail.KindBlank:
		f.count("blank")
		return nil
	case tail.KindMalformed:
		f.count("invalid")
		return f.deadLetter(ctx, line, id, fmt.Sprintf("%s line %d: malformed JSON: %v", l.Path, l.Number, c.Err))
	case tail.KindEvent:
		if c.Err != nil {
			f.count("invalid")
			return f.deadLetter(ctx, line, id, fmt.Sprintf("%s line %d: %v", l.Path, l.Number, c.Err))
		}
		if c.Link == envelope.LinkBreak {
			f.count("break")
			f.logger().Warn("chain break in tailed file", "path", l.Path, "line", l.Number, "expected", c.Expected, "found", c.Found)
		} else {
			f.count("event")
		}
		return f.publish(ctx, f.subjects.Tail, line, id)
	}
	// A per-call record.
	var rec calls.Record
	if err := calls.DecodeRecord(line, &rec); err != nil {
		f.count("invalid")
		return f.deadLetter(ctx, line, id, fmt.Sprintf("%s line %d: %v", l.Path, l.Number, err))
	}
	f.count("record")
	n := f.subjects.PartitionCount()
	p, err := tracemsg.RecordPartition(&rec, id, n)
	if err != nil {
		f.count("invalid")
		return f.deadLetter(ctx, line, id, fmt.Sprintf("%s line %d: %v", l.Path, l.Number, err))
	}
	return f.publish(ctx, streams.TraceSubject(f.subjects.Traces, p), line, id)
}

func (f *Forwarder) publish(ctx context.Context, subject string, data []byte, id string) error {
	if _, err := f.opts.Retry.Store(ctx, f.js, &nats.Msg{Subject: subject, Data: data}, id); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	return nil
}

func (f *Forwarder) deadLetter(ctx context.Context, data []byte, id, reason string) error {
	f.logger().Warn("tailed line dead-lettered", "reason", reason)
	dead := producer.DeadLetterPublisher{JS: f.js, Subject: f.subjects.DeadLetter, Retry: f.opts.Retry}
	return dead.Publish(ctx, producer.DeadLetter{Data: data, Subject: "tail", ID: id, Reason: reason})
}
