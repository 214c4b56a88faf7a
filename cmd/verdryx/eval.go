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
