package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	oklogrun "github.com/oklog/run"
	"github.com/schollz/progressbar/v3"
	"github.com/verdryx/verdryx/consumer"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/redact"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/worker"
)

// natsFlags are the connection flags shared by serve, replay and bench.
type natsFlags struct {
	url, creds, tlsCA, tlsCert, tlsKey *string
}

func addNATSFlags(fs *flag.FlagSet, def string, help string) natsFlags {
	return natsFlags{
		url:     fs.String("nats", envOr("VERDRYX_NATS_URL", def), help),
		creds:   fs.String("nats.creds", envOr("VERDRYX_NATS_CREDS", ""), "NATS credentials file"),
		tlsCA:   fs.String("nats.tls-ca", envOr("VERDRYX_NATS_TLS_CA", ""), "CA certificate file for TLS to NATS ($VERDRYX_NATS_TLS_CA)"),
		tlsCert: fs.String("nats.tls-cert", envOr("VERDRYX_NATS_TLS_CERT", ""), "client certificate file for TLS to NATS ($VERDRYX_NATS_TLS_CERT)"),
		tlsKey:  fs.String("nats.tls-key", envOr("VERDRYX_NATS_TLS_KEY", ""), "client key file for TLS to NATS ($VERDRYX_NATS_TLS_KEY)"),
	}
}

func (n natsFlags) connect(url, name string, extra ...nats.Option) (*nats.Conn, error) {
	if err := checkTLSPair(*n.tlsCert, *n.tlsKey); err != nil {
		return nil, err
	}
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, extra...)
	if *n.creds != "" {
		opts = append(opts, nats.UserCredentials(*n.creds))
	}
	if *n.tlsCA != "" {
		opts = append(opts, nats.RootCAs(*n.tlsCA))
	}
	if *n.tlsCert != "" || *n.tlsKey != "" {
		opts = append(opts, nats.ClientCert(*n.tlsCert, *n.tlsKey))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact.URL(url), err)
	}
	return nc, nil
}

func addSubjectFlags(fs *flag.FlagSet) *worker.Subjects {
	s := worker.DefaultSubjects()
	fs.StringVar(&s.Traces, "subject.traces", s.Traces, "subject of per-call trace records and segment references")
	fs.StringVar(&s.EvalRequests, "subject.eval", s.EvalRequests, "subject of eval requests")
	fs.StringVar(&s.RAGAsk, "subject.ask", s.RAGAsk, "subject of RAG asks (core request/reply)")
	fs.StringVar(&s.Events, "subject.events", s.Events, "prefix of the events subject; each instance publishes on <prefix>.<instance>")
	fs.StringVar(&s.Tail, "subject.tail", s.Tail, "subject tailed envelopes are forwarded to")
	fs.StringVar(&s.DeadLetter, "subject.deadletter", s.DeadLetter, "dead-letter subject")
	return &s
}

func defaultDataDir() string { return envOr("VERDRYX_DATA", ".verdryx") }

// defaultInstance names this worker's chain subject: stable across restarts
// of the same data directory, distinct between data directories.
func defaultInstance(dataDir string) string {
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

type multiFlag []string

// serveAskCorpus returns the corpus file RAG asks are answered from: flag
// (--rag.corpus) when set and present, else the corpus the active index
// generation under dataDir recorded. It returns "" (asks disabled, logged)
// when there is neither.
func serveAskCorpus(flag, dataDir string, logger *slog.Logger) string {
	if flag != "" {
		if _, err := os.Stat(flag); err != nil {
			logger.Warn("rag asks disabled: corpus not found", "corpus", flag)
			return ""
		}
		return flag
	}
	path, m, err := index.NewStore(dataDir, index.StoreOptions{Logger: logger}).ActiveCorpus()
	switch {
	case errors.Is(err, index.ErrNoActive), errors.Is(err, index.ErrNoCorpus):
		logger.Info("rag asks disabled: no --rag.corpus and no index generation with a recorded corpus", "data", dataDir, "reason", err)
		return ""
	case err != nil:
		logger.Warn("rag asks disabled: the active index generation's corpus is unusable", "err", err)
		return ""
	}
	logger.Info("rag asks answered from the active index generation's corpus", "generation", m.ID, "corpus", path)
	return path
}

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// cmdServe runs the worker. See the README section "The worker".
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "", "Run the worker: consume trace records, eval requests and RAG asks from NATS JetStream, optionally\n"+
		"replay a Parquet directory and tail an NDJSON file, and publish hash-chained envelopes and spans.\n"+
		"With no --nats an embedded NATS server with JetStream runs in-process, storing under --data.", stderr)
	dataDir := fs.String("data", defaultDataDir(), "data directory: embedded NATS store, SQLite store, tail offsets ($VERDRYX_DATA)")
	nf := addNATSFlags(fs, "", "NATS server URL; empty starts the embedded server ($VERDRYX_NATS_URL)")
	listen := fs.String("nats.listen", "127.0.0.1:4222", "embedded server listen address (port 0 picks a free port)")
	dbPath := fs.String("db", envOr("VERDRYX_DB", ""), "SQLite store (default <data>/verdryx.db; $VERDRYX_DB)")
	eventsPath := fs.String("events", envOr("VERDRYX_EVENTS_PATH", ""), "also append envelopes to this chained NDJSON file ($VERDRYX_EVENTS_PATH)")
	instance := fs.String("instance", "", "instance name for this worker's event chain subject (default <host>-<hash of data dir>)")
	httpAddr := fs.String("http", "127.0.0.1:9464", "loopback address for /healthz, /readyz, /metrics and /report; empty disables")
	otlp := fs.String("otlp", envOr("VERDRYX_OTLP_ENDPOINT", ""), "OTLP/HTTP collector base URL ($VERDRYX_OTLP_ENDPOINT)")
	tailPath := fs.String("tail", "", "follow this NDJSON file (envelopes are chain-checked and forwarded; records feed the traces)")
	replayDir := fs.String("replay", "", "publish this Parquet segment directory to the traces subject at start")
	var evalFiles multiFlag
	fs.Var(&evalFiles, "eval-request", "publish this eval-request JSON file at start (repeatable)")
	corpus := fs.String("rag.corpus", "", "corpus answering RAG asks with the offline pipeline (default: the corpus the active index generation under <data>/index recorded; without one, asks are disabled)")
	var roots multiFlag
	fs.Var(&roots, "root", "directory eval-set and segment paths in messages may resolve under (repeatable; default <data>/eval)")
	once := fs.Bool("once", false, "exit when the inputs are drained: every consumer has nothing pending and the tail reached its end")
	verbose := fs.Bool("v", false, "debug logging")
	subjects := addSubjectFlags(fs)
	secf := addSecurityFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("serve: unexpected argument %q", pos[0])
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(redact.FromEnv(nil, secf.sec.Password, secf.sec.Token).Handler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if err := secf.check(*nf.url == "", *listen, *httpAddr, logger); err != nil {
		return err
	}

	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		return inputError(fmt.Errorf("--data %s: %w", *dataDir, err))
	}
	unlock, err := worker.LockDataDir(*dataDir)
	if err != nil {
		return inputError(fmt.Errorf("--data: %w", err))
	}
	defer unlock()
	if *dbPath == "" {
		*dbPath = filepath.Join(*dataDir, "verdryx.db")
	}
	if *instance == "" {
		*instance = defaultInstance(*dataDir)
	}
	if len(roots) == 0 {
		roots = multiFlag{filepath.Join(*dataDir, "eval")}
	}
	var absRoots worker.Roots
	for _, r := range roots {
		if a, err := filepath.Abs(r); err == nil {
			absRoots = append(absRoots, a)
		}
	}
	if *replayDir != "" {
		if a, err := filepath.Abs(*replayDir); err == nil {
			absRoots = append(absRoots, a)
		}
	}

	// Store.
	st, err := store.Open(ctx, *dbPath, store.Options{})
	if err != nil {
		return inputError(err)
	}
	defer st.Close()

	// NATS: embedded server or a real one.
	var ns *server.Server
	url := *nf.url
	if url == "" {
		ns, err = worker.StartEmbeddedWith(filepath.Join(*dataDir, "nats"), *listen, secf.sec)
		if err != nil {
			return err
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		url = ns.ClientURL()
		logger.Info("embedded nats started", "url", url, "store", filepath.Join(*dataDir, "nats"))
	}
	connOpts := secf.clientAuth()
	if ns != nil {
		connOpts = append(connOpts, nats.InProcessServer(ns))
	}
	nc, err := nf.connect(url, "verdryx-serve-"+*instance, connOpts...)
	if err != nil {
		return err
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	defer func() {
		if !nc.IsClosed() {
			nc.Close()
		}
	}()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	tracesCons, evalCons, err := worker.EnsureStreams(ctx, js, *subjects, 0)
	if err != nil {
		return err
	}

	// The instance id: one live worker per id (its chain subject).
	absData, _ := filepath.Abs(*dataDir)
	host, _ := os.Hostname()
	lease, err := worker.AcquireLease(ctx, js, *instance, host+":"+absData, worker.LeaseOptions{Logger: logger})
	if err != nil {
		return inputError(fmt.Errorf("--instance: %w", err))
	}
	defer lease.Release()

	// Sinks: this instance's chain on NATS, the chained file, spans.
	chain, err := producer.NewNATSChain(ctx, js, subjects.EventsStream, subjects.Events+"."+*instance, producer.ChainOptions{Logger: logger})
	if err != nil {
		return err
	}
	sinks := producer.Fanout{chain}
	var fileW *envelope.Writer
	if *eventsPath != "" {
		// fsync per event: an eval event counted as emitted is on disk.
		fileW, err = envelope.OpenWriter(*eventsPath, envelope.WriterOptions{Sync: envelope.SyncEvery, Logger: logger})
		if err != nil {
			return inputError(fmt.Errorf("--events: %w", err))
		}
		defer fileW.Close()
		// An event emitted again after a crash is dropped, as the NATS chain
		// drops it by message id.
		df, err := producer.NewDedupeFile(fileW, *eventsPath)
		if err != nil {
			return inputError(fmt.Errorf("--events: %w", err))
		}
		sinks = append(sinks, df)
	}
	var spans *producer.Spans
	if *otlp != "" {
		spans, err = producer.NewSpans(ctx, producer.SpanOptions{Endpoint: *otlp, ServiceVersion: version})
		if err != nil {
			return inputError(fmt.Errorf("--otlp: %w", err))
		}
		defer func() {
			fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := spans.Shutdown(fctx); err != nil {
				logger.Warn("span export", "err", err)
			}
		}()
	}

	metrics := worker.NewMetrics()
	// Readiness: started and not stopping, and no consumer's last batch
	// failed transiently (a failing store makes the worker unready until a
	// batch commits again).
	var ready, tracesOK, evalOK atomic.Bool
	tracesOK.Store(true)
	evalOK.Store(true)
	isReady := func() bool { return ready.Load() && tracesOK.Load() && evalOK.Load() }
	dead := worker.PullDeadLetters(&producer.DeadLetterPublisher{JS: js, Subject: subjects.DeadLetter})

	deps := grading.Deps{Store: st, Events: sinks, Version: version, Logger: logger}
	if spans != nil {
		deps.Spans = spans
	}
	// One run per request id across every worker sharing the eval consumer.
	claims, err := worker.NewRequestClaims(ctx, js, *instance)
	if err != nil {
		return err
	}
	evalH := worker.NewEvalHandler(st, deps, nc, worker.EvalOptions{Roots: absRoots, Logger: logger, Claims: claims,
		Files: secf.files(absRoots), Replies: secf.replyPolicy(*subjects),
		OnResult: func(req worker.EvalRequest, res grading.Result) {
			metrics.EvalRuns.WithLabelValues("ok").Inc()
			metrics.ChainLength.Set(float64(chain.Len()))
			printEvalResult(stdout, req, res)
		}})
	tracesPull, err := consumer.NewPuller(tracesCons, worker.NewTraceHandler(st, worker.TraceOptions{Roots: absRoots, Files: secf.files(absRoots)}),
		consumer.PullOptions{Name: "traces", Batch: 512, Logger: logger, Counters: metrics, DeadLetter: dead, Healthy: tracesOK.Store})
	if err != nil {
		return err
	}
	evalPull, err := consumer.NewPuller(evalCons, evalH,
		consumer.PullOptions{Name: "eval", Batch: 1, Heartbeat: worker.EvalAckWait / 3, Logger: logger, Counters: metrics, DeadLetter: dead, Healthy: evalOK.Store})
	if err != nil {
		return err
	}

	var g oklogrun.Group
	// Signals: a clean exit on SIGINT/SIGTERM.
	g.Add(oklogrun.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))

	// Instance lease renewal; losing it stops the worker.
	{
		lctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return lease.Run(lctx) }, func(error) { cancel() })
	}

	// Consumers. Each stops fetching, finishes its in-flight batch and
	// acks it before returning; they must stop before the connection
	// drains below.
	for _, p := range []*consumer.Puller{tracesPull, evalPull} {
		p := p
		cctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return p.Run(cctx) }, func(error) { cancel() })
	}

	// RAG asks.
	if askCorpus := serveAskCorpus(*corpus, *dataDir, logger); askCorpus != "" {
		pipe, err := rag.NewOffline(ctx, askCorpus, rag.Options{})
		if err != nil {
			return inputError(fmt.Errorf("--rag.corpus: %w", err))
		}
		asks := worker.NewAskServer(nc, subjects.RAGAsk, pipe, worker.AskOptions{Logger: logger, Replies: secf.replyPolicy(*subjects),
			Asked: func(ok bool) { metrics.Asks.WithLabelValues(map[bool]string{true: "ok", false: "error"}[ok]).Inc() }})
		actx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return asks.Run(actx) }, func(error) { cancel() })
	}

	// Tail.
	tailDone := make(chan struct{})
	if *tailPath != "" {
		abs, _ := filepath.Abs(*tailPath)
		sum := sha256.Sum256([]byte(abs))
		stateDir := filepath.Join(*dataDir, "tail")
		if err := os.MkdirAll(stateDir, 0o755); err != nil {
			return err
		}
		t, err := consumer.NewTailer(*tailPath, consumer.TailOptions{
			StatePath: filepath.Join(stateDir, hex.EncodeToString(sum[:8])+".offset"), FromStart: true, Once: *once,
			Logger: logger,
		})
		if err != nil {
			return inputError(fmt.Errorf("--tail: %w", err))
		}
		fw := worker.NewTailForwarder(t, js, *subjects, worker.ForwardOptions{Logger: logger,
			Counted: func(class string) { metrics.TailLines.WithLabelValues(class).Inc() }})
		tctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			defer close(tailDone)
			if err := fw.Run(tctx); err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("tail %s: %w", *tailPath, err)
			}
			if *once {
				<-tctx.Done() // drained; wait for the shutdown
			}
			return nil
		}, func(error) { cancel() })
	} else {
		close(tailDone)
	}

	// Health, readiness and metrics.
	if *httpAddr != "" {
		hs := &worker.HTTPServer{Addr: *httpAddr, Metrics: metrics, Ready: isReady,
			Report: reportHandler(st, 5*time.Second, logger)}
		addr, err := hs.Listen()
		if err != nil {
			return fmt.Errorf("--http %s: %w", *httpAddr, err)
		}
		logger.Info("http listening", "addr", addr)
		g.Add(hs.Serve, func(error) { hs.Shutdown() })
	}

	// Lag gauge, and with --once the drain watcher.
	{
		wctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			return watchLag(wctx, tracesCons, evalCons, metrics, *once, tailDone, logger)
		}, func(error) { cancel() })
	}

	// Inputs published at start. A corrupt segment published nothing; it
	// is named at the end and fails the command.
	var failedSegs []string
	if *replayDir != "" || len(evalFiles) > 0 {
		if failedSegs, err = publishInputs(ctx, js, *subjects, *replayDir, evalFiles, stderr, logger); err != nil {
			return err
		}
	}
	ready.Store(true)
	logger.Info("worker started", "instance", *instance, "events_subject", chain.Subject(), "db", *dbPath)

	err = g.Run()
	ready.Store(false)
	// Ordered shutdown: the actors above have stopped fetching and
	// finished in-flight work; flush the chain file, then drain the
	// connection and wait for it to close.
	if fileW != nil {
		if ferr := fileW.Sync(); ferr != nil {
			logger.Warn("flush events file", "err", ferr)
		}
	}
	if derr := nc.Drain(); derr == nil {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			logger.Warn("nats drain timed out")
		}
	}
	var sigErr oklogrun.SignalError
	if err != nil && !errors.As(err, &sigErr) && !errors.Is(err, errDrained) {
		return err
	}
	if *once {
		if err := printStoreReport(ctx, st, stdout); err != nil {
			return err
		}
	}
	if len(failedSegs) > 0 {
		for _, f := range failedSegs {
			fmt.Fprintf(stderr, "segment not ingested: %s\n", f)
		}
		return &exitError{code: exitFailure, err: fmt.Errorf("--replay %s: %d segment(s) failed and contributed nothing", *replayDir, len(failedSegs))}
	}
	return nil
}

// errDrained ends the run group when --once finds nothing left to do.
var errDrained = errors.New("inputs drained")

// watchLag updates the lag gauges every 500 ms; with once it returns
// errDrained when both consumers have nothing pending or unacked, twice in
// a row, and the tail has reached its end.
func watchLag(ctx context.Context, traces, eval jetstream.Consumer, m *worker.Metrics, once bool, tailDone <-chan struct{}, logger *slog.Logger) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		busy := false
		for name, c := range map[string]jetstream.Consumer{"traces": traces, "eval": eval} {
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
		select {
		case <-tailDone:
		default:
			busy = true
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

// publishInputs replays a segment directory and publishes eval-request
// files, blocking until JetStream has stored them.
func publishInputs(ctx context.Context, js jetstream.JetStream, s worker.Subjects, dir string, evalFiles []string, stderr io.Writer, logger *slog.Logger) (failedSegs []string, err error) {
	if dir != "" {
		st, err := replayWithProgress(ctx, js, s.Traces, dir, false, stderr)
		if err != nil {
			return nil, err
		}
		failedSegs = st.Failed
		logger.Info("replayed", "dir", dir, "segments", st.Segments, "rows", st.Rows, "new", st.New, "duplicates", st.Duplicates, "failed", len(st.Failed))
	}
	for _, f := range evalFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, inputError(fmt.Errorf("--eval-request: %w", err))
		}
		var req worker.EvalRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, inputError(fmt.Errorf("--eval-request %s: %w", f, err))
		}
		if req.RequestID == "" {
			return nil, inputError(fmt.Errorf("--eval-request %s: field request_id: missing", f))
		}
		if _, err := js.Publish(ctx, s.EvalRequests, raw, jetstream.WithMsgID("eval:"+req.RequestID)); err != nil {
			return nil, fmt.Errorf("publish eval request %s: %w", f, err)
		}
	}
	return failedSegs, nil
}

func replayWithProgress(ctx context.Context, js jetstream.JetStream, subject, dir string, strict bool, stderr io.Writer) (worker.ReplayStats, error) {
	var progress func(int)
	if isTerminal(stderr) {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("replay rows"),
			progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond))
		defer bar.Finish()
		last := 0
		progress = func(n int) { _ = bar.Add(n - last); last = n }
	}
	return worker.Replay(ctx, js, subject, dir, worker.ReplayOptions{Strict: strict, Progress: progress})
}

func printEvalResult(w io.Writer, req worker.EvalRequest, res grading.Result) {
	mean := "unmeasured"
	if res.Run.MeanScore != nil {
		mean = fmt.Sprintf("%.3f", *res.Run.MeanScore)
	}
	fmt.Fprintf(w, "eval %s: run %s model %s: %d cases, %d graded, mean %s, %d events\n",
		req.RequestID, res.Run.ID, res.Run.Model, res.Run.Cases, res.Run.GradedN, mean, res.EventsWritten)
	if res.Drift != nil {
		fmt.Fprintf(w, "  drift vs %s: %s (delta %+.3f)\n", res.Drift.BaselineID, res.Drift.Verdict, res.Drift.Delta)
	}
}

// printStoreReport prints the cost-per-outcome report of every trace call
// the worker has stored.
func printStoreReport(ctx context.Context, st *store.Store, w io.Writer) error {
	r, err := outcome.NewReducer(outcome.Options{})
	if err != nil {
		return err
	}
	if err := st.EachCall(ctx, func(c calls.Call) error { r.Add(c); return nil }); err != nil {
		return err
	}
	rep, err := r.CheckedReport()
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "cost per outcome of the traces consumed:")
	return rep.WriteTable(w)
}

// cmdReplay publishes a Parquet directory to the traces subject.
func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", "DIR", "Publish every row of a TokenFuse Parquet segment directory to the traces subject, in segment\n"+
		"order, idempotently (each row carries a message id derived from the segment digest and row).", stderr)
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", "NATS server URL (default: the embedded server of a local verdryx serve)")
	strict := fs.Bool("strict", false, "stop at the first corrupt segment")
	subjects := addSubjectFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("replay: want exactly one directory")
	}
	nc, err := nf.connect(*nf.url, "verdryx-replay")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, _, err := worker.EnsureStreams(ctx, js, *subjects, 0); err != nil {
		return err
	}
	st, err := replayWithProgress(ctx, js, subjects.Traces, pos[0], *strict, stderr)
	if err != nil {
		return inputError(err)
	}
	fmt.Fprintf(stdout, "replayed %d rows from %d segments of %s to %s: %d new, %d already stored (%d other files ignored, %d segments failed)\n",
		st.Rows, st.Segments, pos[0], subjects.Traces, st.New, st.Duplicates, st.Ignored, len(st.Failed))
	for _, f := range st.Failed {
		fmt.Fprintf(stdout, "  failed: %s\n", f)
	}
	if len(st.Failed) > 0 {
		return failed()
	}
	return nil
}
