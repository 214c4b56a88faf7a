package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/drift"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/junit"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/internal/ids"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/qualitylog"
	"github.com/verdryx/verdryx/store"
)

// evalFlags are the flags eval and drift share.
type evalFlags struct {
	data    *string // the global --data
	db      *string
	events  *string
	agentID *string
	otlp    *string
	asJSON  *bool
}

func addEvalFlags(fs *pflag.FlagSet, g *globals) evalFlags {
	return evalFlags{
		data:    &g.data,
		db:      addDBFlag(fs),
		events:  fs.String("events", envOr("VERDRYX_EVENTS_PATH", ""), "append agent-event envelopes to this NDJSON file (default $VERDRYX_EVENTS_PATH; off when empty)"),
		agentID: fs.String("agent-id", "", "agent:// id of the agent measured; events without one are skipped, never invented"),
		otlp:    addOTLPFlag(fs),
		asJSON:  fs.Bool("json", false, "print the result as JSON"),
	}
}

// evalSinks opens the store, events file and span exporter named by the flags.
// close flushes spans and closes everything; its error is worth printing.
type evalSinks struct {
	store  *store.Store
	events *envelope.Writer
	spans  *producer.Spans
	// spansErr is the span export's error, set by close (and not part of
	// what close returns): the collector failed (exit 3 when nothing else
	// did).
	spansErr error
}

func (s *evalSinks) close(ctx context.Context) error {
	var errs []error
	if s.spans != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		if err := s.spans.Shutdown(fctx); err != nil {
			s.spansErr = fmt.Errorf("--otlp: export spans: %w", err)
		}
		cancel()
	}
	if s.events != nil {
		errs = append(errs, s.events.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	return errors.Join(errs...)
}

// addDBFlag defines --db, the store file that overrides <data>/verdryx.db.
func addDBFlag(fs *pflag.FlagSet) *string {
	return fs.String("db", envOr("VERDRYX_DB", ""), "store file (default $VERDRYX_DB, else $TAIPAN_HOME/verdryx.db when $TAIPAN_HOME (default ~/.taipan) exists, else <data>/verdryx.db)")
}

// dbPath is the store of a command, by the stack's rule (store.ResolvePath):
// --db, else $VERDRYX_DB, else $TAIPAN_HOME/verdryx.db (default ~/.taipan)
// when that directory exists, else <data>/verdryx.db.
func dbPath(flagDB, data string) string {
	return store.ResolvePath(flagDB, data, store.Env{})
}

// storeMode is how a command opens the store.
type storeMode int

const (
	storeWrite         storeMode = iota // create the file when missing (eval)
	storeWriteExisting                  // write to a file that must exist (baseline)
	storeRead                           // only read, never migrate (runs, baselines, drift, report)
)

// openEvalStore opens the store of --db or --data. A store in the data
// directory creates that directory when written; a --db in a missing
// directory is refused with what to do. Opening for writing migrates a
// Python verdryx's store, after a copy that is named on stderr.
func openEvalStore(ctx context.Context, stderr io.Writer, flagDB, data string, mode storeMode) (*store.Store, error) {
	path := dbPath(flagDB, data)
	if mode != storeWrite {
		if _, err := os.Stat(path); err != nil {
			return nil, inputError(fmt.Errorf("no store at %s (run verdryx eval or the quickstart's verdryx serve first, or pass --data DIR or --db FILE)", path))
		}
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if flagDB != "" {
			return nil, inputError(fmt.Errorf("--db %s: directory %s does not exist (create it, or give a --db in an existing directory)", path, dir))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, inputError(fmt.Errorf("--data %s: %w", data, err))
		}
	}
	st, err := store.Open(ctx, path, store.Options{ReadOnly: mode == storeRead})
	if err != nil {
		return nil, inputError(err)
	}
	printMigration(stderr, st)
	return st, nil
}

// printMigration says on w what Open migrated, if anything.
func printMigration(w io.Writer, st *store.Store) {
	if m := st.Migrated(); m != nil {
		fmt.Fprintf(w, "verdryx: migrated %s from the Python verdryx's schema in place (%d runs, %d scores, %d unanswered, %d baselines kept); the file as it was is at %s\n",
			st.Path(), m.Runs, m.Scores, m.Unanswered, m.Baselines, m.Backup)
	}
}

func openEvalSinks(ctx context.Context, stderr io.Writer, c evalFlags, mode storeMode) (*evalSinks, error) {
	if err := checkURL(otlpFlagName, *c.otlp, "http", "https"); err != nil {
		return nil, err
	}
	s := &evalSinks{}
	st, err := openEvalStore(ctx, stderr, *c.db, *c.data, mode)
	if err != nil {
		return nil, err
	}
	s.store = st
	if *c.agentID != "" && !envelope.ValidAgentID(*c.agentID) {
		s.close(ctx)
		return nil, usageErrorf("--agent-id %q is not a canonical agent:// id (agent://<org>/<name>)", *c.agentID)
	}
	if *c.events != "" {
		opts := envelope.WriterOptions{Sync: envelope.SyncOnClose}
		if wrap, ok := ctx.Value(eventsFileWrapKey{}).(func(envelope.File) envelope.File); ok {
			opts.WrapFile = wrap
		}
		w, err := envelope.OpenWriter(*c.events, opts)
		if err != nil {
			s.close(ctx)
			return nil, inputError(fmt.Errorf("--events %s: %w", *c.events, err))
		}
		s.events = w
	}
	if *c.otlp != "" {
		sp, err := producer.NewSpans(ctx, producer.SpanOptions{Endpoint: *c.otlp, ServiceVersion: version()})
		if err != nil {
			s.close(ctx)
			return nil, inputError(fmt.Errorf("--otlp %s: %w", *c.otlp, err))
		}
		s.spans = sp
	}
	return s, nil
}

// eventsFileWrapKey is the context key under which a test hands run an
// envelope.WriterOptions.WrapFile for the --events file, to inject write
// and fsync failures. Nothing else sets it.
type eventsFileWrapKey struct{}

// maxWarnings bounds the per-event warnings printed; the rest are counted.
const maxWarnings = 3

// printWarnings prints at most maxWarnings of problems, then how many more.
func printWarnings(stderr io.Writer, problems []string) {
	for i, p := range problems {
		if i == maxWarnings {
			fmt.Fprintf(stderr, "verdryx: warning: ... and %d more\n", len(problems)-maxWarnings)
			break
		}
		fmt.Fprintf(stderr, "verdryx: warning: %s\n", p)
	}
}

// eventsNotWritten reports, after the sinks are closed, how many events
// never reached (or were removed from) the --events file, and prints why.
// The file's chain still verifies: the writer keeps it consistent.
func (s *evalSinks) eventsNotWritten(stderr io.Writer) int64 {
	if s.events == nil {
		return 0
	}
	n := s.events.Failed()
	if n > 0 {
		fmt.Fprintf(stderr, "verdryx: %d of %d events were not written to %s (the events in it still form a valid chain)\n",
			n, n+s.events.Written(), s.events.Path())
	}
	return n
}

func (s *evalSinks) deps() evalrun.Deps {
	d := evalrun.Deps{Store: s.store, Version: version()}
	if s.events != nil {
		d.Events = producer.File{W: s.events}
	}
	if s.spans != nil {
		d.Spans = s.spans
	}
	return d
}

// evalLong is eval's help.
const evalLong = "Grade a model against an eval set, store the run, emit events and spans.\n" +
	"--model stub (default) is the deterministic offline stub: it echoes prompts and answers rag cases with the offline RAG pipeline.\n" +
	"Any other --model is an Anthropic model id (ANTHROPIC_API_KEY), or openai:<id> for an OpenAI-compatible endpoint (OPENAI_API_KEY).\n" +
	"Typed cases are graded by typryx only with --typed-url (and the key in --typed-key-file or $VERDRYX_TYPRYX_KEY_FILE).\n" +
	"Exit 0: pass; 1: mean under --fail-under (an unmeasured mean never passes a floor) or, with --baseline, regressed, or events could not be written to --events; 2: usage or input error;\n" +
	"3: an outside service failed: typryx refused or could not be reached (nothing saved), the model or judge failed every case (the run is still stored), or the OTLP collector refused the spans."

// evalRunError classifies the error of a run that did not complete: a bad
// request is an input error, a typryx refusal an outside service's.
func evalRunError(err error) error {
	switch {
	case errors.Is(err, grading.ErrBadRequest):
		return inputError(err)
	case errors.Is(err, grading.ErrTypedService):
		return serviceError(fmt.Errorf("%w; nothing was saved", err))
	}
	return err
}

// newEvalCmd grades a model against an eval set and stores the run.
// Exit 0: graded (and at or above --fail-under); 1: under the floor, or
// unmeasured with a floor set, or some events were not written to --events
// (the count is printed); 2: usage or input error; 3: typryx refused or
// could not be reached, the model or judge failed every case, or the OTLP
// collector refused the spans.
func newEvalCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval EVALSET",
		Short: "grade a model against an eval set and store the run",
		Long:  evalLong,
	}
	fs := cmd.Flags()
	c := addEvalFlags(fs, g)
	model := fs.String("model", llm.StubID, "model under evaluation: stub, an Anthropic model id, or openai:<id>")
	mf := addModelFlags(fs, "timeout per model or judge call (never retried)")
	junit := fs.String("junit", "", "write JUnit XML (one testcase per eval case) to this file")
	failUnder := fs.Float64("fail-under", -1, "exit 1 when the mean score is below this floor (off when negative)")
	indexGen := fs.String("index", "", "answer rag cases from a stored index generation of --data: active or a generation id, with the embedder that built it (default: the offline pipeline in memory)")
	conc := fs.Int("concurrency", 4, "cases graded at once")
	baseline := fs.String("baseline", "", "after the run, check drift against this baseline id")
	window := fs.Int("window", 3, "with --baseline: the number of most recent runs pooled")
	alpha := fs.Float64("alpha", drift.DefaultAlpha, "with --baseline: significance level of the paired test")
	requireSig := fs.Bool("require-significance", false, "with --baseline: exit 1 only for a significant regression")
	sp := addSpendFlags(fs)
	tf := addTypedFlags(fs)
	lf := addLogFlags(fs, "warn")
	cmd.RunE = func(cmd *cobra.Command, pos []string) (err error) {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		ts, err := tf.setup(stdout, stderr)
		if err != nil {
			return err
		}
		stdout, stderr, typed, wrapLog := ts.stdout, ts.stderr, ts.typed, ts.wrapLog
		defer func() { err = ts.redact(err) }()
		if err := checkEvalArgs(pos, *failUnder, *conc, *alpha); err != nil {
			return err
		}
		book, err := sp.book()
		if err != nil {
			return err
		}
		logger, err := lf.logger(stderr, wrapLog)
		if err != nil {
			return err
		}
		// Load the set before opening anything, so a bad set touches nothing.
		if err := checkNotEmpty(pos[0], "eval set"); err != nil {
			return err
		}
		set, err := grading.LoadEvalSet(pos[0])
		if err != nil {
			return inputError(err)
		}
		em, err := mf.evalModels(*model, g.data, *indexGen)
		if err != nil {
			return err
		}
		s, err := openEvalSinks(ctx, stderr, c, storeWrite)
		if err != nil {
			return err
		}
		deps := s.deps()
		deps.Models, deps.RAG, deps.Prices, deps.Typed = em.resolve, em.rag, book, typed
		deps.Judge = &grader.Judge{Model: em.judge, Prices: book}
		deps.Semantic = &grader.Semantic{Model: em.judge, Prices: book, Threshold: *sp.semThreshold}
		deps.Concurrency, deps.Logger = *conc, logger
		runID := printEvalRunLine(stdout, *c.asJSON, *model, s.store.Path())
		live := newEvalLive(stdout, stderr, set, *model, em.judge.ID(), *c.asJSON)
		deps.OnCase = live.onCase
		res, runErr := evalrun.Execute(ctx, deps, evalrun.Request{
			RunID: runID, Set: set, Model: *model, AgentID: *c.agentID,
			BaselineID: *baseline, Window: *window, Alpha: *alpha, MaxCostUSD: *sp.costLimit, Semantic: *sp.semantic,
		})
		live.finish()
		closeErr := s.close(ctx)
		if runErr != nil {
			return evalRunError(runErr)
		}
		return s.finishEval(stdout, stderr, res, closeErr, c, live.printed, *junit, *failUnder, *requireSig)
	}
	return cmd
}

// printEvalRunLine makes the new run's id and, unless asJSON, prints the
// line the stack's console parses, first, as the Python verdryx prints it:
// "Eval run <id>  (model=<model>, db=<path>)".
func printEvalRunLine(w io.Writer, asJSON bool, model, db string) string {
	id := ids.New("run", time.Now())
	if !asJSON {
		fmt.Fprintf(w, "Eval run %s  (model=%s, db=%s)\n", id, model, db)
	}
	return id
}

// spendFlags are eval's price, cap and semantic-check flags.
type spendFlags struct {
	prices                  *string
	costLimit, semThreshold *float64
	semantic                *bool
}

func addSpendFlags(fs *pflag.FlagSet) spendFlags {
	return spendFlags{
		prices:       fs.String("prices", "", "JSON file of model id -> {\"input_usd_per_mtok\": N, \"output_usd_per_mtok\": N}; overrides and extends the built-in price book"),
		costLimit:    fs.Float64("cost-limit-usd", 0, "stop paid model and judge calls once the run's priced spend reaches this many US dollars; the rest is unmeasured (cost_limit). 0: no cap"),
		semantic:     fs.Bool("semantic", false, "add the faithfulness and answer_relevance checks, judged by --judge, to every rag case"),
		semThreshold: fs.Float64("semantic-threshold", grader.DefaultSemanticThreshold, "score at which a semantic check passes, in (0, 1]"),
	}
}

// book checks --cost-limit-usd and --semantic-threshold and returns the
// price book of --prices (the file over the built-in book).
func (f spendFlags) book() (llm.PriceBook, error) {
	if c := *f.costLimit; c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return nil, usageErrorf("eval: --cost-limit-usd %v: want a finite amount >= 0 (0: no cap)", c)
	}
	if t := *f.semThreshold; !(t > 0 && t <= 1) {
		return nil, usageErrorf("eval: --semantic-threshold %v: want a score in (0, 1]", t)
	}
	book := llm.DefaultPriceBook()
	if *f.prices != "" {
		var err error
		if book, err = llm.LoadPrices(*f.prices, book); err != nil {
			return nil, inputError(fmt.Errorf("--prices: %w", err))
		}
	}
	return book, nil
}

// checkEvalArgs refuses eval's arguments and flag values that cannot work,
// before anything is read or opened.
func checkEvalArgs(pos []string, failUnder float64, conc int, alpha float64) error {
	if len(pos) != 1 {
		return usageErrorf("eval: want exactly one EVALSET, have %d arguments", len(pos))
	}
	if failUnder > 1 || math.IsNaN(failUnder) {
		return usageErrorf("eval: --fail-under %v is above 1", failUnder)
	}
	if conc < 1 {
		return usageErrorf("eval: --concurrency must be at least 1")
	}
	if alpha <= 0 || alpha >= 1 {
		return usageErrorf("eval: --alpha must be in (0, 1)")
	}
	return nil
}

// finishEval prints what grading left to say once the sinks are closed
// (closeErr is their close's error), then reports the run (reportEval):
// its error decides the exit, else a span export failure is exit 3.
func (s *evalSinks) finishEval(stdout, stderr io.Writer, res evalrun.Result, closeErr error, c evalFlags, printedLive bool, junit string, failUnder float64, requireSig bool) error {
	printWarnings(stderr, res.Problems)
	if closeErr != nil {
		fmt.Fprintf(stderr, "verdryx: warning: %v\n", closeErr)
	}
	// A failed fsync on close removes events Execute counted as written.
	unwritten := s.eventsNotWritten(stderr)
	if s.events != nil {
		res.EventsWritten = int(s.events.Written())
	}
	if err := reportEval(stdout, stderr, res, s.store.Path(), *c.events, *c.asJSON, printedLive, junit, failUnder, requireSig, unwritten); err != nil {
		if s.spansErr != nil {
			fmt.Fprintf(stderr, "verdryx: warning: %v\n", s.spansErr)
		}
		return err
	}
	return serviceError(s.spansErr)
}

// reportEval writes the JUnit file and prints the run, then decides the
// exit: failed() when the mean is under failUnder (or unmeasured with a
// floor), the drift check fails, or events or problems were lost.
func reportEval(stdout, stderr io.Writer, res evalrun.Result, storePath, events string, asJSON, printedLive bool, junit string, failUnder float64, requireSig bool, unwritten int64) error {
	passMark := 1.0
	if failUnder >= 0 {
		passMark = failUnder
	}
	if junit != "" {
		if err := writeJUnit(junit, res.Run, passMark); err != nil {
			return inputError(fmt.Errorf("--junit: %w", err))
		}
	}
	if asJSON {
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
	} else {
		if !printedLive {
			printEvalHeader(stdout, res.Run.EvalSetID, res.Run.EvalSetDigest, res.Run.Model, res.Run.Judge)
			printEvalCases(stdout, res.Run.Scores)
		}
		printEvalFooter(stdout, res, storePath, events)
		if res.Drift != nil {
			printDrift(stdout, *res.Drift)
		}
	}
	for _, s := range res.Run.Scores {
		if s.Typed != nil && s.Typed.LabelError != "" {
			fmt.Fprintf(stderr, "verdryx: warning: label of case %s not posted to typryx: %s\n", s.CaseID, s.Typed.LabelError)
		}
	}
	// Not one case could be graded: the model or judge failed every call,
	// or typryx left every case unanswered, an outside service failing
	// (exit 3), whatever the floor says.
	if t := res.Run.Typed; t != nil && len(res.Run.Scores) > 0 && t.Unanswered == len(res.Run.Scores) {
		return serviceError(fmt.Errorf("no case could be graded: typryx left every one of the %d cases unanswered (%s); the run is stored, with no mean", t.Unanswered, t.ReasonsText()))
	}
	if un := res.Run.Unmeasured(); len(res.Run.Scores) > 0 && len(un) == len(res.Run.Scores) {
		return serviceError(fmt.Errorf("no case could be graded: every one of the %d cases is unmeasured (first: %s: %s); the run is stored", len(un), un[0].CaseID, un[0].Unmeasured))
	}
	fail := false
	if failUnder >= 0 {
		switch {
		case res.Run.MeanScore == nil:
			fmt.Fprintf(stderr, "verdryx: mean score unmeasured: cannot show it reaches --fail-under %.3f\n", failUnder)
			fail = true
		case *res.Run.MeanScore < failUnder:
			fmt.Fprintf(stderr, "verdryx: mean score %.3f is under --fail-under %.3f\n", *res.Run.MeanScore, failUnder)
			fail = true
		}
	}
	if res.Drift != nil && driftFails(*res.Drift, requireSig) {
		fail = true
	}
	if unwritten > 0 || len(res.Problems) > 0 {
		fail = true
	}
	if fail {
		return failed()
	}
	return nil
}

func evalCaseMark(s grading.Score) string {
	switch {
	case s.Unanswered():
		return "UNANSWERED"
	case !s.Graded():
		return "UNMEASURED"
	case s.Value >= 1:
		return "PASS"
	case s.Value > 0:
		return "PARTIAL"
	}
	return "FAIL"
}

// printEvalHeader prints what is known of a run before its first case.
func printEvalHeader(w io.Writer, setID, setDigest, model, judge string) {
	label := model
	if model == llm.StubID {
		label += " (deterministic stub: echoes prompts, offline RAG pipeline for rag cases, no network)"
	}
	fmt.Fprintf(w, "eval set %s (%s)\nmodel %s\n", setID, evalShortDigest(setDigest), label)
	if judge != "" {
		fmt.Fprintf(w, "judge %s\n", evalJudgeLabel(judge))
	}
	fmt.Fprintln(w)
}

// caseWidth is the width of the case id column.
func caseWidth(ids []string) int {
	width := 4
	for _, id := range ids {
		width = max(width, len(id))
	}
	return width
}

func printEvalCases(w io.Writer, scores []grading.Score) {
	ids := make([]string, len(scores))
	for i, s := range scores {
		ids[i] = s.CaseID
	}
	width := caseWidth(ids)
	for _, s := range scores {
		printEvalCase(w, s, width)
	}
}

// printEvalCase prints one case's line and, when it did not pass, why.
func printEvalCase(w io.Writer, s grading.Score, width int) {
	val := fmt.Sprintf("%.3f", s.Value)
	if !s.Graded() {
		val = "  -  "
	}
	fmt.Fprintf(w, "  %-10s %-*s  %-11s %s  %8.2fms\n", evalCaseMark(s), width, s.CaseID, s.Grader, val, float64(s.Duration)/1e6)
	if !s.Graded() {
		if s.Unanswered() {
			fmt.Fprintf(w, "             reason: %s (answer %s)\n", s.Unmeasured, s.Typed.AnswerID)
			return
		}
		fmt.Fprintf(w, "             reason: %s\n", s.Unmeasured)
		return
	}
	for _, ch := range s.Checks {
		if !ch.OK {
			fmt.Fprintf(w, "             x %s: %s\n", ch.Name, ch.Detail)
		}
	}
}

// printEvalFooter prints the run's totals after its cases.
func printEvalFooter(w io.Writer, res evalrun.Result, dbPath, events string) {
	r := res.Run
	fmt.Fprintln(w)
	if p := r.Provenance; p.CorpusDigest != "" {
		fmt.Fprintf(w, "corpus %s, index %s\n", evalShortDigest(p.CorpusDigest), p.IndexGeneration)
	}
	switch {
	case r.MeanScore == nil && r.Typed != nil:
		fmt.Fprintf(w, "run %s: mean score: unmeasured (0 of %d answered)\n", r.ID, r.Cases)
	case r.MeanScore == nil:
		fmt.Fprintf(w, "run %s: mean score unmeasured (0 of %d cases graded)\n", r.ID, r.Cases)
	default:
		fmt.Fprintf(w, "run %s: mean score %.3f over %d graded of %d cases\n", r.ID, *r.MeanScore, r.GradedN, r.Cases)
	}
	if t := r.Typed; t != nil && t.Unanswered > 0 {
		fmt.Fprintf(w, "unanswered: %d of %d asked (%s)\n", t.Unanswered, t.Asked, t.ReasonsText())
	}
	reasons := map[string]int{}
	unmeasured := 0
	for _, s := range r.Scores {
		if !s.Graded() && !s.Unanswered() { // the unanswered are counted apart above
			reasons[evalFirstClause(s.Unmeasured)]++
			unmeasured++
		}
	}
	if unmeasured > 0 {
		var parts []string
		for k, n := range reasons {
			parts = append(parts, fmt.Sprintf("%s: %d", k, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, "unmeasured: %d of %d (%s)\n", unmeasured, r.Cases, strings.Join(parts, "; "))
	}
	if t := r.Typed; t != nil && (t.LabelsPosted > 0 || t.LabelsFailed > 0) {
		fmt.Fprintf(w, "labels: %d posted to typryx (source %s)", t.LabelsPosted, grading.TypedLabelSource)
		if t.LabelsFailed > 0 {
			fmt.Fprintf(w, ", %d not posted (the scores stand)", t.LabelsFailed)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "tokens %d, cost $%.6f", r.TotalTokens, r.TotalCostUSD)
	if len(r.Unpriced) > 0 {
		fmt.Fprintf(w, " (unpriced: no price for %s, its calls counted as $0; give one with --prices)", strings.Join(r.Unpriced, ", "))
	}
	fmt.Fprintln(w)
	if cl := r.Provenance.CostLimit; cl != nil {
		fmt.Fprintf(w, "cost limit $%.6f: spent $%.6f in %d paid calls", cl.LimitUSD, cl.SpentUSD, cl.PaidCalls)
		if cl.StoppedCases > 0 {
			fmt.Fprintf(w, "; stopped at case %s, %d cases unmeasured (cost_limit), %d calls not made", cl.StoppedAtCase, cl.StoppedCases, cl.RefusedCalls)
		}
		fmt.Fprintln(w)
	}
	if res.Saved {
		fmt.Fprintf(w, "saved to %s\n", dbPath)
	}
	if events != "" {
		fmt.Fprintf(w, "events: %d written, %d skipped (no --agent-id) to %s\n", res.EventsWritten, res.EventsSkipped, events)
	}
}

func evalJudgeLabel(j string) string {
	if j == llm.StubID {
		return "stub (lexical rubric coverage, not a real judge)"
	}
	return j
}

func evalFirstClause(s string) string {
	if i := strings.Index(s, ": "); i > 0 {
		return s[:i]
	}
	return s
}

func evalShortDigest(d string) string {
	if len(d) > 19 {
		return d[:19] + "..."
	}
	return d
}

// writeJUnit writes the run as JUnit XML (junit.Write) to path.
func writeJUnit(path string, r grading.RunSummary, passMark float64) error {
	var b bytes.Buffer
	if err := junit.Write(&b, r, passMark); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// newBaselineCmd makes the baseline command, which snapshots a stored run as a baseline.
func newBaselineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baseline RUN_ID",
		Short: "snapshot a stored run as a baseline",
		Long: "Snapshot a stored run's mean score as a baseline for drift.\nA run with no graded case is refused: its mean is unmeasured.\n" +
			"A label names the newest baseline that carries it: the same run and label again answers the existing baseline\n" +
			"(no new one); a label given to another run moves to the new baseline, and the old one keeps its id and label.\n" +
			"drift --baseline takes the id or the label. The first line is \"Baseline <id>  (run=<run>, mean_score=<mean>)\",\n" +
			"as the Python verdryx prints it.\n" +
			"With --nats the store first catches up from the fleet's quality log (so a run any worker graded can be named),\n" +
			"and the baseline is recorded on the log, so every store has it; the log orders baselines, and a label names the\n" +
			"latest in the log: when another worker's baseline of the same label lands after this one, it says so.",
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	label := fs.String("label", "", "a label for the baseline, e.g. v1 (drift --baseline accepts it)")
	asJSON := fs.Bool("json", false, "print the baseline as JSON")
	nf := addNATSFlags(fs, "", "NATS server URL of the fleet: catch the store up from its quality log and record the baseline there")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) != 1 {
			return usageErrorf("baseline: want exactly one RUN_ID, have %d arguments", len(pos))
		}
		mode := storeWriteExisting
		if *nf.url != "" {
			mode = storeWrite // a store that only follows the log may be new
		}
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, mode)
		if err != nil {
			return err
		}
		defer st.Close()
		var lg *qualitylog.Log
		if *nf.url != "" {
			var closeNC func()
			if lg, closeNC, err = openQualityLog(ctx, nf, st, "verdryx-baseline"); err != nil {
				return err
			}
			defer closeNC()
			if _, err := lg.Sync(ctx); err != nil {
				return serviceError(err)
			}
		}
		p, err := st.PutBaseline(ctx, store.BaselineSpec{RunID: pos[0], Label: *label}, time.Now())
		if err != nil {
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnmeasured) || errors.Is(err, store.ErrBadLabel) {
				return inputError(err)
			}
			return err
		}
		var superseded *store.Put
		if lg != nil {
			if superseded, err = recordBaseline(ctx, lg, st, p); err != nil {
				return err
			}
		}
		if *asJSON {
			return writeJSON(stdout, struct {
				store.Put
				SupersededBy *drift.Baseline `json:"superseded_by,omitempty"`
			}{p, supersededBaseline(superseded)})
		}
		fmt.Fprintf(stdout, "Baseline %s  (run=%s, mean_score=%.3f)\n", p.ID, p.RunID, p.MeanScore)
		if superseded != nil {
			fmt.Fprintf(stdout, "  label %q was taken later in the fleet's quality log by %s of run %s: drift --baseline %s uses that one; this baseline keeps its id\n",
				p.Label, superseded.ID, superseded.RunID, p.Label)
		}
		switch {
		case !p.Created:
			fmt.Fprintf(stdout, "  already stored: this run's baseline%s\n", labelNote(p.Label))
		case p.Previous != nil:
			fmt.Fprintf(stdout, "  label %q now names this baseline (it named %s of run %s, which keeps its id)\n", p.Label, p.Previous.ID, p.Previous.RunID)
		case p.Label != "":
			fmt.Fprintf(stdout, "  label %q\n", p.Label)
		}
		return nil
	}
	return cmd
}

// supersededBaseline is the baseline of a superseding Put, nil for none.
func supersededBaseline(p *store.Put) *drift.Baseline {
	if p == nil {
		return nil
	}
	return &p.Baseline
}

// labelNote is " (label "x")", or "" without a label.
func labelNote(label string) string {
	if label == "" {
		return ""
	}
	return fmt.Sprintf(" (label %q)", label)
}

// newBaselinesCmd lists the stored baselines.
func newBaselinesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baselines",
		Short: "list stored baselines",
		Long:  "List stored baselines, oldest first: id, label, run, creation time, the run's case count and mean score.",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	asJSON := fs.Bool("json", false, "print the baselines as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, storeRead)
		if err != nil {
			return err
		}
		defer st.Close()
		list, err := st.BaselineList(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			if list == nil {
				list = []store.BaselineInfo{}
			}
			return writeJSON(stdout, list)
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "no baselines stored (verdryx baseline RUN_ID --label L makes one)")
			return nil
		}
		fmt.Fprintf(stdout, "%-32s  %-12s  %-36s  %-20s  %5s  %s\n", "BASELINE", "LABEL", "RUN", "CREATED", "CASES", "MEAN")
		for _, b := range list {
			label := b.Label
			if label == "" {
				label = "-"
			}
			fmt.Fprintf(stdout, "%-32s  %-12s  %-36s  %-20s  %5d  %.3f\n", b.ID, label, b.RunID, b.CreatedAt.Format(time.RFC3339), b.Cases, b.MeanScore)
		}
		return nil
	}
	return cmd
}

// newDriftCmd makes the drift command, which compares the most recent runs with a baseline. Exit 0 on-track,
// 1 regressed, 2 usage or input error (including a changed eval set).
func newDriftCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drift",
		Short: "compare recent runs against a baseline",
		Long: "Compare the most recent runs of the baseline's eval set and model with the baseline.\n" +
			"The window takes only runs graded under the baseline run's settings (judge, semantic checks and threshold, index generation,\n" +
			"embedder, retrieval, top_k, generator, typed template; verdryx runs shows them) and says which it skipped and why;\n" +
			"--allow-changed-settings pools them and the report names what differed.\n" +
			"Pooled mean, delta against the baseline mean (regressed at delta <= -threshold), Welch's t, a seeded bootstrap CI\n" +
			"(regressed when ci_high < 0) and a paired per-case test. Emits quality_drift only when regressed.\n" +
			"Every report says whether the drop is significant (ci_high < 0, or paired p < --alpha); the verdict rule is unchanged.\n" +
			"Exit 0: on-track (or, with --require-significance, a regression that is not significant); 1: regressed;\n" +
			"2: usage or input error (a changed eval set is refused unless --allow-changed-set; no run graded under the\n" +
			"baseline's settings unless --allow-changed-settings).",
	}
	fs := cmd.Flags()
	c := addEvalFlags(fs, g)
	baseline := fs.String("baseline", "", "baseline id or label (required; verdryx baselines lists them)")
	window := fs.Int("window", 3, "number of most recent runs pooled (the baseline's own run is left out)")
	threshold := fs.Float64("threshold", drift.DefaultThreshold, "regressed when mean - baseline <= -threshold")
	allow := fs.Bool("allow-changed-set", false, "compare runs whose eval set changed since the baseline (the report says so)")
	allowSettings := fs.Bool("allow-changed-settings", false, "pool runs graded under other settings than the baseline's run (the report names what differed)")
	seedFlag := fs.String("seed", "", "seed for the bootstrap and permutation draws (default: derived from the baseline and window run ids)")
	alpha := fs.Float64("alpha", drift.DefaultAlpha, "a drop is significant when the bootstrap CI lies below 0 or the paired test's p < alpha")
	requireSig := fs.Bool("require-significance", false, "exit 1 only for a significant regression (for CI gates on small sets)")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) != 0 {
			return usageErrorf("drift: unexpected arguments %q", pos)
		}
		if *baseline == "" {
			return usageErrorf("drift: --baseline is required")
		}
		if *threshold == 0 { // --window, --threshold and --alpha are range-checked at parse (ranges.go)
			return usageErrorf("drift: --threshold must be in (0, 1]")
		}
		var seed *uint64
		if *seedFlag != "" {
			var v uint64
			if _, err := fmt.Sscan(*seedFlag, &v); err != nil {
				return usageErrorf("drift: --seed %q is not an unsigned integer", *seedFlag)
			}
			seed = &v
		}
		s, err := openEvalSinks(ctx, cmd.ErrOrStderr(), c, storeRead)
		if err != nil {
			return err
		}
		started := time.Now()
		rep, err := evalrun.CheckDrift(ctx, s.store, evalrun.DriftRequest{
			BaselineID: *baseline, Window: *window, Threshold: *threshold, AllowChangedSet: *allow, AllowChangedSettings: *allowSettings, Seed: seed, Alpha: *alpha,
		})
		if err != nil {
			s.close(ctx)
			if errors.Is(err, grading.ErrBadRequest) {
				return inputError(err)
			}
			return err
		}
		printWarnings(stderr, emitDrift(ctx, s, rep, *c.agentID, started))
		unwritten := s.eventsNotWritten(stderr)
		if *c.asJSON {
			if err := writeJSON(stdout, rep); err != nil {
				return err
			}
		} else {
			printDrift(stdout, rep)
		}
		if driftFails(rep, *requireSig) || unwritten > 0 {
			return failed()
		}
		return nil
	}
	return cmd
}

// emitDrift appends the drift events and the span of rep
// (evalrun.EmitDrift), closes the sinks and returns the problems met.
func emitDrift(ctx context.Context, s *evalSinks, rep drift.Report, agentID string, started time.Time) []string {
	d := s.deps()
	problems := evalrun.EmitDrift(ctx, d.Events, d.Spans, rep, agentID, started, time.Now())
	if err := s.close(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	if s.spansErr != nil {
		problems = append(problems, s.spansErr.Error())
	}
	return problems
}

// driftFails is the exit rule: a regressed verdict fails; with
// requireSignificance only a significant regression does.
func driftFails(r drift.Report, requireSignificance bool) bool {
	return r.Verdict == drift.VerdictRegressed && (!requireSignificance || r.Significant)
}

func printDrift(w io.Writer, r drift.Report) {
	fmt.Fprintf(w, "drift of %s / %s against baseline %s (run %s)\n", r.EvalSetID, r.Model, r.BaselineID, r.BaselineRunID)
	if r.ChangedSet {
		fmt.Fprintf(w, "WARNING: the eval set changed since the baseline (--allow-changed-set); changed cases: %s\n", strings.Join(r.ChangedCases, ", "))
	}
	if r.ChangedSettings {
		fmt.Fprintf(w, "WARNING: runs graded under other settings than the baseline's are pooled (--allow-changed-settings):\n")
		for _, c := range r.SettingsChanges {
			fmt.Fprintf(w, "  run %s: %s\n", c.RunID, strings.Join(c.Changes, ", "))
		}
	}
	fmt.Fprintf(w, "  settings      %s\n", grading.SettingsText(r.BaselineSettings, false))
	if r.SettingsUnknown {
		fmt.Fprintf(w, "NOTE: the baseline's run records no settings (the Python verdryx's, or stored before verdryx recorded them):\n"+
			"  the window's runs are pooled whatever their settings; take a new baseline to compare runs graded alike\n")
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "  skipped       %d runs graded under other settings (--allow-changed-settings pools them):\n", len(r.Skipped))
		for _, c := range r.Skipped {
			fmt.Fprintf(w, "                run %s: %s\n", c.RunID, strings.Join(c.Changes, ", "))
		}
	}
	fmt.Fprintf(w, "  window        %d runs, %d graded scores: %s\n", r.Window, r.WindowN, strings.Join(r.WindowRunIDs, ", "))
	fmt.Fprintf(w, "  mean          %.4f (baseline %.4f, %d scores)\n", r.MeanScore, r.BaselineMean, r.BaselineN)
	fmt.Fprintf(w, "  delta         %+.4f (threshold %.4f)\n", r.Delta, r.Threshold)
	if r.CILow != nil {
		t := "undefined (both sides constant)"
		if r.TStatistic != nil {
			t = fmt.Sprintf("%.4f", *r.TStatistic)
		}
		if r.TStatistic != nil && r.WelchDF != nil && r.WelchP != nil {
			t += fmt.Sprintf(", df %.2f, two-sided p %.4f", *r.WelchDF, *r.WelchP)
		}
		fmt.Fprintf(w, "  welch t       %s\n", t)
		fmt.Fprintf(w, "  bootstrap CI  [%.4f, %.4f] (95%%, %d resamples, seed %d)\n", *r.CILow, *r.CIHigh, r.Resamples, r.Seed)
	} else {
		fmt.Fprintf(w, "  significance  not computed (fewer than 2 graded scores on a side)\n")
	}
	if p := r.Paired; p != nil {
		fmt.Fprintf(w, "  paired        %d cases, mean delta %+.4f, CI [%.4f, %.4f], sign-flip p %.4f\n", p.Cases, p.MeanDelta, p.CILow, p.CIHigh, p.PValue)
	}
	fmt.Fprintf(w, "  significance  %s\n", r.Significance)
	fmt.Fprintf(w, "verdict %s (%s)\n", r.VerdictText(), strings.Join(r.Why, "; "))
}

// newRunsCmd makes the runs command, which lists stored runs.
func newRunsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "list stored eval runs",
		Long: "List stored eval runs, most recent first, with the settings that changed their scores (drift pools only runs\n" +
			"graded alike): judge, sem (semantic judge) and sem@ (its threshold), idx (index generation), emb (embedder),\n" +
			"ret (retrieval), k (top_k), gen (generator), typed (typryx template); \"none\" when the run used none of them,\n" +
			"\"not recorded\" for runs stored before verdryx recorded them (and the Python verdryx's).",
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	asJSON := fs.Bool("json", false, "print the runs as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) != 0 {
			return usageErrorf("runs: unexpected arguments %q", pos)
		}
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, storeRead)
		if err != nil {
			return err
		}
		defer st.Close()
		runs, err := st.Runs(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			if runs == nil {
				runs = []store.RunInfo{}
			}
			return writeJSON(stdout, runs)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "verdryx: store %s\n", dbPath(*db, g.data))
		if note := historyNote(ctx, st); note != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "verdryx: %s\n", note)
		}
		if len(runs) == 0 {
			fmt.Fprintln(stdout, "no runs stored")
			return nil
		}
		fmt.Fprintf(stdout, "%-36s  %-20s  %-18s  %-10s  %-22s  %s\n", "RUN", "STARTED", "EVAL SET", "MODEL", "MEAN (graded/cases)", "SETTINGS")
		for _, r := range runs {
			mean := "unmeasured"
			if r.MeanScore != nil {
				mean = fmt.Sprintf("%.3f", *r.MeanScore)
			}
			mean = fmt.Sprintf("%s (%d/%d)", mean, r.Graded, r.Cases)
			fmt.Fprintf(stdout, "%-36s  %-20s  %-18s  %-10s  %-22s  %s\n", r.ID, r.StartedAt.Format(time.RFC3339), r.EvalSetID, r.Model, mean, grading.SettingsText(r.Settings, true))
		}
		return nil
	}
	return cmd
}
