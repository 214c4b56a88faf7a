package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	oklogrun "github.com/oklog/run"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/consumer/pull"
	"github.com/verdryx/verdryx/consumer/tail"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/httpapi"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/internal/gcpercent"
	"github.com/verdryx/verdryx/internal/hugepage"
	"github.com/verdryx/verdryx/lease"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/qualitylog"
	"github.com/verdryx/verdryx/ragask"
	"github.com/verdryx/verdryx/redact"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/tailfwd"
)

// Worker is the verdryx worker: the trace and eval consumers, RAG asks,
// the tail forwarder, the producers and the health endpoints, assembled
// from Options. Create it with New and call Run once.
type Worker struct {
	opts Options
	out  outputs
	// evalFiles are Options.EvalRequestFiles as New read and checked
	// them: Run publishes these bytes and reports these requests.
	evalFiles []evalFile
	// evalAfterCommit, when set (by tests in this package), runs after an
	// eval run is committed and before it is recorded on the quality log.
	evalAfterCommit func(requestID, runID string)
}

// New checks opts, fills their defaults and returns a worker. It opens
// nothing (Run does) but refuses, with an error wrapping ErrInput that
// names the option, what cannot work: no data directory, an open server
// exposed beyond loopback (the embedded NATS server without
// authentication unless Security.Insecure, HTTP unless HTTPPublic), a
// replay directory that is not one, an eval-request file that does not
// decode or that would be refused (its eval_set_path outside Roots).
func New(opts Options) (*Worker, error) {
	if opts.DataDir == "" {
		return nil, inputError(errors.New("Options.DataDir: empty data directory"))
	}
	opts.EnsureDefaults()
	w := &Worker{opts: opts}
	if err := w.check(); err != nil {
		return nil, inputError(err)
	}
	return w, nil
}

// check applies New's refusals to w.opts (defaults filled).
func (w *Worker) check() error {
	o := &w.opts
	if o.NATSURL == "" && !embedded.IsLoopback(o.Listen) && !o.Security.HasAuth() && !o.Security.Insecure {
		return fmt.Errorf("Options.Listen %s is not a loopback address: the embedded server needs authentication (Options.Security; Options.Security.Insecure to run it open)", o.Listen)
	}
	if o.HTTPAddr != "" && !embedded.IsLoopback(o.HTTPAddr) && !o.HTTPPublic {
		return fmt.Errorf("Options.HTTPAddr %s is not a loopback address: /metrics and /readyz have no authentication (Options.HTTPPublic to serve them anyway)", o.HTTPAddr)
	}
	if o.Follow && (o.ReplayDir == "" || o.Once) {
		return errors.New("Options.Follow needs Options.ReplayDir, and not Options.Once (a follower never drains)")
	}
	if o.ReplayDir != "" {
		if fi, err := os.Stat(o.ReplayDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("Options.ReplayDir %s: not a directory", o.ReplayDir)
		}
	}
	for _, f := range o.EvalRequestFiles {
		ef, err := readEvalFile(f, w.roots(), o.AllowModels)
		if err != nil {
			return err
		}
		w.evalFiles = append(w.evalFiles, ef)
	}
	if o.MaxCostUSD < 0 || math.IsNaN(o.MaxCostUSD) || math.IsInf(o.MaxCostUSD, 0) {
		return fmt.Errorf("Options.MaxCostUSD %v: want a finite amount of US dollars >= 0 (0: no bound)", o.MaxCostUSD)
	}
	prices := o.Prices
	if prices == nil {
		prices = llm.DefaultPriceBook()
	}
	for _, id := range append([]string{o.Judge}, o.AllowModels...) {
		if id == "" || id == llm.StubID {
			continue
		}
		if o.MaxCostUSD > 0 && !prices.Priced(id) {
			return fmt.Errorf("model %s (Options.AllowModels, Options.Judge) has no price, so Options.MaxCostUSD cannot bound its spend (give it one with Options.Prices)", id)
		}
		if _, err := llm.Models(o.Models)(id); err != nil {
			return fmt.Errorf("model %s (Options.AllowModels, Options.Judge): %w", id, err)
		}
	}
	return nil
}

// Options returns the worker's options, defaults filled.
func (w *Worker) Options() Options { return w.opts }

// onceGCPercent is the GOGC a Once run runs with when $GOGC is not set.
const onceGCPercent = 75

// Run opens the store, connects to NATS (starting the embedded server
// when no URL is given), takes the instance lease and runs every actor
// until ctx is done (main cancels it on SIGINT and SIGTERM), an actor fails, or
// with Once the inputs are drained. Shutdown is ordered: the actors stop
// fetching and finish in-flight work, the events file is flushed, then the
// connection drains before the store, the lease and the server close.
// A cancelled ctx or a drain is a clean exit (nil).
func (w *Worker) Run(ctx context.Context) error {
	defer w.closeOutputs()
	o := &w.opts
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return inputError(fmt.Errorf("Options.DataDir %s: %w", o.DataDir, err))
	}
	unlock, err := lockDataDir(o.DataDir)
	if err != nil {
		return inputError(fmt.Errorf("Options.DataDir: %w", err))
	}
	defer unlock()
	if o.Once {
		// A run that ends when drained peaks while its backlog drains,
		// the embedded server's block caches and the partitions' open
		// days held at once (about 500 MiB live on 10 M rows in flight):
		// collecting at 1.75x the live heap instead of 2x keeps its peak
		// RSS about 100 MiB lower for 2-4% more CPU (docs/benchmarks.md).
		defer gcpercent.Tune(onceGCPercent)()
	}
	if o.HugePages {
		hctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			hugepage.AdviseHeap(hctx)
		}()
		defer func() {
			cancel()
			<-done
		}()
	}

	// Store.
	st, err := store.Open(ctx, o.DBPath, store.Options{})
	if err != nil {
		return inputError(err)
	}
	defer st.Close()
	if m := st.Migrated(); m != nil {
		o.Logger.Warn("migrated the store from the Python verdryx's schema in place", "store", o.DBPath, "runs", m.Runs,
			"scores", m.Scores, "unanswered", m.Unanswered, "baselines", m.Baselines, "copy", m.Backup)
	}

	r := &running{w: w, st: st, freed: make(chan struct{}, 1), roots: w.roots(), metrics: httpapi.NewMetrics(), tailDone: make(chan struct{}), inputsDone: make(chan struct{}), closed: make(chan struct{}),
		start: &startRetrier{deadline: time.Now().Add(o.StartTimeout), log: o.Logger}, retry: producer.NewRetrier(o.PublishRetryFor, o.Logger)}
	defer r.close()
	// Health first: /readyz answers 503 while start-up waits for NATS.
	if err := r.serveHTTP(); err != nil {
		return err
	}
	if err := r.connect(ctx); err != nil {
		return err
	}
	if err := r.sinks(ctx); err != nil {
		return err
	}
	var g oklogrun.Group
	if err := r.actors(ctx, &g); err != nil {
		return err
	}

	// Inputs published at start, while the consumers already run, so a
	// replay is applied as it is published. A corrupt segment published
	// nothing; it is named at the end and fails the run.
	var failed []string
	{
		ictx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			f, err := r.publishInputs(ictx)
			if err != nil {
				return err
			}
			failed = f
			close(r.inputsDone)
			if o.Follow && o.ReplayDir != "" {
				return r.follow(ictx)
			}
			<-ictx.Done()
			return nil
		}, func(error) { cancel() })
	}
	if o.SLOEvery > 0 && !o.Once {
		sctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return r.sloLoop(sctx) }, func(error) { cancel() })
	}
	r.ready.Store(true)
	o.Logger.Info("worker started", "instance", o.Instance, "events_subject", r.chain.Subject(), "db", o.DBPath)

	err = g.Run()
	clean := err == nil || errors.Is(err, errDrained) ||
		(errors.Is(err, context.Canceled) && ctx.Err() != nil) // the caller stopped us
	// The trace report reads the partitions' snapshots, all written by
	// the fleet's clean stop, from the bucket while the connection is up.
	var traces *fleet.Aggregate
	var tracesErr error
	if clean && o.Once && w.streaming() {
		traces, tracesErr = fleet.ReadAggregate(context.WithoutCancel(ctx), r.js, o.Subjects)
	}
	r.shutdown()
	if !clean {
		return err
	}
	if tracesErr != nil {
		return fmt.Errorf("read the trace partitions: %w", tracesErr)
	}
	if o.Once && w.streaming() {
		// The embedded server and the connections go first, and with them
		// the server's block caches (hundreds of MiB after a large replay).
		r.close()
		if err := w.emitEarlier(ctx, st); err != nil {
			return err
		}
		w.emit(Output{Traces: traces})
	}
	if len(failed) > 0 {
		return &ReplayFailedError{Dir: o.ReplayDir, Segments: failed}
	}
	return nil
}

// roots are the absolute Roots.
func (w *Worker) roots() confine.Roots {
	var roots confine.Roots
	for _, root := range w.opts.Roots {
		if a, err := filepath.Abs(root); err == nil {
			roots = append(roots, a)
		}
	}
	return roots
}

// running is the state of one Run: what was opened, in order, and what
// the actors share.
type running struct {
	w        *Worker
	st       *store.Store
	metrics  *httpapi.Metrics
	closers  []func() // run in reverse by close
	ns       *server.Server
	nc       *nats.Conn
	closed   chan struct{} // closed when nc has closed
	js       jetstream.JetStream
	traces   jetstream.Consumer // the bare traces subject (routed)
	eval     jetstream.Consumer
	fleet    *fleet.Fleet
	quality  *qualitylog.Log
	lease    *lease.Lease
	chain    *producer.NATSChain
	fileW    *envelope.Writer
	deps     evalrun.Deps
	roots    confine.Roots
	tailDone chan struct{}
	// inputsDone is closed once the replay and the eval-request files are
	// published.
	inputsDone chan struct{}
	start      *startRetrier // start-up steps against NATS share one budget
	// freed receives (without blocking the partition) when a snapshot
	// folded or pruned days or followed a burst; releaseMemory drains it.
	freed   chan struct{}
	http    *httpapi.Server
	httpErr chan error

	ready, tracesOK, evalOK atomic.Bool
	// publishFailing is true while the replay or the follower's publishes
	// fail (retried, see Options.PublishRetryFor).
	publishFailing atomic.Bool
	// notReadyWhy is the last reason readiness gave (see notReady), so
	// that a change is logged once.
	notReadyWhy atomic.Pointer[string]
	// retry retries every other JetStream and KV write (tail, eval
	// requests, claims and ledger, events, dead letters) while its stream
	// or bucket has no leader; readiness is 503 while one is failing.
	retry *producer.Retrier
}

func (r *running) onClose(f func()) { r.closers = append(r.closers, f) }

// close runs the closers in reverse, once (a second call does nothing).
func (r *running) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// connect starts the embedded server or connects to NATS, ensures the
// streams and takes the instance lease.
func (r *running) connect(ctx context.Context) error {
	o := &r.w.opts
	url := o.NATSURL
	if url == "" {
		ns, err := embedded.StartWith(filepath.Join(o.DataDir, "nats"), o.Listen, o.Security)
		if err != nil {
			return err
		}
		r.ns = ns
		r.onClose(func() { ns.Shutdown(); ns.WaitForShutdown() })
		url = ns.ClientURL()
		o.Logger.Info("embedded nats started", "url", url, "store", filepath.Join(o.DataDir, "nats"))
	}
	connOpts := append([]nats.Option{nats.Name("verdryx-serve-" + o.Instance), nats.MaxReconnects(-1)}, o.NATSOptions...)
	if r.ns != nil {
		connOpts = append(connOpts, nats.InProcessServer(r.ns))
	}
	nc, err := nats.Connect(url, connOpts...)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", redact.URL(url), err)
	}
	r.nc = nc
	nc.SetClosedHandler(func(*nats.Conn) { close(r.closed) })
	r.onClose(func() {
		if !nc.IsClosed() {
			nc.Close()
		}
	})
	if r.js, err = jetstream.New(nc); err != nil {
		return err
	}
	if err := r.start.do(ctx, "streams", func(ctx context.Context) (err error) {
		r.traces, r.eval, err = streams.EnsureStreams(ctx, r.js, o.Subjects, 0)
		return err
	}); err != nil {
		return err
	}

	// The fleet's quality log, which the store follows (actors).
	if err := r.start.do(ctx, "quality log", func(ctx context.Context) (err error) {
		r.quality, err = qualitylog.Open(ctx, r.js, o.Subjects, r.st, qualitylog.Options{Logger: o.Logger, Retry: r.retry})
		return err
	}); err != nil {
		return err
	}
	r.metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "verdryx_quality_log_lag_messages",
		Help: "Records of the fleet's quality log this worker's store has not applied yet, as last seen."},
		func() float64 { return float64(r.quality.Lag()) }))

	// The instance id: one live worker per id (its chain subject). The
	// lease renews itself from here on, whatever start-up still does.
	absData, _ := filepath.Abs(o.DataDir)
	host, _ := os.Hostname()
	if err := r.start.do(ctx, "instance lease", func(ctx context.Context) (err error) {
		r.lease, err = lease.Acquire(ctx, r.js, o.Instance, host+":"+absData, lease.Options{Logger: o.Logger, Replicas: o.Subjects.Replicas})
		if errors.Is(err, lease.ErrInstanceInUse) {
			return inputError(fmt.Errorf("Options.Instance: %w", err))
		}
		return err
	}); err != nil {
		return err
	}
	r.onClose(r.lease.Release)
	return nil
}

// sinks opens this instance's chain on NATS, the chained file and the
// span exporter, and the grading deps that use them.
func (r *running) sinks(ctx context.Context) error {
	o := &r.w.opts
	if err := r.start.do(ctx, "events chain", func(ctx context.Context) (err error) {
		r.chain, err = producer.NewNATSChain(ctx, r.js, o.Subjects.EventsStream, o.Subjects.Events+"."+o.Instance, producer.ChainOptions{Logger: o.Logger, Retry: r.retry})
		return err
	}); err != nil {
		return err
	}
	sinks := producer.Fanout{r.chain}
	var err error
	if o.EventsPath != "" {
		// fsync per event: an eval event counted as emitted is on disk.
		r.fileW, err = envelope.OpenWriter(o.EventsPath, envelope.WriterOptions{Sync: envelope.SyncEvery, Logger: o.Logger})
		if err != nil {
			return inputError(fmt.Errorf("Options.EventsPath: %w", err))
		}
		r.onClose(func() { r.fileW.Close() })
		// An event emitted again after a crash is dropped, as the NATS chain
		// drops it by message id.
		df, err := producer.NewDedupeFile(r.fileW, o.EventsPath)
		if err != nil {
			return inputError(fmt.Errorf("Options.EventsPath: %w", err))
		}
		sinks = append(sinks, df)
	}
	r.deps = evalrun.Deps{Store: r.st, Events: sinks, Version: o.Version, Logger: o.Logger, Typed: o.Typed, Prices: o.Prices}
	if o.OTLPEndpoint != "" {
		spans, err := producer.NewSpans(ctx, producer.SpanOptions{Endpoint: o.OTLPEndpoint, ServiceVersion: o.Version})
		if err != nil {
			return inputError(fmt.Errorf("Options.OTLPEndpoint: %w", err))
		}
		r.onClose(func() {
			fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := spans.Shutdown(fctx); err != nil {
				o.Logger.Warn("span export", "err", err)
			}
		})
		r.deps.Spans = spans
	}
	return nil
}

// actors adds every actor to g, in the order they are interrupted.
func (r *running) actors(ctx context.Context, g *oklogrun.Group) error {
	o := &r.w.opts
	// The caller's cancellation is a clean stop (main turns SIGINT and
	// SIGTERM into it; nothing below main handles signals).
	{
		cctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { <-cctx.Done(); return nil }, func(error) { cancel() })
	}

	// The instance lease renews itself from the moment it was taken;
	// losing it to another holder stops the worker.
	{
		lctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			select {
			case <-r.lease.Lost():
				return r.lease.Err()
			case <-lctx.Done():
				return nil
			}
		}, func(error) { cancel() })
	}

	// Consumers. Each stops fetching, finishes its in-flight batch and
	// acks it before returning; they must stop before the connection
	// drains in shutdown.
	pullers, err := r.pullers(ctx)
	if err != nil {
		return err
	}
	{
		fctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return r.fleet.Run(fctx) }, func(error) { cancel() })
	}
	for _, p := range pullers {
		cctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return p.Run(cctx) }, func(error) { cancel() })
	}

	// The quality log: the store applies it, its own records included, and
	// what the store committed but the log does not hold yet (a run whose
	// worker died before recording it, baselines made on the store's
	// file) is published.
	{
		qctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return r.quality.Follow(qctx) }, func(error) { cancel() })
	}
	{
		pctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { r.publishPending(pctx); return nil }, func(error) { cancel() })
	}

	// RAG asks.
	if err := r.asks(ctx, g); err != nil {
		return err
	}
	// Tail.
	if err := r.tail(g); err != nil {
		return err
	}

	// Health, readiness and metrics (listening since start-up).
	if r.http != nil {
		hctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			select {
			case err := <-r.httpErr:
				return err
			case <-hctx.Done():
				return nil
			}
		}, func(error) { cancel() })
	}

	// Memory folded days and drained bursts held goes back to the system
	// (not with Once: the process ends once drained, a release would only
	// delay that).
	if !o.Once {
		mctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { releaseMemory(mctx, r.freed, debug.FreeOSMemory); return nil }, func(error) { cancel() })
	}

	// Lag gauge, and with Once the drain watcher.
	{
		wctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			cons := r.fleet.Consumers()
			cons["eval"] = r.eval
			return watchLag(wctx, cons, r.metrics, o.Once, []<-chan struct{}{r.tailDone, r.inputsDone}, o.Logger)
		}, func(error) { cancel() })
	}
	return nil
}

// notReady is why readiness is 503, "" when it is 200.
func (r *running) notReady() string {
	switch {
	case !r.ready.Load():
		return "starting"
	case !r.tracesOK.Load():
		return "the traces consumer's last batch failed"
	case !r.evalOK.Load():
		return "the eval consumer's last batch failed"
	case r.publishFailing.Load():
		return "trace row publishes failing"
	case !r.retry.Healthy():
		return "a write failing (retried)"
	case !r.lease.Held():
		return "instance lease not held"
	}
	return ""
}

// serveHTTP starts /healthz, /readyz, /metrics and /report, before
// anything else, so that readiness says 503 while start-up waits.
func (r *running) serveHTTP() error {
	o := &r.w.opts
	if o.HTTPAddr == "" {
		return nil
	}
	hs := &httpapi.Server{Addr: o.HTTPAddr, Metrics: r.metrics, Ready: func() bool {
		why := r.notReady()
		if prev := r.notReadyWhy.Swap(&why); prev == nil || *prev != why {
			if why == "" {
				o.Logger.Info("ready")
			} else {
				o.Logger.Info("not ready", "reason", why)
			}
		}
		return why == ""
	}}
	hs.Report = reportHandler(r.st, func(ctx context.Context, window outcome.Options) (*fleet.Aggregate, error) {
		if !r.ready.Load() { // r.js is set before ready
			return nil, errors.New("worker still starting: NATS not ready")
		}
		return fleet.ReadAggregateFor(ctx, r.js, o.Subjects, window)
	}, reportTTL, o.Version, o.Logger)
	addr, err := hs.Listen()
	if err != nil {
		return inputError(fmt.Errorf("Options.HTTPAddr %s: %w", o.HTTPAddr, err))
	}
	o.Logger.Info("http listening", "addr", addr)
	r.http, r.httpErr = hs, make(chan error, 1)
	go func() { r.httpErr <- hs.Serve() }()
	r.onClose(hs.Shutdown)
	return nil
}

// pullers builds the eval consumer and the partitioned trace consumers
// (r.fleet). Readiness follows them: a
// consumer whose last batch failed transiently (a failing store) makes
// the worker unready until a batch commits again.
func (r *running) pullers(ctx context.Context) ([]*pull.Puller, error) {
	o := &r.w.opts
	r.tracesOK.Store(true)
	r.evalOK.Store(true)
	dead := deadletter.ForPull(&producer.DeadLetterPublisher{JS: r.js, Subject: o.Subjects.DeadLetter, Retry: r.retry})
	// One run per request id across every worker sharing the eval consumer.
	var claims *evalreq.Claims
	if err := r.start.do(ctx, "eval claims", func(ctx context.Context) (err error) {
		claims, err = evalreq.NewClaims(ctx, r.js, o.Instance, o.Subjects.Replicas, r.retry)
		return err
	}); err != nil {
		return nil, err
	}
	evalH := evalreq.NewHandler(r.st, r.deps, r.nc, evalreq.Options{Roots: r.roots, Logger: o.Logger, Claims: claims,
		Files: &confine.Reader{Roots: r.roots, MaxBytes: o.FilesMaxBytes, Timeout: o.FilesTimeout}, Replies: o.Replies, Models: llm.Models(o.Models), Allowed: o.AllowModels, Judge: o.Judge,
		Index: index.NewStore(o.DataDir, index.StoreOptions{Logger: o.Logger}), Providers: o.Providers, MaxCostUSD: o.MaxCostUSD,
		Quality: r.quality, CatchUpWait: o.CatchUpWait, AfterCommit: r.w.evalAfterCommit,
		OnResult: func(req evalreq.Request, res evalrun.Result) {
			r.metrics.EvalRuns.WithLabelValues("ok").Inc()
			if run := res.Run; !run.FinishedAt.IsZero() {
				r.metrics.EvalSeconds.Observe(run.FinishedAt.Sub(run.StartedAt).Seconds())
			}
			r.metrics.ChainLength.Set(float64(r.chain.Len()))
			r.w.emit(Output{Eval: &EvalOutput{Request: req, Result: res}})
		}})
	if err := r.start.do(ctx, "partition consumers", func(ctx context.Context) (err error) {
		r.fleet, err = fleet.New(ctx, r.js, r.traces, fleet.Options{Subjects: o.Subjects, Instance: o.Instance,
			SnapshotEvery: o.SnapshotEvery, PinnedTTL: o.PinnedTTL,
			FoldAfter: o.FoldAfter, HoursKept: o.HoursKept, SnapshotBytes: func(n int) { r.metrics.SnapshotBytes.Add(float64(n)) },
			PartitionLoad: func(d time.Duration) { r.metrics.PartitionLoad.Observe(d.Seconds()) },
			Freed: func() {
				select {
				case r.freed <- struct{}{}:
				default: // a release is due already
				}
			},
			Logger: o.Logger, Counters: r.metrics, DeadLetter: dead, Healthy: r.tracesOK.Store, Retry: r.retry, MaxRecordBytes: o.MaxRecordBytes})
		return err
	}); err != nil {
		return nil, err
	}
	evalPull, err := pull.New(r.eval, evalH,
		pull.Options{Name: "eval", Batch: 1, Heartbeat: streams.EvalAckWait / 3, Expiry: evalPullExpiry, Logger: o.Logger, Counters: r.metrics, DeadLetter: dead, Healthy: r.evalOK.Store})
	if err != nil {
		return nil, err
	}
	return []*pull.Puller{evalPull}, nil
}

// evalPullExpiry is the eval consumer's pull expiry: a pull lost with the
// eval stream's leader is renewed within about this long.
const evalPullExpiry = 5 * time.Second

// asks adds the RAG ask server when there is something to answer from
// (OpenAsks), and the follower of the active generation, which names the
// generation served in verdryx_rag_generation_info. A refused ask is
// dead-lettered; with --otlp each ask is a span.
func (r *running) asks(ctx context.Context, g *oklogrun.Group) error {
	o := &r.w.opts
	asker, err := OpenAsks(ctx, *o)
	if err != nil {
		return inputError(err)
	}
	if asker == nil {
		return nil
	}
	dl := &producer.DeadLetterPublisher{JS: r.js, Subject: o.Subjects.DeadLetter, Retry: r.retry}
	opts := ragask.Options{Logger: o.Logger, Replies: o.Replies,
		Asked: func(ok bool) { r.metrics.Asks.WithLabelValues(map[bool]string{true: "ok", false: "error"}[ok]).Inc() },
		DeadLetter: func(ctx context.Context, subject string, data []byte, h nats.Header, reason string) error {
			return dl.Publish(ctx, producer.DeadLetter{Data: data, Header: h, Subject: subject, Reason: reason})
		}}
	if t, ok := r.deps.Spans.(ragask.Tracer); ok {
		opts.Tracer = t
	}
	asks := ragask.NewServer(r.nc, o.Subjects.RAGAsk, asker, opts)
	actx, cancel := context.WithCancel(context.Background())
	gens, follow := asker.(*Generations)
	if !follow {
		g.Add(func() error { return asks.Run(actx) }, func(error) { cancel() })
		return nil
	}
	// Following the active generation: asks are subscribed to once one
	// serves (other workers of the queue group answer meanwhile).
	gens.OnServe(func(gen string) {
		r.metrics.RAGGeneration.Reset()
		r.metrics.RAGGeneration.WithLabelValues(gen).Set(1)
	})
	r.onClose(gens.Close)
	fctx, fcancel := context.WithCancel(context.Background())
	g.Add(func() error { return gens.Run(fctx) }, func(error) { fcancel() })
	g.Add(func() error {
		select {
		case <-gens.Ready():
		case <-actx.Done():
			return nil
		}
		return asks.Run(actx)
	}, func(error) { cancel() })
	return nil
}

// tail adds the tail forwarder; without a tail, the tail counts as done.
func (r *running) tail(g *oklogrun.Group) error {
	o := &r.w.opts
	if o.TailPath == "" {
		close(r.tailDone)
		return nil
	}
	abs, _ := filepath.Abs(o.TailPath)
	sum := sha256.Sum256([]byte(abs))
	stateDir := filepath.Join(o.DataDir, "tail")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	t, err := tail.New(o.TailPath, tail.Options{
		StatePath: filepath.Join(stateDir, hex.EncodeToString(sum[:8])+".offset"), FromStart: true, Once: o.Once,
		Logger: o.Logger,
	})
	if err != nil {
		return inputError(fmt.Errorf("Options.TailPath: %w", err))
	}
	fw := tailfwd.New(t, r.js, o.Subjects, tailfwd.Options{Logger: o.Logger, Retry: r.retry,
		Counted: func(class string) { r.metrics.TailLines.WithLabelValues(class).Inc() }})
	tctx, cancel := context.WithCancel(context.Background())
	g.Add(func() error {
		defer close(r.tailDone)
		if err := fw.Run(tctx); err != nil && !errors.Is(err, context.Canceled) {
			if producer.Retryable(err) { // past --publish-retry-for
				return serviceError(fmt.Errorf("tail %s: %w", o.TailPath, err))
			}
			return fmt.Errorf("tail %s: %w", o.TailPath, err)
		}
		if o.Once {
			<-tctx.Done() // drained; wait for the shutdown
		}
		return nil
	}, func(error) { cancel() })
	return nil
}

// shutdown runs after the actors have stopped fetching and finished
// in-flight work: flush the chain file, then drain the connection and
// wait for it to close.
func (r *running) shutdown() {
	o := &r.w.opts
	r.ready.Store(false)
	if r.fileW != nil {
		if ferr := r.fileW.Sync(); ferr != nil {
			o.Logger.Warn("flush events file", "err", ferr)
		}
	}
	if derr := r.nc.Drain(); derr == nil {
		select {
		case <-r.closed:
		case <-time.After(10 * time.Second):
			o.Logger.Warn("nats drain timed out")
		}
	}
}

// drainPoll is how often watchLag looks for the drain once the inputs are
// done.
const drainPoll = 25 * time.Millisecond

// errDrained ends the run group when Once finds nothing left to do.
var errDrained = errors.New("inputs drained")

// watchLag updates the lag gauges every 500 ms; with once it returns
// errDrained when every consumer has nothing pending or unacked, twice in
// a row, and every input is done (closed): the tail at its end, the
// replay published. Once the inputs are done it looks every 25 ms
// (drainPoll), so that --once ends soon after the last ack.
func watchLag(ctx context.Context, consumers map[string]jetstream.Consumer, m *httpapi.Metrics, once bool, inputs []<-chan struct{}, logger *slog.Logger) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	idle, fast := 0, false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		busy := false
		for name, c := range consumers {
			info, err := c.Info(ctx)
			if err != nil {
				logger.Debug("consumer info", "err", err)
				busy = true
				continue
			}
			m.Lag.WithLabelValues(name).Set(float64(info.NumPending))
			if info.NumPending > 0 || info.NumAckPending > 0 {
				busy = true
			}
		}
		if !once {
			continue
		}
		inputsDone := true
		for _, done := range inputs {
			select {
			case <-done:
			default:
				busy, inputsDone = true, false
			}
		}
		if inputsDone && !fast {
			fast = true
			tick.Reset(drainPoll)
		}
		if busy {
			idle = 0
			continue
		}
		if idle++; idle >= 2 {
			return errDrained
		}
	}
}

// follow publishes the segments of ReplayDir as they complete until ctx
// is done, with its progress and lag as gauges.
func (r *running) follow(ctx context.Context) error {
	o := &r.w.opts
	f := segpub.NewFollower(r.js, o.Subjects.Traces, o.ReplayDir, segpub.FollowOptions{Settle: o.Settle,
		Options: segpub.Options{Partitions: o.Subjects.Partitions, Logger: o.Logger, RetryFor: o.PublishRetryFor, Healthy: r.publishHealthy},
		OnPublished: func(path string, st segpub.Stats) {
			o.Logger.Info("followed", "segment", filepath.Base(path), "rows", st.Rows, "new", st.New, "duplicates", st.Duplicates)
		}})
	r.metrics.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "verdryx_follow_pending_segments",
			Help: "Segments of the followed directory seen but not published yet (incomplete or unreadable)."},
			func() float64 { n, _ := f.Pending(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "verdryx_follow_oldest_pending_seconds",
			Help: "Age of the oldest segment of the followed directory not published yet (0 with none)."},
			func() float64 { _, d := f.Pending(); return d.Seconds() }))
	o.Logger.Info("following", "dir", o.ReplayDir)
	if err := f.Run(ctx); err != nil && ctx.Err() == nil {
		return serviceError(err)
	}
	return nil
}

// publishHealthy is the replay's and the follower's health signal:
// readiness is 503 from a failed publish until an ack flows again.
func (r *running) publishHealthy(ok bool) { r.publishFailing.Store(!ok) }

// publishInputs replays the segment directory and publishes the
// eval-request files, blocking until JetStream has stored them. It
// returns the segments that failed.
func (r *running) publishInputs(ctx context.Context) (failedSegs []string, err error) {
	o := &r.w.opts
	// A followed directory is published by the follower alone, which
	// waits for a segment the gateway is still writing instead of
	// failing it.
	if o.ReplayDir != "" && !o.Follow {
		st, err := segpub.Publish(ctx, r.js, o.Subjects.Traces, o.ReplayDir, segpub.Options{Partitions: o.Subjects.Partitions, Logger: o.Logger,
			RetryFor: o.PublishRetryFor, Healthy: r.publishHealthy,
			Progress: func(n int) { r.w.emit(Output{ReplayRows: n}) }})
		if err != nil {
			if segment.IsError(err) {
				return nil, inputError(fmt.Errorf("Options.ReplayDir: %w", err))
			}
			return nil, serviceError(fmt.Errorf("Options.ReplayDir %s: %w", o.ReplayDir, err))
		}
		failedSegs = st.Failed
		r.w.emit(Output{Replay: &st})
		o.Logger.Info("replayed", "dir", o.ReplayDir, "segments", st.Segments, "rows", st.Rows, "new", st.New, "duplicates", st.Duplicates, "failed", len(st.Failed))
	}
	for _, f := range r.w.evalFiles {
		if _, err := r.retry.Store(ctx, r.js, &nats.Msg{Subject: o.Subjects.EvalRequests, Data: f.raw}, "eval:"+f.req.RequestID); err != nil {
			return nil, serviceError(fmt.Errorf("publish eval request %s: %w", f.path, err))
		}
	}
	return failedSegs, nil
}

// pendingEvery is how often the worker publishes what its store
// committed but the quality log does not hold yet.
const pendingEvery = 2 * time.Second

// publishPending publishes the store's records not yet on the quality
// log, at once and every pendingEvery, until ctx is done.
func (r *running) publishPending(ctx context.Context) {
	t := time.NewTicker(pendingEvery)
	defer t.Stop()
	for {
		if n, err := r.quality.PublishPending(ctx); err != nil && ctx.Err() == nil {
			r.w.opts.Logger.Warn("quality log: publishing the store's unrecorded runs and baselines", "published", n, "err", err)
		} else if n > 0 {
			r.w.opts.Logger.Info("quality log: recorded the store's runs and baselines it did not hold", "records", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
