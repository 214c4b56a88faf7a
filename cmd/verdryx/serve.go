package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/outcome"
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

// clientOptions returns the credentials and TLS options of the flags.
func (n natsFlags) clientOptions() ([]nats.Option, error) {
	if err := checkTLSPair(*n.tlsCert, *n.tlsKey); err != nil {
		return nil, err
	}
	var opts []nats.Option
	if *n.creds != "" {
		opts = append(opts, nats.UserCredentials(*n.creds))
	}
	if *n.tlsCA != "" {
		opts = append(opts, nats.RootCAs(*n.tlsCA))
	}
	if *n.tlsCert != "" || *n.tlsKey != "" {
		opts = append(opts, nats.ClientCert(*n.tlsCert, *n.tlsKey))
	}
	return opts, nil
}

func (n natsFlags) connect(url, name string, extra ...nats.Option) (*nats.Conn, error) {
	client, err := n.clientOptions()
	if err != nil {
		return nil, err
	}
	opts := append(append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, extra...), client...)
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
	fs.IntVar(&s.Partitions, "partitions", s.Partitions, "trace partitions: records go to <subject.traces>.<FNV-1a(run_id) mod N>; every worker and publisher must agree")
	fs.IntVar(&s.Replicas, "replicas", s.Replicas, "replicas of the streams and buckets created (3 on a three-node cluster; 0 means 1)")
	return &s
}

func defaultDataDir() string { return envOr("VERDRYX_DATA", ".verdryx") }

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// serveFlags are the flags of `verdryx serve`.
type serveFlags struct {
	data, listen, db, events, instance, http, otlp, tail, replay, corpus *string
	once, verbose                                                        *bool
	pinnedTTL, snapshotEvery                                             *time.Duration
	evalFiles, roots                                                     multiFlag
	nats                                                                 natsFlags
	subjects                                                             *worker.Subjects
	sec                                                                  *securityFlags
}

func addServeFlags(fs *flag.FlagSet) *serveFlags {
	f := &serveFlags{}
	f.data = fs.String("data", defaultDataDir(), "data directory: embedded NATS store, SQLite store, tail offsets ($VERDRYX_DATA)")
	f.nats = addNATSFlags(fs, "", "NATS server URL; empty starts the embedded server ($VERDRYX_NATS_URL)")
	f.listen = fs.String("nats.listen", "127.0.0.1:4222", "embedded server listen address (port 0 picks a free port)")
	f.db = fs.String("db", envOr("VERDRYX_DB", ""), "SQLite store (default <data>/verdryx.db; $VERDRYX_DB)")
	f.events = fs.String("events", envOr("VERDRYX_EVENTS_PATH", ""), "also append envelopes to this chained NDJSON file ($VERDRYX_EVENTS_PATH)")
	f.instance = fs.String("instance", "", "instance name for this worker's event chain subject (default <host>-<hash of data dir>)")
	f.http = fs.String("http", "127.0.0.1:9464", "loopback address for /healthz, /readyz, /metrics and /report; empty disables")
	f.otlp = fs.String("otlp", envOr("VERDRYX_OTLP_ENDPOINT", ""), "OTLP/HTTP collector base URL ($VERDRYX_OTLP_ENDPOINT)")
	f.tail = fs.String("tail", "", "follow this NDJSON file (envelopes are chain-checked and forwarded; records feed the traces)")
	f.replay = fs.String("replay", "", "publish this Parquet segment directory to the traces subject at start")
	fs.Var(&f.evalFiles, "eval-request", "publish this eval-request JSON file at start (repeatable)")
	f.corpus = fs.String("rag.corpus", "", "corpus answering RAG asks with the offline pipeline (default: the corpus the active index generation under <data>/index recorded; without one, asks are disabled)")
	fs.Var(&f.roots, "root", "directory eval-set and segment paths in messages may resolve under (repeatable; default <data>/eval)")
	f.once = fs.Bool("once", false, "exit when the inputs are drained: every consumer has nothing pending and the tail reached its end")
	f.verbose = fs.Bool("v", false, "debug logging")
	f.pinnedTTL = fs.Duration("pinned-ttl", worker.DefaultPinnedTTL, "a trace partition whose owner stopped pulling moves to another worker after this long")
	f.snapshotEvery = fs.Duration("snapshot-every", worker.DefaultSnapshotEvery, "at most this often a partition owner writes its snapshot; acks wait for it")
	f.subjects = addSubjectFlags(fs)
	f.sec = addSecurityFlags(fs)
	return f
}

// options maps the flags to the worker's options.
func (f *serveFlags) options(logger *slog.Logger, stdout, stderr io.Writer) (worker.Options, error) {
	client, err := f.nats.clientOptions()
	if err != nil {
		return worker.Options{}, err
	}
	return worker.Options{
		DataDir: *f.data, NATSURL: *f.nats.url, Listen: *f.listen, Security: f.sec.sec,
		NATSOptions: append(f.sec.clientAuth(), client...),
		DBPath:      *f.db, EventsPath: *f.events, Instance: *f.instance, HTTPAddr: *f.http, OTLPEndpoint: *f.otlp,
		TailPath: *f.tail, ReplayDir: *f.replay, EvalRequestFiles: f.evalFiles, RAGCorpus: *f.corpus, Roots: f.roots,
		Once: *f.once, Subjects: *f.subjects, Version: version, Logger: logger,
		Files:   f.sec.files,
		Replies: f.sec.replyPolicy(*f.subjects),
		Report: func(st *store.Store, traces func(context.Context) (*worker.Aggregate, error)) http.Handler {
			return reportHandler(st, traces, 5*time.Second, logger)
		},
		OnResult: func(req worker.EvalRequest, res grading.Result) { printEvalResult(stdout, req, res) },
		Replay: func(ctx context.Context, js jetstream.JetStream, s worker.Subjects, dir string) (worker.ReplayStats, error) {
			return replayWithProgress(ctx, js, s, dir, false, stderr)
		},
		PinnedTTL: *f.pinnedTTL, SnapshotEvery: *f.snapshotEvery,
		Drained: func(ctx context.Context, st *store.Store) error { return printStoreReport(ctx, st, stdout) },
	}, nil
}

// cmdServe runs the worker. See the README section "The worker".
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "", "Run the worker: consume trace records, eval requests and RAG asks from NATS JetStream, optionally\n"+
		"replay a Parquet directory and tail an NDJSON file, and publish hash-chained envelopes and spans.\n"+
		"With no --nats an embedded NATS server with JetStream runs in-process, storing under --data.", stderr)
	f := addServeFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("serve: unexpected argument %q", pos[0])
	}
	level := slog.LevelInfo
	if *f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(redact.FromEnv(nil, f.sec.sec.Password, f.sec.sec.Token).Handler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if err := f.sec.check(*f.nats.url == "", *f.listen, *f.http, logger); err != nil {
		return err
	}
	opts, err := f.options(logger, stdout, stderr)
	if err != nil {
		return err
	}
	w, err := worker.New(opts)
	if err == nil {
		err = w.Run(ctx)
	}
	var failed *worker.ReplayFailedError
	switch {
	case errors.As(err, &failed):
		for _, s := range failed.Segments {
			fmt.Fprintf(stderr, "segment not ingested: %s\n", s)
		}
		return &exitError{code: exitFailure, err: err}
	case errors.Is(err, worker.ErrInput):
		return inputError(err)
	}
	return err
}

func replayWithProgress(ctx context.Context, js jetstream.JetStream, s worker.Subjects, dir string, strict bool, stderr io.Writer) (worker.ReplayStats, error) {
	var progress func(int)
	if isTerminal(stderr) {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("replay rows"),
			progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond))
		defer bar.Finish()
		last := 0
		progress = func(n int) { _ = bar.Add(n - last); last = n }
	}
	return worker.Replay(ctx, js, s.Traces, dir, worker.ReplayOptions{Strict: strict, Progress: progress, Partitions: s.Partitions})
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

// printStoreReport prints the cost-per-outcome report of the trace
// partitions in the worker's store (the whole fleet's for a single worker).
func printStoreReport(ctx context.Context, st *store.Store, w io.Writer) error {
	agg, err := worker.LocalAggregate(ctx, st)
	if err != nil {
		return err
	}
	r, err := agg.Reducer(outcome.Options{})
	if err != nil {
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
	st, err := replayWithProgress(ctx, js, *subjects, pos[0], *strict, stderr)
	if err != nil {
		return inputError(err)
	}
	fmt.Fprintf(stdout, "replayed %d rows from %d segments of %s to %s.<0..%d>: %d new, %d already stored (%d other files ignored, %d segments failed)\n",
		st.Rows, st.Segments, pos[0], subjects.Traces, max(subjects.Partitions, 1)-1, st.New, st.Duplicates, st.Ignored, len(st.Failed))
	for _, f := range st.Failed {
		fmt.Fprintf(stdout, "  failed: %s\n", f)
	}
	if len(st.Failed) > 0 {
		return failed()
	}
	return nil
}
