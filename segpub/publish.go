package segpub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tracemsg"
)

// Stats counts what Publish published.
type Stats struct {
	Segments   int
	Rows       int      // rows published (in row batches)
	New        int      // rows JetStream stored
	Duplicates int      // rows JetStream dropped as already stored (same message id)
	Ignored    int      // files in the directory that are not segments
	Failed     []string // segments that could not be read, with the reason; none of their rows was published
}

// Options tune Publish.
type Options struct {
	// Strict stops at the first corrupt segment instead of skipping it.
	Strict bool
	// MaxInFlight bounds batches awaiting their acknowledgement; the
	// publisher waits for the oldest before sending more. 0 means 64.
	MaxInFlight int
	// AckTimeout bounds the wait for one acknowledgement before the row is
	// published again (with the same message id, so never twice); 0 means
	// 30 s.
	AckTimeout time.Duration
	// RetryFor bounds how long a batch whose publish fails (a stream
	// electing a leader) is retried with backoff, from its first failure;
	// 0 means producer.DefaultRetryFor.
	RetryFor time.Duration
	// Healthy, when set, hears false when a publish fails and true when
	// acknowledgements flow again (producer.AsyncOptions.Healthy).
	Healthy func(ok bool)
	// Progress, when set, is called with the running count of acknowledged
	// rows.
	Progress func(rows int)
	// Partitions is the partition count: each row goes to
	// <subject>.<tracemsg.PartitionOf(run_id)> (a row without run id: of its tracemsg.RowKey).
	// 0 means tracemsg.DefaultPartitions.
	Partitions int
	// BatchRows is the most rows per batch; 0 means DefaultBatchRows. Smaller
	// batches cost more messages for the same rows (tests use them to
	// have many).
	BatchRows int
	// Logger, when set, hears (once per 10 s) of acknowledgements that
	// fail while the server is away, and of the rows sent again.
	Logger *slog.Logger
}

// EnsureDefaults fills the zero fields of o that have a default and
// returns o: MaxInFlight 64, Partitions tracemsg.DefaultPartitions,
// BatchRows DefaultBatchRows. AckTimeout and RetryFor are the publisher's
// (producer.AsyncOptions: 0 means its defaults).
func (o *Options) EnsureDefaults() *Options {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.Partitions <= 0 {
		o.Partitions = tracemsg.DefaultPartitions
	}
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	return o
}

// Row batches: Publish cuts each segment's rows of a partition into batches
// of at most DefaultBatchRows rows, and halves a batch whose encoding is larger
// than batchTarget bytes. A worker refuses a batch larger than
// tracemsg.MaxBatchBytes (the server's default max payload is 1 MiB).
const (
	DefaultBatchRows = 4096
	batchTarget      = 512 << 10
)

// wireFields are the columns a row batch carries: those the worker's
// reduction reads (outcome.Reducer's, less a grouping column; the run
// state keeps no other). The batch names its columns, so a later version
// can carry more without a new format.
var wireFields = calls.Fields(calls.FieldTSMillis, calls.FieldRunID, calls.FieldDecision, calls.FieldCostMicroUSD,
	calls.FieldStep, calls.FieldAgentID, calls.FieldOutcome)

// batchMsgID is the message id of the batch of a segment's rows first..last
// routed to partition part: the rows' identity, so the same rows cut the
// same way are stored once, and any cut is applied once (see rowSet).
func batchMsgID(digest string, part int, first, last uint64) string {
	return fmt.Sprintf("rows:%s:%d:%d-%d", digest, part, first, last)
}

// Publish publishes every row of every segment in dir (either naming), in
// segment order (segment.List) and row order, to its
// partition subject under subject (see tracemsg.PartitionOf) as row batches
// (package rowbatch, compressed: rowbatch.Compress): each segment's rows of a partition, DefaultBatchRows at a
// time, with message id batchMsgID. The worker applies a batch as one unit
// and remembers the rows of each segment it applied, so replaying a
// directory twice never counts a row twice.
//
// A segment is read whole and encoded before any of its batches is
// published, so a corrupt segment contributes nothing: it is reported in
// Failed and the rest still replays, unless opts.Strict. Publishing applies
// backpressure (at most MaxInFlight unacknowledged batches), so a slow
// server slows the replay down rather than failing it. Publish blocks until
// every batch is acknowledged or ctx is done. Counts are in rows.
func Publish(ctx context.Context, js jetstream.JetStream, subject, dir string, opts Options) (Stats, error) {
	segs, ignored, err := segment.List(dir)
	if err != nil {
		return Stats{}, err
	}
	return ReplaySegments(ctx, js, subject, segs, ignored, opts)
}

// ReplaySegments is Publish of the segments segs (in that order); ignored
// is reported as Stats.Ignored.
func ReplaySegments(ctx context.Context, js jetstream.JetStream, subject string, segs []segment.Segment, ignored int, opts Options) (Stats, error) {
	opts.EnsureDefaults()
	st := Stats{Ignored: ignored}
	p := producer.NewAsyncPublisher(js, producer.AsyncOptions{MaxInFlight: opts.MaxInFlight, AckTimeout: opts.AckTimeout,
		RetryFor: opts.RetryFor, Healthy: opts.Healthy, Progress: opts.Progress, Logger: opts.Logger})
	// stats is st with the publisher's counts.
	stats := func() Stats {
		ps := p.Stats()
		st.Rows, st.New, st.Duplicates = ps.Published, ps.New, ps.Duplicates
		return st
	}
	parts := opts.Partitions
	// The next segment is read and encoded while this one's batches are
	// published: the stream (and the workers behind it) is fed while a
	// segment is encoded, rather than going idle at each segment's start.
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	encoded := encodeAhead(ectx, newSegmentEncoder(parts, opts.BatchRows), segs)
	for e := range encoded {
		if e.err != nil {
			if opts.Strict || !segment.IsError(e.err) {
				return stats(), fmt.Errorf("replay %s: %w", e.path, e.err)
			}
			st.Failed = append(st.Failed, e.err.Error())
			continue
		}
		for _, m := range e.msgs {
			if err := p.PublishRows(ctx, streams.TraceSubject(subject, m.part), nil, m.data, m.id, m.rows); err != nil {
				// Batches already published stay deduplicated by id.
				return stats(), fmt.Errorf("replay %s: publish %s: %w", e.path, m.id, err)
			}
		}
		st.Segments++
	}
	if err := ctx.Err(); err != nil {
		return stats(), err
	}
	if err := p.Drain(ctx); err != nil {
		return stats(), err
	}
	if opts.Progress != nil {
		ps := p.Stats()
		opts.Progress(ps.New + ps.Duplicates)
	}
	return stats(), nil
}

// encodedSegment is a segment's batches, or the error that made it
// publish nothing.
type encodedSegment struct {
	path string
	msgs []batchMsg
	err  error
}

// encodeAhead encodes segs in order on a goroutine of its own, at most one
// segment ahead of the one its reader is publishing, and closes the
// channel after the last or when ctx is done (the reader checks ctx: a
// closed channel is not the end of segs then).
func encodeAhead(ctx context.Context, enc *segmentEncoder, segs []segment.Segment) <-chan encodedSegment {
	out := make(chan encodedSegment)
	go func() {
		defer close(out)
		for _, seg := range segs {
			if ctx.Err() != nil {
				return
			}
			msgs, err := enc.encode(seg.Path)
			select {
			case out <- encodedSegment{path: seg.Path, msgs: msgs, err: err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// batchMsg is one encoded batch of a segment, to publish.
type batchMsg struct {
	part, rows  int
	first, last uint64 // the segment rows of the first and the last
	id          string
	data        []byte
}

// segmentEncoder cuts segments into row batches. Not safe for concurrent use.
type segmentEncoder struct {
	parts, rows int
	builders    []rowbatch.Builder
	scratch     []byte // a batch's encoding before compression
	zscratch    []byte // its compression, before it is copied out
	// pend and pendRows: each partition's rows of the batch being scanned
	// (index in the batch, segment row), before they are appended.
	pend     [][]int32
	pendRows [][]uint64
}

func newSegmentEncoder(parts, rows int) *segmentEncoder {
	if rows <= 0 || rows > DefaultBatchRows {
		rows = DefaultBatchRows
	}
	return &segmentEncoder{parts: parts, rows: rows, builders: make([]rowbatch.Builder, parts),
		pend: make([][]int32, parts), pendRows: make([][]uint64, parts)}
}

// encode reads the segment at path whole and returns its batches, or the
// segment's error (nothing of a segment that fails anywhere).
func (e *segmentEncoder) encode(path string) ([]batchMsg, error) {
	file, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The segment's digest names its batches (in their header and message
	// id), but the scan needs it only to route a row without a run id: it
	// is computed beside the scan, on another core, and the batches are
	// encoded without it, then stamped and compressed once it is known.
	var raw [32]byte
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		raw = sha256.Sum256(file)
	}()
	defer func() { <-hashed }()
	digest := ""
	// digestOf waits for the digest.
	digestOf := func() string {
		if digest == "" {
			<-hashed
			digest = hex.EncodeToString(raw[:])
		}
		return digest
	}
	base := filepath.Base(path)
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	fields := wireFields
	for i := range e.builders {
		e.builders[i].Reset()
	}
	var out []batchMsg // data: encoded, without the digest, until the end
	// flush encodes partition p's rows, halving a batch that is too large.
	var flushRange func(p, lo, hi int)
	flushRange = func(p, lo, hi int) {
		b := &e.builders[p]
		h := rowbatch.Header{Segment: base, Parts: e.parts, Part: p}
		e.scratch = b.Encode(e.scratch[:0], h, fields, lo, hi, runs, syms)
		if len(e.scratch) > batchTarget && hi-lo > 1 {
			mid := lo + (hi-lo)/2
			flushRange(p, lo, mid)
			flushRange(p, mid, hi)
			return
		}
		out = append(out, batchMsg{part: p, rows: hi - lo, first: b.Row(lo), last: b.Row(hi - 1), data: bytes.Clone(e.scratch)})
	}
	flush := func(p int) {
		if n := e.builders[p].Len(); n > 0 {
			flushRange(p, 0, n)
			e.builders[p].Reset()
		}
	}
	partOf := []int32{} // by run symbol id; -1 not computed yet
	row := uint64(0)
	sc := segment.NewScanner(wireFields, runs, syms)
	err = sc.ScanBytes(path, file, func(b *calls.Batch) error {
		if !b.HasRunID {
			fields &^= calls.Fields(calls.FieldRunID)
		}
		for i := range b.Len {
			var p int
			if b.HasRunID {
				id := b.RunID[i]
				for int(id) >= len(partOf) {
					partOf = append(partOf, -1)
				}
				if partOf[id] < 0 {
					partOf[id] = int32(tracemsg.PartitionOf(runs.Name(id), e.parts))
				}
				p = int(partOf[id])
			} else {
				p = tracemsg.PartitionOf(tracemsg.RowKey(digestOf(), row), e.parts)
			}
			e.pend[p] = append(e.pend[p], int32(i))
			e.pendRows[p] = append(e.pendRows[p], row)
			row++
		}
		// Each partition's rows of the scanned batch, a column at a time,
		// cut at e.rows as row by row.
		for p := range e.pend {
			idx, rows := e.pend[p], e.pendRows[p]
			for len(idx) > 0 {
				k := min(len(idx), e.rows-e.builders[p].Len())
				e.builders[p].AppendRows(b, idx[:k], rows[:k])
				idx, rows = idx[k:], rows[k:]
				if e.builders[p].Len() == e.rows {
					flush(p)
				}
			}
			e.pend[p], e.pendRows[p] = e.pend[p][:0], e.pendRows[p][:0]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for p := range e.builders {
		flush(p)
	}
	d := digestOf()
	for i := range out {
		m := &out[i]
		rowbatch.SetDigest(m.data, raw)
		// Compressed into a reused buffer and copied out at its size: a
		// fresh buffer of the worst case would be cleared and mostly wasted.
		e.zscratch = rowbatch.Compress(e.zscratch[:0], m.data)
		m.data, m.id = bytes.Clone(e.zscratch), batchMsgID(d, m.part, m.first, m.last)
	}
	return out, nil
}
