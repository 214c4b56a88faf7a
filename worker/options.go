package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
)

// ErrInput marks an error caused by the options or by a file they name
// (as opposed to the environment: NATS, the network); `verdryx serve`
// exits 2 for it. Test with errors.Is.
var ErrInput = errors.New("worker: bad input")

type inputErr struct{ err error }

func (e inputErr) Error() string   { return e.err.Error() }
func (e inputErr) Unwrap() []error { return []error{e.err, ErrInput} }

func inputError(err error) error { return inputErr{err} }

// ReplayFailedError is returned by Run when segments of Options.ReplayDir
// could not be read: none of their rows was published, the rest of the
// worker ran to its end.
type ReplayFailedError struct {
	Dir      string
	Segments []string // each with its reason
}

func (e *ReplayFailedError) Error() string {
	return fmt.Sprintf("Options.ReplayDir %s: %d segment(s) failed and contributed nothing", e.Dir, len(e.Segments))
}

// Options configure a Worker. Errors and logs name an option by its field,
// as Options.ReplayDir (a caller that sets options from flags maps these
// names back to its flags).
type Options struct {
	// DataDir holds the embedded NATS store, the SQLite store (by default),
	// tail offsets and the index generations asks are answered from.
	// Required; created if missing, and locked while the worker runs.
	DataDir string
	// NATSURL is the NATS server to use; "" starts the embedded server with
	// JetStream, listening on Listen and secured by Security.
	NATSURL  string
	Listen   string // embedded server address; "" means 127.0.0.1:4222 (port 0 picks a free one)
	Security embedded.Security
	// NATSOptions are client options (credentials, TLS, auth) for the
	// worker's connection, which is named verdryx-serve-<instance> and
	// reconnects forever.
	NATSOptions []nats.Option
	// DBPath is the SQLite store; "" means store.ResolvePath's choice with
	// DataDir as the data directory.
	DBPath string
	// EventsPath, when set, also appends envelopes to this chained NDJSON
	// file (fsynced per event).
	EventsPath string
	// Instance names this worker's chain subject and lease; "" means
	// DefaultInstance(DataDir).
	Instance string
	// HTTPAddr serves /healthz, /readyz, /metrics and /report; "" disables.
	// A non-loopback address is refused unless HTTPPublic (they have no
	// authentication).
	HTTPAddr   string
	HTTPPublic bool
	// OTLPEndpoint, when set, exports spans to this OTLP/HTTP collector.
	OTLPEndpoint string
	// TailPath, when set, is an NDJSON file followed and forwarded.
	TailPath string
	// ReplayDir, when set, is a Parquet segment directory whose rows are
	// published to the traces partition subjects at start, as row batches
	// (segpub.Publish).
	ReplayDir string
	// Follow publishes ReplayDir with a segpub.Follower instead of one
	// replay: the segments there at start and each one completed later,
	// once each, a segment still being written waited for; and
	// /metrics has verdryx_follow_pending_segments and
	// verdryx_follow_oldest_pending_seconds. Settle is the follower's
	// (0: segpub.DefaultSettle).
	Follow bool
	Settle time.Duration
	// PublishRetryFor bounds how long a JetStream or KV write that fails
	// because its stream or bucket has no leader (an election) is retried,
	// with backoff, from its first failure: a replayed or followed batch
	// (past it the run fails with ErrService), a tailed line (likewise), an
	// eval request's claim, ledger record, event or dead letter (past it
	// the attempt fails and is redelivered). /readyz answers 503 while a
	// write fails. 0 means producer.DefaultRetryFor.
	PublishRetryFor time.Duration
	// SLOEvery is how often the SLOs are evaluated over the fleet's
	// merged state of the last SLOWindow (sloLoop: gauges on /metrics,
	// slo_burn events on the chain); 0 means DefaultSLOEvery and
	// DefaultSLOWindow, a negative SLOEvery turns it off.
	SLOEvery, SLOWindow time.Duration
	// EvalRequestFiles are eval-request JSON files published at start.
	EvalRequestFiles []string
	// RAGCorpus, when set, answers RAG asks from this corpus embedded in
	// memory by the offline embedder; "" means from the active index
	// generation under DataDir, with the embedder that built it and its
	// stored vectors (rag.OpenStored), and without one asks are disabled.
	RAGCorpus string
	// Generator answers RAG asks from the retrieved chunks (serve
	// --generator); nil means the offline extractive generator.
	Generator rag.Generator
	// Providers reach the provider of a generation's embedder (asks, and
	// eval requests naming an index): the OpenAI-compatible root, key and
	// per-call timeout.
	Providers rag.Providers
	// Models configures the model registry (llm.Models) that resolves the
	// model and judge ids eval requests name: provider roots, per-call
	// timeout and the operator's keys (Keys; its Getenv is not read by the
	// worker's checks alone: give keys in Keys). The zero value resolves
	// "stub" and refuses every provider model for want of a key.
	Models llm.ModelsOptions
	// AllowModels are the model ids eval requests may name as model or
	// judge besides "stub" (serve --allow-model). A request naming another
	// is refused, with a reply listing these, before anything is claimed
	// or stored; New refuses such an --eval-request file.
	AllowModels []string
	// Judge is the judge of a request naming none (serve --judge); ""
	// means the request's model (stub for stub), as eval judges.
	Judge string
	// Prices prices the calls of eval requests (serve --prices: the file
	// over the built-in book); nil means llm.DefaultPriceBook.
	Prices llm.PriceBook
	// MaxCostUSD bounds the priced spend of each eval request (serve
	// --max-cost-usd): a request asking a higher max_cost_usd, or none,
	// runs under this one (evalreq.CostCap); 0 means no bound. With a
	// bound, every allowed model and the judge must have a price.
	MaxCostUSD float64
	// CatchUpWait bounds how long an eval request's drift check waits for
	// the store to apply the fleet's quality log (serve --catch-up-wait);
	// 0 means evalreq.DefaultCatchUpWait.
	CatchUpWait time.Duration
	// Roots are the directories eval-set paths in messages may resolve
	// under; empty means <DataDir>/eval.
	Roots []string
	// Once makes Run return when the inputs are drained: both consumers
	// have nothing pending or unacked, twice in a row 500 ms apart, and the
	// tail reached its end. Unless $GOGC is set, a Once run collects
	// garbage at 1.75x the live heap instead of 2x (a lower peak RSS while
	// a backlog drains), restored when Run returns.
	Once bool
	// HugePages hints the process's heap onto transparent huge pages while
	// Run runs (hugepage.AdviseHeap): fewer page faults for a heap that
	// grows to a gigabyte, as a replay of millions of rows makes it. Meant
	// for a run that ends when drained (Once): in a process that runs for
	// days the hint stays on memory the heap frees and reuses, and the
	// kernel's background collapse can keep sparsely used huge pages
	// resident, so RSS would follow what the heap once held.
	HugePages bool
	// Subjects are the subjects and streams; the zero value means
	// streams.DefaultSubjects().
	Subjects streams.Subjects
	// Version is stamped on runs and spans.
	Version string
	// Logger receives the worker's logs; nil discards them.
	Logger *slog.Logger
	// FilesMaxBytes and FilesTimeout bound each read of a file a message
	// names (under Roots); 0 means confine's defaults.
	FilesMaxBytes int64
	FilesTimeout  time.Duration
	// Replies decides which reply subjects eval requests and asks are
	// answered on; the zero value allows _INBOX.> and verdryx.reply.>.
	Replies streams.ReplyPolicy
	// Typed grades the typed cases of eval requests with typryx (serve
	// --typed-url); nil refuses a request whose set has one.
	Typed *grading.Typed
	// PinnedTTL and SnapshotEvery tune the partition consumers (see
	// fleet.Options); 0 means the defaults.
	PinnedTTL, SnapshotEvery time.Duration
	// FoldAfter: see fleet.Options; 0 means fleet.DefaultFoldAfter.
	FoldAfter time.Duration
	// HoursKept: see fleet.Options (0: fleet.DefaultHoursKept; negative:
	// off).
	HoursKept time.Duration
	// StartTimeout bounds how long start-up waits for NATS and JetStream
	// (streams, buckets, the lease, the consumers) while a node is down or
	// a quorum is missing, retrying with backoff; then Run fails with
	// ErrService. 0 means 2 minutes.
	StartTimeout time.Duration
	// MaxRecordBytes refuses (dead-letters) a trace record larger than
	// this; 0 means calls.MaxRecordBytes, -1 no limit.
	MaxRecordBytes int
}

// Defaults returns the default of every option that has one and does not
// depend on DataDir: the values EnsureDefaults fills in, and HTTPAddr's
// (127.0.0.1:9464), which EnsureDefaults leaves empty because "" disables
// HTTP. A default is written here or in the package that owns the option
// (fleet.Options.EnsureDefaults, segpub, producer, evalreq) and read from
// here by `verdryx serve`'s flags.
func Defaults() Options {
	f := (&fleet.Options{}).EnsureDefaults()
	follow := (&segpub.FollowOptions{}).EnsureDefaults()
	return Options{
		Listen:          "127.0.0.1:4222",
		HTTPAddr:        "127.0.0.1:9464",
		Settle:          follow.Settle,
		PublishRetryFor: producer.DefaultRetryFor,
		SLOEvery:        DefaultSLOEvery,
		SLOWindow:       DefaultSLOWindow,
		CatchUpWait:     evalreq.DefaultCatchUpWait,
		Subjects:        streams.DefaultSubjects(),
		PinnedTTL:       f.PinnedTTL,
		SnapshotEvery:   f.SnapshotEvery,
		FoldAfter:       f.FoldAfter,
		HoursKept:       f.HoursKept,
		StartTimeout:    2 * time.Minute,
		MaxRecordBytes:  calls.MaxRecordBytes,
	}
}

// EnsureDefaults fills every zero option that has a default and returns
// o: those of Defaults (HTTPAddr excepted: empty disables HTTP; a negative
// SLOEvery, HoursKept or MaxRecordBytes stays: off, or no limit), and,
// given a DataDir, DBPath (store.ResolvePath), Instance
// (DefaultInstance) and Roots (<DataDir>/eval); a nil Logger discards.
func (o *Options) EnsureDefaults() *Options {
	d := Defaults()
	setIfZero(&o.Listen, d.Listen)
	setIfZero(&o.Settle, d.Settle)
	setIfZero(&o.PublishRetryFor, d.PublishRetryFor)
	setIfZero(&o.SLOEvery, d.SLOEvery)
	setIfZero(&o.CatchUpWait, d.CatchUpWait)
	setIfZero(&o.Subjects, d.Subjects)
	setIfZero(&o.PinnedTTL, d.PinnedTTL)
	setIfZero(&o.SnapshotEvery, d.SnapshotEvery)
	setIfZero(&o.FoldAfter, d.FoldAfter)
	setIfZero(&o.HoursKept, d.HoursKept)
	setIfZero(&o.MaxRecordBytes, d.MaxRecordBytes)
	if o.SLOWindow <= 0 {
		o.SLOWindow = d.SLOWindow
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = d.StartTimeout
	}
	if o.DBPath == "" && o.DataDir != "" {
		// The stack's rule: $VERDRYX_DB, $TAIPAN_HOME/verdryx.db when that
		// directory exists, else <data>/verdryx.db.
		o.DBPath = store.ResolvePath("", o.DataDir, store.Env{})
	}
	if o.Instance == "" && o.DataDir != "" {
		o.Instance = DefaultInstance(o.DataDir)
	}
	if len(o.Roots) == 0 && o.DataDir != "" {
		o.Roots = []string{filepath.Join(o.DataDir, "eval")}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// setIfZero sets *p to def when *p is the zero value.
func setIfZero[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// DefaultInstance names a worker's chain subject: stable across restarts
// of the same data directory, distinct between data directories.
func DefaultInstance(dataDir string) string {
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(dataDir)
	sum := sha256.Sum256([]byte(abs))
	return sanitizeToken(host) + "-" + hex.EncodeToString(sum[:4])
}

func sanitizeToken(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "verdryx"
	}
	return b.String()
}
