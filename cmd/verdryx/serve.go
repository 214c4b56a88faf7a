package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/lease"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/window"
	"github.com/verdryx/verdryx/provider/openai"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/redact"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/worker"
)

// natsFlags are the connection flags shared by serve, replay and bench.
type natsFlags struct {
	url, creds, tlsCA, tlsCert, tlsKey *string
}

func addNATSFlags(fs *pflag.FlagSet, def string, help string) natsFlags {
	return natsFlags{
		url:     fs.String("nats", envFirst(def, "NATS_URL", "VERDRYX_NATS_URL"), help),
		creds:   fs.String("nats-creds", envFirst("", "NATS_CREDS", "VERDRYX_NATS_CREDS"), "NATS credentials file ($NATS_CREDS, $VERDRYX_NATS_CREDS)"),
		tlsCA:   fs.String("nats-tls-ca", envOr("VERDRYX_NATS_TLS_CA", ""), "CA certificate file for TLS to NATS ($VERDRYX_NATS_TLS_CA)"),
		tlsCert: fs.String("nats-tls-cert", envOr("VERDRYX_NATS_TLS_CERT", ""), "client certificate file for TLS to NATS ($VERDRYX_NATS_TLS_CERT)"),
		tlsKey:  fs.String("nats-tls-key", envOr("VERDRYX_NATS_TLS_KEY", ""), "client key file for TLS to NATS ($VERDRYX_NATS_TLS_KEY)"),
	}
}

// clientOptions returns the credentials and TLS options of the flags. A
// named file that cannot be read is an input error (exit 2) naming its
// flag, before any connection is tried.
func (n natsFlags) clientOptions() ([]nats.Option, error) {
	if err := checkTLSPair(*n.tlsCert, *n.tlsKey); err != nil {
		return nil, inputError(err)
	}
	for _, f := range []struct{ name, path string }{
		{"--nats-creds ($NATS_CREDS, $VERDRYX_NATS_CREDS)", *n.creds},
		{"--nats-tls-ca ($VERDRYX_NATS_TLS_CA)", *n.tlsCA},
		{"--nats-tls-cert ($VERDRYX_NATS_TLS_CERT)", *n.tlsCert},
		{"--nats-tls-key ($VERDRYX_NATS_TLS_KEY)", *n.tlsKey},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, usageErrorf("%s: %v", f.name, err)
		}
		fh.Close()
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
		return nil, serviceError(fmt.Errorf("connect to NATS at %s: %w (start one with verdryx serve, whose embedded server listens on 127.0.0.1:4222, or point --nats or $NATS_URL at a running server)", redact.URL(url), err))
	}
	return nc, nil
}

func addSubjectFlags(fs *pflag.FlagSet) *streams.Subjects {
	s := streams.DefaultSubjects()
	fs.StringVar(&s.Traces, "subject-traces", s.Traces, "subject of trace messages: per-call records and row batches")
	fs.StringVar(&s.EvalRequests, "subject-eval", s.EvalRequests, "subject of eval requests")
	fs.StringVar(&s.RAGAsk, "subject-ask", s.RAGAsk, "subject of RAG asks (core request/reply)")
	fs.StringVar(&s.Events, "subject-events", s.Events, "prefix of the events subject; each instance publishes on <prefix>.<instance>")
	fs.StringVar(&s.Tail, "subject-tail", s.Tail, "subject tailed envelopes are forwarded to")
	fs.StringVar(&s.DeadLetter, "subject-deadletter", s.DeadLetter, "dead-letter subject")
	fs.IntVar(&s.Partitions, "partitions", s.Partitions, "trace partitions: records go to <subject-traces>.<FNV-1a(run_id) mod N>; every worker and publisher must agree")
	fs.IntVar(&s.Replicas, "replicas", max(s.Replicas, 1), "replicas of the streams and buckets created, 1 to 5 (3 on a three-node cluster)")
	return &s
}

// serveFlags are the flags of `verdryx serve`.
type serveFlags struct {
	listen, db, events, instance, http, otlp, tail, replay, corpus *string
	once, allowEmpty                                               *bool
	follow                                                         *bool
	settle, sloEvery, sloWindow                                    *time.Duration
	hugePages, hoursKept                                           *string
	evalFiles, roots                                               []string
	log                                                            *logFlags
	nats                                                           natsFlags
	subjects                                                       *streams.Subjects
	sec                                                            *securityFlags
	pinnedTTL, snapshotEvery, startTimeout, foldAfter              *time.Duration
	publishRetryFor                                                *time.Duration
	maxRecord                                                      *int
	typed                                                          typedFlags
	models                                                         *modelFlags
	allowModels                                                    []string
	generator, genModel, prices                                    *string
	asJSON                                                         *bool
	maxCost                                                        *float64
	catchUpWait                                                    *time.Duration
}

func addServeFlags(fs *pflag.FlagSet) *serveFlags {
	f, d := &serveFlags{}, worker.Defaults()
	f.nats = addNATSFlags(fs, "", "NATS server URL; empty starts the embedded server ($NATS_URL, $VERDRYX_NATS_URL)")
	f.listen = fs.String("nats-listen", d.Listen, "embedded server listen address (port 0 picks a free port)")
	f.db = fs.String("db", envOr("VERDRYX_DB", ""), "SQLite store (default <data>/verdryx.db; $VERDRYX_DB)")
	f.events = fs.String("events", envOr("VERDRYX_EVENTS_PATH", ""), "also append envelopes to this chained NDJSON file ($VERDRYX_EVENTS_PATH)")
	f.instance = fs.String("instance", "", "instance name for this worker's event chain subject (default <host>-<hash of data dir>)")
	f.http = fs.String("http", d.HTTPAddr, "loopback address for /healthz, /readyz, /metrics and /report; empty disables")
	f.otlp = addOTLPFlag(fs)
	f.tail = fs.String("tail", "", "follow this NDJSON file (envelopes are chain-checked and forwarded; records feed the traces)")
	f.replay = fs.String("replay", "", "publish this Parquet segment directory to the traces subject at start")
	fs.StringArrayVar(&f.evalFiles, "eval-request", nil, "publish this eval-request JSON file at start (repeatable)")
	f.corpus = fs.String("rag-corpus", "", "corpus answering RAG asks, embedded in memory by the offline embedder (default: the active index generation under <data>/index, with the embedder that built it and its stored vectors, followed as index build activates others; without one, asks wait for one)")
	f.models = addModelFlags(fs, "timeout per model, judge, embedding or generation call (never retried)")
	fs.StringArrayVar(&f.allowModels, "allow-model", nil, "a model id eval requests may name as model or judge, e.g. openai:gpt-4o-mini (repeatable; stub is always allowed; keys from the environment or the key files)")
	f.generator = fs.String("generator", "offline", "generator answering RAG asks: offline (extractive, no network) or openai (paid, opt-in; --gen-model)")
	f.genModel = fs.String("gen-model", defaultGenModel, "chat model for --generator openai")
	f.prices = fs.String("prices", envOr("VERDRYX_PRICES", ""), "JSON prices file ({\"<model id>\": {\"input_usd_per_mtok\": N, \"output_usd_per_mtok\": N}}) over the built-in book, for eval requests ($VERDRYX_PRICES)")
	f.catchUpWait = fs.Duration("catch-up-wait", d.CatchUpWait, "how long an eval request's drift check waits for this worker's store to apply the fleet's quality log before it answers with what the store has (the reply says so)")
	f.maxCost = fs.Float64("max-cost-usd", 0, "bound on each eval request's priced spend in US dollars: a request asking a higher max_cost_usd, or none, runs under this one (0: no bound; every allowed model and the judge must then have a price)")
	f.asJSON = fs.Bool("json", false, "print each eval result as the JSON object eval --json prints (and the replay counts and the cost report as JSON)")
	fs.StringArrayVar(&f.roots, "root", nil, "directory eval-set paths in eval requests may resolve under (repeatable; default <data>/eval)")
	f.allowEmpty = fs.Bool("allow-empty", false, "go on when --replay holds no segments (default: exit 2 saying it is empty)")
	f.follow = fs.Bool("follow", false, "keep following the --replay directory: publish each segment once as the gateway completes it")
	f.settle = fs.Duration("settle", d.Settle, "with --follow: report a segment once when it stays incomplete this long without growing")
	f.sloEvery = fs.Duration("slo-every", d.SLOEvery, "evaluate the SLOs over the fleet's merged state this often (gauges on /metrics, slo_burn events on the chain); 0 turns it off")
	f.sloWindow = new(time.Duration)
	daysVar(fs, f.sloWindow, "slo-window", d.SLOWindow, "the SLOs' window: the calls of this long (24h, 60d, 2w) before now, from the start of its first day (UTC)")
	f.once = fs.Bool("once", false, "exit when the inputs are drained: every consumer has nothing pending and the tail reached its end")
	f.hugePages = fs.String("huge-pages", "auto", "hint the heap onto transparent huge pages (fewer page faults while a large replay grows it): on, off, or auto (on with --once only: in a process that runs for days the kernel can keep sparsely used huge pages resident)")
	f.log = addLogFlags(fs, "info")
	f.pinnedTTL = fs.Duration("pinned-ttl", d.PinnedTTL, "a trace partition whose owner stopped pulling moves to another worker after this long")
	f.publishRetryFor = fs.Duration("publish-retry-for", d.PublishRetryFor, "how long a write whose stream or KV bucket has no leader (an election) is retried with backoff: replayed, followed and tailed publishes (then exit 3), eval claims, ledger, events and dead letters (then the attempt is redelivered); readiness says 503 meanwhile")
	f.startTimeout = fs.Duration("start-timeout", d.StartTimeout, "how long start-up waits and retries while NATS or a JetStream quorum is away (a node down): readiness says 503 meanwhile; then exit 3")
	f.maxRecord = fs.Int("max-record-bytes", d.MaxRecordBytes, "trace records larger than this are dead-lettered, not counted (-1: no limit)")
	f.snapshotEvery = fs.Duration("snapshot-every", d.SnapshotEvery, "the longest a partition owner waits between snapshots while records arrive (a cheap snapshot is written more often, down to a twentieth of this); acks wait for it")
	f.hoursKept = fs.String("hours-kept", strconv.Itoa(int(d.HoursKept.Hours()))+"h", "calls stamped at most this long before the worker's clock when they arrive are kept by the hour, so reports over --nats can start and end on any hour of their days; older calls (a replay of older traces, stragglers) by the day, a state per run and day instead of per run and hour, and a window cannot cut their day: a duration (36h, 7d), retention (the --retention) or off (every call by the day)")
	f.foldAfter = fs.Duration("fold-after", d.FoldAfter, "a day of trace state leaves memory (folded into a day table in the KV bucket) once a partition's newest call is this far past the day's end; later calls of the day correct its table")
	f.subjects = addSubjectFlags(fs)
	daysVar(fs, &f.subjects.Retention, "retention", streams.DefaultRetention,
		"the longest (168h, 7d, 2w) the traces and eval-request streams keep a message (the events and dead-letter streams 4x as long); applied to existing streams at start; at least --duplicate-window")
	fs.DurationVar(&f.subjects.DuplicateWindow, "duplicate-window", streams.DuplicateWindow,
		"how long the traces, eval and events streams drop a message whose Nats-Msg-Id they already hold (a re-replay later than this is deduplicated by the workers' state instead)")
	fs.DurationVar(&f.subjects.QualityRetention, "quality-retention", 0,
		"the longest the fleet's quality log (every run and baseline) keeps a record; 0 keeps every record (a new log) or leaves an existing log's limit; a store keeps what it applied whatever the log prunes, but a store started later misses what was pruned")
	fs.Int64Var(&f.subjects.RetentionBytes, "retention-bytes", 0,
		"backstop: the most bytes each stream keeps, the oldest messages dropped first; the server reserves it per stream, so four streams must fit its storage (0 leaves the streams' byte limits as they are)")
	f.sec = addSecurityFlags(fs)
	f.typed = addTypedFlags(fs)
	return f
}

// checkInputs refuses missing, empty or malformed inputs and unusable
// addresses before anything starts (exit 2), naming the flag.
func (f *serveFlags) checkInputs() error {
	if *f.replay != "" {
		if err := checkTraceDir("--replay", *f.replay, *f.allowEmpty || *f.follow); err != nil {
			return err
		}
	}
	// One flag's range is checked at parse (ranges.go); these hold two.
	if r := f.subjects.Retention; r < f.subjects.DuplicateWindow {
		return usageErrorf("--retention %s: at least --duplicate-window, %s", r, f.subjects.DuplicateWindow)
	}
	if q := f.subjects.QualityRetention; q > 0 && q < f.subjects.DuplicateWindow {
		return usageErrorf("--quality-retention %s: 0 (keep every record) or at least --duplicate-window, %s", q, f.subjects.DuplicateWindow)
	}
	if *f.tail != "" && *f.once {
		if _, err := os.Stat(*f.tail); err != nil {
			return inputError(fmt.Errorf("--tail (with --once): %w", err))
		}
	}
	if *f.db != "" {
		if dir := filepath.Dir(*f.db); !dirExists(dir) {
			return usageErrorf("--db %s: directory %s does not exist (create it, or give a --db in an existing directory)", *f.db, dir)
		}
	}
	if *f.http != "" {
		if err := checkListen("--http", *f.http); err != nil {
			return err
		}
	}
	if *f.nats.url == "" && *f.listen != "" {
		if err := checkListen("--nats-listen", *f.listen); err != nil {
			return err
		}
	}
	return nil
}

// checkTraceDir refuses a trace directory that is missing, not a
// directory, or (unless allowEmpty) holds no TokenFuse segments.
func checkTraceDir(flag, dir string, allowEmpty bool) error {
	st, err := os.Stat(dir)
	if err != nil {
		return inputError(fmt.Errorf("%s: %w", flag, err))
	}
	if !st.IsDir() {
		return usageErrorf("%s %s: not a directory", flag, dir)
	}
	segs, _, err := segment.List(dir)
	if err != nil {
		return inputError(fmt.Errorf("%s: %w", flag, err))
	}
	if len(segs) == 0 && !allowEmpty {
		return usageErrorf("%s %s holds no TokenFuse segments (give --allow-empty to go on anyway)", flag, dir)
	}
	return nil
}

func dirExists(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

// checkListen refuses an address another process already listens on, so
// a busy port is named at once instead of after a start-up timeout.
func checkListen(flag, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageErrorf("%s %s: %v (pick another address with %s; port 0 picks a free one)", flag, addr, err, flag)
	}
	return ln.Close()
}

// options maps the flags to the worker's options; typed is the typed
// grader of --typed-url (nil: eval requests with typed cases are refused).
func (f *serveFlags) options(data string, logger *slog.Logger, typed *grading.Typed) (worker.Options, error) {
	client, err := f.nats.clientOptions()
	if err != nil {
		return worker.Options{}, err
	}
	var hoursKept time.Duration
	switch *f.hoursKept {
	case "retention":
		hoursKept = f.subjects.Retention
	case "off":
		hoursKept = -1
	case "":
		return worker.Options{}, usageErrorf("--hours-kept is empty: want a duration (36h, 7d), retention or off")
	default:
		d, err := window.Last("--hours-kept", *f.hoursKept)
		if err != nil {
			return worker.Options{}, usageErrorf("%v, retention or off", err)
		}
		hoursKept = d
	}
	var hugePages bool
	switch *f.hugePages {
	case "auto":
		hugePages = *f.once
	case "on", "off":
		hugePages = *f.hugePages == "on"
	default:
		return worker.Options{}, usageErrorf("--huge-pages %q: want on, off or auto", *f.hugePages)
	}
	o := worker.Options{
		DataDir: data, NATSURL: *f.nats.url, Listen: *f.listen, Security: f.sec.sec, HTTPPublic: f.sec.httpPublic,
		NATSOptions: append(f.sec.clientAuth(), client...),
		DBPath:      *f.db, EventsPath: *f.events, Instance: *f.instance, HTTPAddr: *f.http, OTLPEndpoint: *f.otlp,
		TailPath: *f.tail, ReplayDir: *f.replay, Follow: *f.follow, Settle: *f.settle, SLOEvery: sloEvery(*f.sloEvery), SLOWindow: *f.sloWindow, EvalRequestFiles: f.evalFiles, RAGCorpus: *f.corpus, Roots: f.roots,
		Once: *f.once, HugePages: hugePages, Subjects: *f.subjects, Version: version(), Logger: logger, Typed: typed,
		FilesMaxBytes: f.sec.maxBytes, FilesTimeout: f.sec.fileTimeout,
		Replies:   f.sec.replyPolicy(*f.subjects),
		PinnedTTL: *f.pinnedTTL, SnapshotEvery: *f.snapshotEvery, FoldAfter: *f.foldAfter, HoursKept: hoursKept, StartTimeout: *f.startTimeout, PublishRetryFor: *f.publishRetryFor, MaxRecordBytes: *f.maxRecord,
	}
	if err := f.modelOptions(&o); err != nil {
		return worker.Options{}, err
	}
	return o, nil
}

// modelOptions sets o's models, judge, providers, ask generator, prices and
// spending bound from the model flags; bad flags or files are input errors.
func (f *serveFlags) modelOptions(o *worker.Options) error {
	if err := f.models.check(); err != nil {
		return err
	}
	models, getenv, err := f.models.modelsOptions()
	if err != nil {
		return err
	}
	providers := rag.Providers{OpenAIBaseURL: *f.models.openaiBase, OpenAIKey: openai.KeyFromEnv(getenv), Timeout: *f.models.timeout}
	gen, err := newGenerator(*f.generator, *f.genModel, providers)
	if err != nil {
		return inputError(err)
	}
	var prices llm.PriceBook
	if *f.prices != "" {
		if prices, err = llm.LoadPrices(*f.prices, llm.DefaultPriceBook()); err != nil {
			return inputError(fmt.Errorf("--prices ($VERDRYX_PRICES): %w", err))
		}
	}
	o.Models, o.AllowModels, o.Judge, o.Providers, o.Generator = models, f.allowModels, *f.models.judge, providers, gen
	o.Prices, o.MaxCostUSD = prices, *f.maxCost
	o.CatchUpWait = *f.catchUpWait
	return nil
}

// newServeCmd makes the serve command, which runs the worker (docs/worker.md).
func newServeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the worker: NATS consumers, replay, tail and producers",
		Long: "Run the worker: consume trace records, eval requests and RAG asks from NATS JetStream, optionally\n" +
			"replay a Parquet directory and tail an NDJSON file, and publish hash-chained envelopes and spans.\n" +
			"With no --nats an embedded NATS server with JetStream runs in-process, storing under --data.",
	}
	fs := cmd.Flags()
	f := addServeFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, pos []string) (err error) {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) > 0 {
			return usageErrorf("serve: unexpected argument %q", pos[0])
		}
		typed, keyRedactor, err := f.typed.build()
		if err != nil {
			return err
		}
		names := serveOptionFlags()
		redactLog := redact.FromEnv(nil, f.sec.sec.Password, f.sec.sec.Token).Handler
		wrapLog := func(h slog.Handler) slog.Handler { return flagNamesHandler{redactLog(h), names} }
		if keyRedactor != nil {
			// The typryx key never leaves the process: not in output, logs
			// or errors.
			stdout, stderr = keyRedactor.Writer(stdout), keyRedactor.Writer(stderr)
			envLog := wrapLog
			wrapLog = func(h slog.Handler) slog.Handler { return keyRedactor.Handler(envLog(h)) }
			defer func() { err = keyRedactor.Error(err) }()
		}
		logger, err := f.log.logger(stderr, wrapLog)
		if err != nil {
			return err
		}
		if err := checkNATSURL(*f.nats.url); err != nil {
			return err
		}
		if err := checkURL(otlpFlagName, *f.otlp, "http", "https"); err != nil {
			return err
		}
		if err := f.checkInputs(); err != nil {
			return err
		}
		if err := f.sec.check(*f.nats.url == "", *f.listen, *f.http, logger); err != nil {
			return err
		}
		opts, err := f.options(g.data, logger, typed)
		if err != nil {
			return err
		}
		w, err := worker.New(opts)
		if err == nil {
			err = runPrinting(ctx, w, *f.asJSON, stdout, stderr)
		}
		return serveExit(withFlagNames(names, err), stderr)
	}
	groupFlags(cmd, serveFlagGroups())
	return cmd
}

// serveExit is the exit of serve's error err: 1 when replayed segments
// failed (each named on stderr), 2 for bad input, 3 when NATS or another
// service failed.
func serveExit(err error, stderr io.Writer) error {
	var failed *worker.ReplayFailedError
	switch {
	case errors.As(err, &failed):
		for _, s := range failed.Segments {
			fmt.Fprintf(stderr, "segment not ingested: %s\n", s)
		}
		return &exitError{code: exitFailure, err: err}
	case errors.Is(err, worker.ErrInput), errors.Is(err, lease.ErrInstanceInUse):
		return inputError(err)
	case errors.Is(err, worker.ErrService):
		return serviceError(err)
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrTimeout):
		return serviceError(fmt.Errorf("%w (is the server at --nats / $NATS_URL running?)", err))
	}
	return err
}

// serveFlagGroups are the flags serve --help shows: what a first
// deployment sets. Everything else (tuning, subjects, security of the
// embedded server, benchmarks' knobs) is in --help-all and a --config file.
func serveFlagGroups() []flagGroup {
	return []flagGroup{
		{"Inputs", []string{"replay", "follow", "eval-request", "tail", "root", "once"}},
		{"NATS", []string{"nats", "nats-creds", "partitions", "replicas"}},
		{"Outputs", []string{"data", "db", "events", "http", "otlp", "instance"}},
		{"Models", []string{"allow-model", "judge", "openai-key-file", "anthropic-key-file", "prices", "max-cost-usd"}},
	}
}

// replayProgress is the progress callback of a replay: with show, a bar
// of the rows acknowledged on a terminal stderr (call done when the
// replay returns); nil otherwise.
func replayProgress(stderr io.Writer, show bool) (progress func(int), done func()) {
	if !show || !isTerminal(stderr) {
		return nil, func() {}
	}
	bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("replay rows"),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond))
	last := 0
	return func(n int) { _ = bar.Add(n - last); last = n }, func() { _ = bar.Finish() }
}

// sloEvery maps --slo-every to worker.Options.SLOEvery: 0 (off) is
// negative there.
func sloEvery(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// runPrinting runs w until it returns, printing what it reports: the
// replay's progress bar (on a terminal stderr) and what it published,
// each eval result, and, at the end of a --once run, the trace report.
func runPrinting(ctx context.Context, w *worker.Worker, asJSON bool, stdout, stderr io.Writer) error {
	outs := w.Outputs()
	printed := make(chan error, 1)
	go func() {
		var err error
		var bar *progressbar.ProgressBar
		o := w.Options()
		for out := range outs {
			switch {
			case out.ReplayRows > 0 && isTerminal(stderr):
				if bar == nil {
					bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("replay rows"),
						progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond))
				}
				_ = bar.Set(out.ReplayRows)
			case out.Replay != nil:
				if bar != nil {
					_ = bar.Finish()
				}
				if asJSON {
					err = errors.Join(err, writeJSON(stdout, newReplayJSON(*out.Replay, o.ReplayDir, o.Subjects)))
				} else {
					printReplayStats(stdout, *out.Replay, o.ReplayDir, o.Subjects)
				}
			case out.Eval != nil:
				printEvalResult(stdout, out.Eval.Request, out.Eval.Result, out.Eval.Earlier, asJSON)
			case out.Traces != nil:
				err = errors.Join(err, printTraceReport(out.Traces, stdout, asJSON))
			}
		}
		printed <- err
	}()
	err := w.Run(ctx)
	return errors.Join(err, <-printed)
}

// replayJSON is replay's --json output.
type replayJSON struct {
	Dir        string   `json:"dir"`
	Subject    string   `json:"subject"`
	Partitions int      `json:"partitions"`
	Segments   int      `json:"segments"`
	Rows       int      `json:"rows"`
	New        int      `json:"new"`
	Duplicates int      `json:"duplicates"`
	Ignored    int      `json:"ignored"`
	Failed     []string `json:"failed"`
}

// newReplayJSON is the replayJSON of a replay of dir.
func newReplayJSON(st segpub.Stats, dir string, s streams.Subjects) replayJSON {
	return replayJSON{Dir: dir, Subject: s.Traces, Partitions: max(s.Partitions, 1), Segments: st.Segments, Rows: st.Rows, New: st.New,
		Duplicates: st.Duplicates, Ignored: st.Ignored, Failed: append([]string{}, st.Failed...)}
}

// printPublished prints a line on w for each segment a follower
// published.
func printPublished(w io.Writer) func(string, segpub.Stats) {
	return func(path string, st segpub.Stats) {
		fmt.Fprintf(w, "published %s: %d rows, %d new, %d already stored\n", filepath.Base(path), st.Rows, st.New, st.Duplicates)
	}
}

// printReplayStats prints what a replay published: new rows against rows
// JetStream dropped as already stored (PubAck.Duplicate).
func printReplayStats(w io.Writer, st segpub.Stats, dir string, s streams.Subjects) {
	fmt.Fprintf(w, "replayed %d rows from %d segments of %s to %s.<0..%d>: %d new, %d already stored (%d other files ignored, %d segments failed)\n",
		st.Rows, st.Segments, dir, s.Traces, max(s.Partitions, 1)-1, st.New, st.Duplicates, st.Ignored, len(st.Failed))
	for _, f := range st.Failed {
		fmt.Fprintf(w, "  failed: %s\n", f)
	}
}

// printEvalResult prints the line of one eval request's result; stored
// says it was done before this run and is answered from the store. With
// asJSON it prints the result as the object eval --json prints instead.
func printEvalResult(w io.Writer, req evalreq.Request, res evalrun.Result, stored, asJSON bool) {
	if asJSON {
		_ = writeJSON(w, res) // stdout: nothing to do about a failed write
		return
	}
	mean := "unmeasured"
	if res.Run.MeanScore != nil {
		mean = fmt.Sprintf("%.3f", *res.Run.MeanScore)
	}
	// A stored result predates its events: their count is not in it.
	tail := fmt.Sprintf("%d events", res.EventsWritten)
	if stored {
		tail = "already done: answered from the store"
	}
	fmt.Fprintf(w, "eval %s: run %s model %s: %d cases, %d graded, mean %s, %s\n",
		req.RequestID, res.Run.ID, res.Run.Model, res.Run.Cases, res.Run.GradedN, mean, tail)
	if res.Drift != nil {
		fmt.Fprintf(w, "  drift vs %s: %s (delta %+.3f)\n", res.Drift.BaselineID, res.Drift.Verdict, res.Drift.Delta)
	}
}

// printTraceReport prints the cost-per-outcome report of the fleet's trace
// partitions, as JSON with asJSON.
func printTraceReport(agg *fleet.Aggregate, w io.Writer, asJSON bool) error {
	r, err := agg.Reducer(outcome.Options{})
	if err != nil {
		return err
	}
	rep, err := r.CheckedReport()
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, rep)
	}
	fmt.Fprintln(w, "cost per outcome of the traces consumed:")
	return rep.WriteTable(w)
}

// newReplayCmd makes the replay command, which publishes a Parquet directory to the traces subject.
func newReplayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay DIR",
		Short: "publish a Parquet trace directory to the traces subject",
		Long: "Publish every row of a TokenFuse Parquet segment directory to the traces subject, in segment\n" +
			"order, idempotently (each row carries a message id derived from the segment digest and row).",
	}
	fs := cmd.Flags()
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", "NATS server URL (default: the embedded server of a local verdryx serve)")
	strict := fs.Bool("strict", false, "stop at the first corrupt segment")
	asJSON := fs.Bool("json", false, "print the counts as JSON")
	lf := addLogFlags(fs, "info")
	subjects := addSubjectFlags(fs)
	allowEmpty := fs.Bool("allow-empty", false, "succeed on a directory without segments (default: exit 2 saying it is empty)")
	follow := fs.Bool("follow", false, "keep following DIR: publish each segment once as the gateway completes it, until interrupted")
	settle := fs.Duration("settle", (&segpub.FollowOptions{}).EnsureDefaults().Settle, "with --follow: report a segment once when it stays incomplete this long without growing")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) != 1 {
			return usageErrorf("replay: want exactly one directory")
		}
		if *follow {
			*allowEmpty = true // the gateway may not have written one yet
		}
		if err := checkNATSURL(*nf.url); err != nil {
			return err
		}
		logger, err := lf.logger(stderr, nil)
		if err != nil {
			return err
		}
		if err := checkTraceDir("replay", pos[0], *allowEmpty); err != nil {
			return err
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
		progress, done := replayProgress(stderr, !*follow)
		st, err := segpub.Replay(ctx, js, pos[0], segpub.ReplayOptions{Subjects: *subjects, Follow: *follow,
			FollowOptions: segpub.FollowOptions{Settle: *settle, OnPublished: printPublished(stdout),
				Options: segpub.Options{Strict: *strict, Progress: progress, Logger: logger}}})
		done()
		switch {
		case err != nil && (*follow || errors.Is(err, segpub.ErrStreams)):
			return err
		case err != nil:
			return inputError(err)
		case *follow:
			return nil
		}
		logger.Debug("replay done", "dir", pos[0], "subject", subjects.Traces, "rows", st.Rows, "new", st.New, "duplicates", st.Duplicates)
		if *asJSON {
			if err := writeJSON(stdout, newReplayJSON(st, pos[0], *subjects)); err != nil {
				return err
			}
		} else {
			printReplayStats(stdout, st, pos[0], *subjects)
		}
		if len(st.Failed) > 0 {
			return failed()
		}
		return nil
	}
	return cmd
}
