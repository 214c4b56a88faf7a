package streams

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/tracemsg"
)

// Subjects names every subject and stream the worker uses. All are
// configurable; DefaultSubjects documents the defaults.
type Subjects struct {
	Traces       string // per-call JSON records and row batches (stream TracesStream; docs/formats.md)
	EvalRequests string // eval requests (stream EvalStream)
	RAGAsk       string // RAG asks, core request/reply, queue group "verdryx"
	Events       string // verdryx publishes its envelopes on Events.<instance> (stream EventsStream)
	Tail         string // envelopes read by the tailer are forwarded here (stream EventsStream)
	DeadLetter   string // terminated messages with their reason (stream DeadLetterStream)
	// Quality is the base of the fleet's quality log: every committed run
	// and baseline on Quality.run and Quality.baseline (stream
	// QualityStream, EnsureQuality).
	Quality string
	// Partitions is the partition count of the traces subject: records go
	// to Traces.<p> (see tracemsg.PartitionOf); records published to the bare
	// Traces subject are routed there by the worker. 0 means
	// tracemsg.DefaultPartitions. Every publisher and worker must agree on it.
	Partitions int
	// Replicas of every stream and bucket the worker creates (3 on a
	// three-node cluster); 0 means 1.
	Replicas int
	// Retention is the longest the traces and eval-request streams keep a
	// message (their MaxAge); the events and dead-letter streams keep
	// theirs LongRetention times as long. 0 leaves an existing stream's
	// limit as it is and creates a new one without: only `serve` sets it
	// (DefaultRetention), so a replay or dlq client never resets what the
	// fleet's workers configured.
	Retention time.Duration
	// RetentionBytes bounds each stream's bytes (MaxBytes; the oldest
	// messages go first): a backstop behind Retention. 0: as for Retention.
	RetentionBytes int64
	// DuplicateWindow is the traces, eval and events streams' window of
	// message-id deduplication; 0 means DuplicateWindow. Retention, when
	// set, must be at least as long. Like Retention, only `serve` sets it.
	DuplicateWindow time.Duration
	// QualityRetention is the longest the quality log keeps a record
	// (MaxAge): 0 leaves an existing log's limit as it is and creates a
	// new one that keeps every record. A store that has applied a record
	// keeps its rows whatever the log prunes; a store that starts after
	// the log pruned records never gets them (its position counts them
	// as missed).
	QualityRetention time.Duration

	TracesStream     string
	EvalStream       string
	EventsStream     string
	DeadLetterStream string
	QualityStream    string
}

// Retention defaults of `serve` (see Subjects.Retention).
const (
	DefaultRetention = 7 * 24 * time.Hour
	// LongRetention multiplies Retention for the events (the envelope
	// chain) and dead-letter streams.
	LongRetention = 4
	// DuplicateWindow is the default of Subjects.DuplicateWindow.
	DuplicateWindow = 10 * time.Minute
)

// DefaultSubjects returns the default subject and stream names.
func DefaultSubjects() Subjects {
	return Subjects{
		Traces:           "verdryx.traces",
		EvalRequests:     "verdryx.eval.requests",
		RAGAsk:           "verdryx.rag.ask",
		Events:           "verdryx.events",
		Tail:             "verdryx.tail.events",
		DeadLetter:       "verdryx.deadletter",
		Quality:          "verdryx.quality",
		Partitions:       tracemsg.DefaultPartitions,
		TracesStream:     "VERDRYX_TRACES",
		EvalStream:       "VERDRYX_EVAL",
		EventsStream:     "VERDRYX_EVENTS",
		DeadLetterStream: "VERDRYX_DEADLETTER",
		QualityStream:    "VERDRYX_QUALITY",
	}
}

// Durable consumer names.
const (
	TracesConsumer = "verdryx-traces"
	EvalConsumer   = "verdryx-eval"
)

// EvalAckWait is the eval consumer's default AckWait: short, so a crashed
// worker's request is redelivered within a minute; a long request reports
// progress (InProgress) every EvalAckWait/3 while it runs.
const EvalAckWait = 30 * time.Second

// EnsureStreams creates (or updates) the streams and durable pull consumers
// the worker needs; traces is the consumer of the bare traces subject (the
// partition consumers are fleet.EnsurePartitions'). It is idempotent and safe to run from every worker.
// Consumers redeliver without limit (MaxDeliver -1): a message that fails
// transiently is retried until it succeeds, and one that can never succeed
// is terminated and dead-lettered by the handler, not by a delivery count.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, s Subjects, evalAckWait time.Duration) (traces, eval jetstream.Consumer, err error) {
	// An unset window (-1 to ensureStream) keeps an existing stream's,
	// as an unset Retention does: a replay or dlq client never resets
	// what the workers configured.
	dup, want := s.DuplicateWindow, s.DuplicateWindow
	if dup == 0 {
		dup, want = -1, DuplicateWindow
	}
	if s.Retention != 0 && s.Retention < want {
		return nil, nil, fmt.Errorf("retention %s is shorter than the streams' duplicate window (%s)", s.Retention, want)
	}
	long := s.Retention * LongRetention
	streams := []jetstream.StreamConfig{
		{Name: s.TracesStream, Subjects: []string{s.Traces, s.Traces + ".*"}, Storage: jetstream.FileStorage, Duplicates: dup, MaxAge: s.Retention},
		{Name: s.EvalStream, Subjects: []string{s.EvalRequests}, Storage: jetstream.FileStorage, Duplicates: dup, MaxAge: s.Retention},
		{Name: s.EventsStream, Subjects: []string{s.Events + ".>", s.Tail}, Storage: jetstream.FileStorage, Duplicates: dup, MaxAge: long},
		{Name: s.DeadLetterStream, Subjects: []string{s.DeadLetter}, Storage: jetstream.FileStorage, MaxAge: long},
	}
	for _, cfg := range streams {
		cfg.Replicas = max(s.Replicas, 1)
		cfg.MaxBytes = s.RetentionBytes
		if cfg.MaxBytes == 0 {
			cfg.MaxBytes = -1 // "unset" to ensureStream: left as it is
		}
		if _, err := ensureStream(ctx, js, cfg); err != nil {
			return nil, nil, fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	// The bare traces subject's consumer: the worker routes what arrives
	// there to the partition subjects (legacy producers).
	traces, err = ensureConsumer(ctx, js, s.TracesStream, jetstream.ConsumerConfig{
		Durable: TracesConsumer, FilterSubject: s.Traces, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxDeliver: -1, MaxAckPending: 20000,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("consumer %s: %w", TracesConsumer, err)
	}
	if evalAckWait <= 0 {
		evalAckWait = EvalAckWait
	}
	eval, err = ensureConsumer(ctx, js, s.EvalStream, jetstream.ConsumerConfig{
		Durable: EvalConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: evalAckWait,
		MaxDeliver: -1, MaxAckPending: 64,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("consumer %s: %w", EvalConsumer, err)
	}
	return traces, eval, nil
}

// TraceSubject is the subject of partition p under the traces subject base.
func TraceSubject(base string, p int) string { return base + "." + strconv.Itoa(p) }

// PartitionCount returns s.Partitions, or tracemsg.DefaultPartitions when
// it is 0 or less: the partition count every publisher and worker uses.
func (s Subjects) PartitionCount() int {
	if s.Partitions <= 0 {
		return tracemsg.DefaultPartitions
	}
	return s.Partitions
}

// EnsureQuality creates (or updates) the quality log's stream,
// QualityStream over Quality.>, with the streams' replicas, duplicate
// window (records carry their run or baseline id as message id) and
// QualityRetention. Like EnsureStreams it is idempotent, and a client
// that sets no retention leaves the log's as it is.
func EnsureQuality(ctx context.Context, js jetstream.JetStream, s Subjects) (jetstream.Stream, error) {
	s = s.WithQuality()
	dup, want := s.DuplicateWindow, s.DuplicateWindow
	if dup == 0 {
		dup, want = -1, DuplicateWindow
	}
	if s.QualityRetention < 0 || (s.QualityRetention != 0 && s.QualityRetention < want) {
		return nil, fmt.Errorf("quality log retention %s is shorter than its duplicate window (%s)", s.QualityRetention, want)
	}
	st, err := ensureStream(ctx, js, jetstream.StreamConfig{Name: s.QualityStream, Subjects: []string{s.Quality + ".>"},
		Storage: jetstream.FileStorage, Duplicates: dup, MaxAge: s.QualityRetention, MaxBytes: -1, Replicas: max(s.Replicas, 1)})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", s.QualityStream, err)
	}
	return st, nil
}

// WithQuality is s with the quality log's subject and stream names filled
// from DefaultSubjects where unset.
func (s Subjects) WithQuality() Subjects {
	d := DefaultSubjects()
	if s.Quality == "" {
		s.Quality = d.Quality
	}
	if s.QualityStream == "" {
		s.QualityStream = d.QualityStream
	}
	return s
}
