package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/grading/mutation"
	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/internal/ids"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/provider/openai"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
	"github.com/verdryx/verdryx/ragask"
)

// Defaults of the RAG commands. The data directory is --data, else
// $VERDRYX_DATA, else ./.verdryx (defaultDataDir); the index lives in
// <data>/index. No default names a corpus: index build takes --corpus, and
// ask answers from the corpus the active generation recorded.
const (
	defaultBaseURL    = "https://api.openai.com/v1"
	defaultEmbedModel = "text-embedding-3-small"
	defaultGenModel   = "gpt-4o-mini"
)

// ragFlags are the provider and location flags shared by index and ask.
type ragFlags struct {
	data       string // the global --data
	corpus     string
	embedder   string
	generator  string
	baseURL    string
	embedModel string
	genModel   string
	dims       int
	timeout    time.Duration
	retrieval  string // index build: --retrieval
}

func (f *ragFlags) register(fs *pflag.FlagSet, withGenerator bool) {
	if withGenerator {
		fs.StringVar(&f.corpus, "corpus", "", "corpus JSON file (default: the corpus the active index generation recorded; required with --memory)")
	} else {
		fs.StringVar(&f.corpus, "corpus", "", "corpus JSON file (this or --docs; the generation records a copy)")
	}
	fs.StringVar(&f.embedder, "embedder", "offline", "embedder: offline (feature hashing, no network) or openai (paid, opt-in)")
	what := "--embedder openai"
	if withGenerator {
		what = "--embedder/--generator openai"
	}
	fs.StringVar(&f.baseURL, "openai-base-url", envFirst(defaultBaseURL, "VERDRYX_OPENAI_BASE_URL", "OPENAI_BASE_URL"), "OpenAI-compatible API root for "+what+" ($VERDRYX_OPENAI_BASE_URL, $OPENAI_BASE_URL)")
	fs.StringVar(&f.embedModel, "embed-model", defaultEmbedModel, "embedding model for --embedder openai")
	fs.IntVar(&f.dims, "dims", 0, "vector dimensions: offline default "+strconv.Itoa(hashembed.DefaultDims)+"; openai: required length of every vector (0 accepts the provider's)")
	fs.DurationVar(&f.timeout, "timeout", openai.DefaultTimeout, "timeout of each provider call (no retries)")
	if !withGenerator {
		fs.StringVar(&f.retrieval, "retrieval", "", "how questions rank the chunks, stored with the generation: vector, or hybrid (BM25 fused with vector by reciprocal rank fusion); default vector for --corpus, "+rag.DefaultRetrievalForDocs+" for documents")
	}
	if withGenerator {
		fs.StringVar(&f.generator, "generator", "offline", "generator: offline (extractive, no network) or openai (paid, opt-in)")
		fs.StringVar(&f.genModel, "gen-model", defaultGenModel, "chat model for --generator openai")
	}
}

// providerError marks err as an outside service's failure (exit 3) when a
// provider is in use; the offline parts have no outside service.
func (f *ragFlags) providerError(err error) error {
	if f.embedder == "openai" || f.generator == "openai" {
		return serviceError(err)
	}
	return err
}

// check validates the flags before any work starts.
func (f *ragFlags) check() error {
	if _, err := rag.ResolveRetrieval(f.retrieval, false); err != nil {
		return usageErrorf("--retrieval: %v", err)
	}
	return checkURL("--openai-base-url ($VERDRYX_OPENAI_BASE_URL, $OPENAI_BASE_URL)", f.baseURL, "http", "https")
}

// retrievalMode is the retrieval index build records: --retrieval, else
// the default of the input (rag.ResolveRetrieval; docs for an index of
// documents). check has refused an unknown --retrieval.
func (f *ragFlags) retrievalMode(docs bool) string {
	r, _ := rag.ResolveRetrieval(f.retrieval, docs)
	return r
}

func (f *ragFlags) newEmbedder() (index.Embedder, error) {
	switch f.embedder {
	case "offline":
		return hashembed.New(f.dims), nil
	case "openai":
		if err := f.checkKey(); err != nil {
			return nil, err
		}
		c, err := f.client()
		if err != nil {
			return nil, err
		}
		return openai.NewEmbedder(c, f.embedModel, f.dims)
	}
	return nil, fmt.Errorf("--embedder %q: want offline or openai", f.embedder)
}

func (f *ragFlags) newGenerator() (rag.Generator, error) {
	return newGenerator(f.generator, f.genModel, f.providers())
}

// newGenerator is the generator of --generator and --gen-model (ask and
// serve): offline (extractive) or openai (chat over p's root, key and
// timeout). The OpenAI API itself without a key is refused.
func newGenerator(kind, model string, p rag.Providers) (rag.Generator, error) {
	switch kind {
	case "offline":
		return rag.NewExtractive(0), nil
	case "openai":
		c, err := openai.New(openai.Options{BaseURL: p.OpenAIBaseURL, APIKey: p.OpenAIKey, Timeout: p.Timeout})
		if errors.Is(err, openai.ErrNoKey) {
			return nil, fmt.Errorf("--generator openai: OPENAI_API_KEY is not set (needed for %s)", defaultBaseURL)
		}
		if err != nil {
			return nil, fmt.Errorf("--generator openai: %w", err)
		}
		return rag.NewChat(c, model)
	}
	return nil, fmt.Errorf("--generator %q: want offline or openai", kind)
}

// client is the OpenAI-compatible client of --openai-base-url, the key in
// OPENAI_API_KEY and --timeout.
func (f *ragFlags) client() (*openai.Client, error) {
	return openai.New(openai.Options{BaseURL: f.baseURL, APIKey: openai.KeyFromEnv(os.Getenv), Timeout: f.timeout})
}

// checkKey refuses the OpenAI API itself without OPENAI_API_KEY; other
// OpenAI-compatible servers (Ollama, vLLM, llama.cpp) may need no key.
func (f *ragFlags) checkKey() error {
	if strings.HasPrefix(f.baseURL, defaultBaseURL) && os.Getenv("OPENAI_API_KEY") == "" {
		return fmt.Errorf("OPENAI_API_KEY is not set (needed for %s)", f.baseURL)
	}
	return nil
}

// newIndexCmd holds index build, ls and gc.
func newIndexCmd(g *globals) *cobra.Command {
	return newGroupCmd("index", "build, list, verify and prune vector index generations",
		newIndexBuildCmd(g), newIndexListCmd(g), newIndexGCCmd(g), newIndexVerifyCmd(g))
}

func newIndexListCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "list retained index generations, newest first",
		Long:  "list retained index generations, newest first",
	}
	asJSON := cmd.Flags().Bool("json", false, "print the generations as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		stdout := cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("index ls: unexpected argument %q", pos[0])
		}
		list, err := index.NewStore(g.data, index.StoreOptions{}).List()
		if err != nil {
			return inputError(err)
		}
		if *asJSON {
			type listed struct {
				index.Manifest
				Active bool   `json:"active"`
				Error  string `json:"error,omitempty"`
			}
			out := []listed{}
			for _, l := range list {
				e := listed{Manifest: l.Manifest, Active: l.Active}
				if l.Err != nil {
					e.Error = l.Err.Error()
				}
				out = append(out, e)
			}
			return writeJSON(stdout, out)
		}
		if len(list) == 0 {
			fmt.Fprintf(stdout, "no generations in %s\n", index.NewStore(g.data, index.StoreOptions{}).Dir())
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ACTIVE\tGENERATION\tCREATED\tROWS\tDIMS\tEMBEDDER\tRETRIEVAL\tCORPUS")
		for _, l := range list {
			mark := ""
			if l.Active {
				mark = "*"
			}
			if l.Err != nil {
				fmt.Fprintf(tw, "%s\t%s\tinvalid: %v\t\t\t\t\t\n", mark, l.ID, l.Err)
				continue
			}
			retrieval := l.Retrieval
			if retrieval == "" {
				retrieval = rag.RetrievalVector
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s/%s\t%s\t%s\n", mark, l.ID, l.CreatedAt.Format(time.RFC3339), l.Count, l.Dims,
				l.Embedder.Name, l.Embedder.Model, retrieval, ragShortDigest(l.CorpusDigest))
		}
		return tw.Flush()
	}
	return cmd
}

func ragShortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func newIndexGCCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "remove old index generations",
		Long: "remove the staging directories of interrupted builds (never a running build's), the retained\n" +
			"generations but the active one, the --keep most recent others and any a running worker serves (its\n" +
			"lease; printed as kept, with why), then the embedding cache entries\n" +
			"(<data>/index/cache) of texts no retained generation holds",
	}
	fs := cmd.Flags()
	keep := fs.Int("keep", 1, "inactive generations to keep besides the active one")
	asJSON := fs.Bool("json", false, "print the removed generations as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		stdout := cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("index gc: unexpected argument %q", pos[0])
		}
		if *keep < 0 {
			return usageErrorf("index gc: --keep must not be negative")
		}
		store := index.NewStore(g.data, index.StoreOptions{})
		removedStale, err := store.RemoveStale()
		stale := staleList(removedStale)
		var pruned index.PruneResult
		if err == nil {
			pruned, err = store.Prune(*keep)
		}
		removed, kept := pruned.Removed, pruned.Kept
		entries := 0
		if err == nil {
			entries, err = pruneCache(g.data)
		}
		if *asJSON {
			if removed == nil {
				removed = []string{}
			}
			if kept == nil {
				kept = []index.Kept{}
			}
			if jerr := writeJSON(stdout, map[string]any{"removed": removed, "kept": kept, "stale_staging_removed": stale, "cache_entries_removed": entries}); jerr != nil || err != nil {
				return errors.Join(err, jerr)
			}
			return nil
		}
		printStale(stdout, stale)
		for _, id := range removed {
			fmt.Fprintf(stdout, "removed %s\n", id)
		}
		for _, k := range kept {
			fmt.Fprintf(stdout, "kept %s (%s)\n", k.ID, k.Reason)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d generation(s) removed, %d embedding cache entr(ies) no retained generation uses\n", len(removed), entries)
		return nil
	}
	return cmd
}

// newAskCmd makes the ask command, which answers one question and prints
// the answer and its sources, or the full record.
func newAskCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ask QUESTION",
		Short: "ask the RAG pipeline a question and print the answer and its sources",
		Long: "Ask the RAG pipeline a question and print the answer and its sources (each retrieved chunk: rank, id,\n" +
			"source, headings and span when its metadata has them, score); --json prints the full record.",
	}
	fs := cmd.Flags()
	var rf ragFlags
	rf.register(fs, true)
	asJSON := fs.Bool("json", false, "print the full record as JSON")
	topK := fs.Int("top-k", rag.DefaultTopK, fmt.Sprintf("chunks retrieved, 1 to %d", ragask.MaxTopK))
	filters := fs.StringArray("filter", nil, "key=value: retrieve only chunks whose metadata key equals value (an array field: holds it); repeatable, keys ANDed")
	memory := fs.Bool("memory", false, "build the index in memory instead of loading the active generation")
	otlp := addOTLPFlag(fs)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		rf.data = g.data
		if err := rf.check(); err != nil {
			return err
		}
		if err := checkURL(otlpFlagName, *otlp, "http", "https"); err != nil {
			return err
		}
		var err error
		if len(pos) != 1 {
			return usageErrorf("ask: want exactly one question argument, have %d", len(pos))
		}
		if strings.TrimSpace(pos[0]) == "" {
			return usageErrorf("ask: the question is empty")
		}
		opts, err := askOptions(*topK, *filters)
		if err != nil {
			return err
		}
		store := index.NewStore(rf.data, index.StoreOptions{})
		corpusPath, err := askCorpusPath(store, rf, *memory)
		if err != nil {
			return err
		}
		gen, err := rf.newGenerator()
		if err != nil {
			return inputError(err)
		}
		explicit := cmd.Flags().Changed("embedder") || cmd.Flags().Changed("embed-model") || cmd.Flags().Changed("dims")
		p, err := rf.askPipeline(ctx, store, corpusPath, *memory, explicit, gen)
		if err != nil {
			return err
		}
		rec, spanErr, err := askTraced(ctx, p, pos[0], opts, *otlp)
		if errors.Is(err, rag.ErrFilter) {
			return usageErrorf("ask: --filter: %v", err)
		}
		if err != nil {
			return errors.Join(rf.providerError(err), spanErr)
		}
		if *asJSON {
			if err := writeJSON(stdout, rec); err != nil {
				return err
			}
		} else {
			printAnswer(stdout, rec)
		}
		return spanErr
	}
	return cmd
}

// askPipeline is ask's pipeline: built in memory from the corpus, or the
// active generation opened as openStored does.
func (f *ragFlags) askPipeline(ctx context.Context, store *index.Store, corpusPath string, memory, explicitEmbedder bool, gen rag.Generator) (*rag.Pipeline, error) {
	if !memory {
		return f.openStored(store, corpusPath, explicitEmbedder, gen)
	}
	corpus, err := rag.LoadCorpus(corpusPath)
	if err != nil {
		return nil, inputError(err)
	}
	emb, err := f.newEmbedder()
	if err != nil {
		return nil, inputError(err)
	}
	p, err := rag.Build(ctx, corpus, emb, gen, rag.Options{})
	if err != nil {
		return nil, f.providerError(err)
	}
	return p, nil
}

// askTraced asks p, recording the ask's span (ragask.SpanAsk, with the
// provider calls under it) at the OTLP collector otlp when it is set, as
// the worker records each ask. The span is exported before it returns;
// spanErr, an outside service's failure (exit 3), says why it was not.
func askTraced(ctx context.Context, p *rag.Pipeline, q string, opts rag.AskOptions, otlp string) (rec rag.Record, spanErr, err error) {
	if otlp == "" {
		rec, err = p.AskWith(ctx, q, opts)
		return rec, nil, err
	}
	spans, err := producer.NewSpans(ctx, producer.SpanOptions{Endpoint: otlp, ServiceVersion: version()})
	if err != nil {
		return rag.Record{}, nil, inputError(fmt.Errorf("--otlp: %w", err))
	}
	start := time.Now()
	actx, end := spans.StartRun(ctx, ragask.SpanAsk, ids.New("ask", start), "", start)
	rec, err = p.AskWith(actx, q, opts)
	end(time.Now(), ragask.SpanData(rec, opts), err)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if serr := spans.Shutdown(sctx); serr != nil {
		spanErr = serviceError(fmt.Errorf("--otlp: export spans: %w", serr))
	}
	return rec, spanErr, err
}

// openStored opens the active generation with the embedder that built it
// (rag.OpenStored), after checking what the flags ask of it: the corpus
// of --corpus, and with explicitEmbedder the embedder of --embedder,
// --embed-model and --dims. A stale, missing or invalid generation is an
// input error, before any provider is called.
func (f *ragFlags) openStored(store *index.Store, corpusPath string, explicitEmbedder bool, gen rag.Generator) (*rag.Pipeline, error) {
	m, _, err := store.Generation("active")
	if err == nil && (f.corpus != "" || explicitEmbedder) {
		want := index.Expect{CorpusDigest: m.CorpusDigest, Embedder: m.Embedder}
		if f.corpus != "" {
			corpus, err := rag.LoadCorpus(corpusPath)
			if err != nil {
				return nil, inputError(err)
			}
			want.CorpusDigest = corpus.Digest()
		}
		if explicitEmbedder {
			emb, err := f.newEmbedder()
			if err != nil {
				return nil, inputError(err)
			}
			want.Embedder = index.InfoOf(emb)
		}
		_, err = store.Check(want)
	}
	var p *rag.Pipeline
	if err == nil {
		p, err = rag.OpenStored(store, "active", f.providers(), gen, rag.Options{})
	}
	switch {
	case errors.Is(err, index.ErrNoActive):
		return nil, inputError(fmt.Errorf("%w; run: verdryx index build --corpus %s --data %s (or pass --memory)", err, corpusPath, f.data))
	case errors.Is(err, index.ErrStale), errors.Is(err, index.ErrCorrupt), errors.Is(err, index.ErrUnsafePath), errors.Is(err, index.ErrNoCorpus), errors.Is(err, rag.ErrEmbedder):
		return nil, inputError(err)
	case err != nil:
		return nil, serviceError(err)
	}
	return p, nil
}

// providers are the provider settings of the flags for a stored
// generation's embedder: --openai-base-url, $OPENAI_API_KEY, --timeout.
func (f *ragFlags) providers() rag.Providers {
	return rag.Providers{OpenAIBaseURL: f.baseURL, OpenAIKey: openai.KeyFromEnv(os.Getenv), Timeout: f.timeout}
}

// askOptions checks --top-k (1 to ragask.MaxTopK) and reads the --filter
// terms (key=value, a key at most once).
func askOptions(topK int, filters []string) (rag.AskOptions, error) {
	if topK < 1 || topK > ragask.MaxTopK {
		return rag.AskOptions{}, usageErrorf("ask: --top-k %d: want 1 to %d", topK, ragask.MaxTopK)
	}
	var f rag.Filter
	for _, t := range filters {
		k, v, ok := strings.Cut(t, "=")
		if !ok || strings.TrimSpace(k) == "" || v == "" {
			return rag.AskOptions{}, usageErrorf("ask: --filter %q: want key=value", t)
		}
		if _, dup := f[k]; dup {
			return rag.AskOptions{}, usageErrorf("ask: --filter: key %q given twice", k)
		}
		if f == nil {
			f = rag.Filter{}
		}
		f[k] = v
	}
	return rag.AskOptions{TopK: topK, Filter: f}, nil
}

// printAnswer writes the answer and its sources: one line per retrieved
// chunk, best first, with its id, score and where it comes from.
func printAnswer(w io.Writer, rec rag.Record) {
	fmt.Fprintf(w, "%s\n\nsources (%s retrieval, generation %s):\n", rec.Answer, rec.Retrieval, rec.IndexGeneration)
	for i, c := range rec.Chunks {
		fmt.Fprintf(w, "  %d. %s  score %.6f  similarity %.6f  %s\n", i+1, c.ID, c.Score, c.Similarity, chunkOrigin(c.Metadata))
		if len(c.Duplicates) > 0 {
			fmt.Fprintf(w, "     the same text also in: %s\n", strings.Join(c.Duplicates, ", "))
		}
	}
}

// chunkOrigin says where a chunk comes from: its source, headings and
// span ([start,end) bytes) when its metadata has them, else the metadata
// as JSON.
func chunkOrigin(md map[string]any) string {
	var parts []string
	if s, ok := md["source"].(string); ok {
		parts = append(parts, s)
	}
	if hs, ok := md["headings"].([]any); ok && len(hs) > 0 {
		names := make([]string, len(hs))
		for i, h := range hs {
			names[i] = fmt.Sprint(h)
		}
		parts = append(parts, "§ "+strings.Join(names, " > "))
	}
	if sp, ok := md["span"].([]any); ok && len(sp) == 2 {
		parts = append(parts, fmt.Sprintf("bytes [%v,%v)", sp[0], sp[1]))
	}
	if len(parts) > 0 {
		return strings.Join(parts, "  ")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(md)
	return string(bytes.TrimSpace(b.Bytes()))
}

// askCorpusPath is the corpus ask answers from: --corpus, else the copy
// the active index generation recorded (--memory needs --corpus). It must
// be a non-empty file.
func askCorpusPath(store *index.Store, rf ragFlags, memory bool) (string, error) {
	corpusPath := rf.corpus
	if corpusPath == "" {
		if memory {
			return "", usageErrorf("ask: --memory needs --corpus")
		}
		var err error
		_, corpusPath, err = store.Generation("active")
		if errors.Is(err, index.ErrNoActive) {
			return "", inputError(fmt.Errorf("%w; run: verdryx index build --corpus FILE --data %s (or pass --memory --corpus FILE)", err, rf.data))
		}
		if err != nil {
			return "", inputError(err)
		}
	}
	if err := checkNotEmpty(corpusPath, "corpus"); err != nil {
		return "", err
	}
	return corpusPath, nil
}

// newMutateCmd makes the mutate command, which asks every rag case of an
// eval set through the offline pipeline, derives each named mutation of the
// correct answer and each control of the case's reference answer, and grades
// them with the graders eval uses. It exits 1 if a mutant survives, a
// control fails, a case fails unmutated, or nothing was mutated or
// controlled.
func newMutateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mutate [EVALSET]",
		Short: "check that the graders fail every named mutation and pass every control of the golden set",
		Long: "Check that the graders kill every named mutation of every golden case (sensitivity: killed/mutants)\n" +
			"and pass every control, a correct rephrasing of the case's reference answer (specificity: passed/controls).\n" +
			"EVALSET is the eval-set file eval takes; without it, --corpus and --golden name the files (every golden case is used).\n" +
			"Exit 0: every mutant killed and every control passed; 1: a survivor or a failing control (each is named)\n" +
			"or a case failing unmutated; 2: usage or input error.",
	}
	fs := cmd.Flags()
	corpusPath := fs.String("corpus", "", "corpus JSON file (without EVALSET; with --golden)")
	goldenPath := fs.String("golden", "", "golden cases JSON file (without EVALSET; with --corpus)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	semantic := fs.Bool("semantic", false, "grade with the stub's faithfulness and answer_relevance checks too, and add the class \""+mutation.ClassUnsupportedClaim+"\"")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		var err error
		if len(pos) > 1 {
			return usageErrorf("mutate: want at most one EVALSET, have %d arguments", len(pos))
		}
		var set *grading.EvalSet
		if len(pos) == 1 {
			if err := checkNotEmpty(pos[0], "eval set"); err != nil {
				return err
			}
			set, err = grading.LoadEvalSet(pos[0])
		} else {
			if *corpusPath == "" || *goldenPath == "" {
				return usageErrorf("mutate: want an EVALSET, or both --corpus and --golden")
			}
			set, err = mutation.InlineRAGSet(*corpusPath, *goldenPath)
		}
		if err != nil {
			return inputError(err)
		}
		corpus, cpath, ok := set.RAGCorpus()
		if !ok {
			return inputError(fmt.Errorf("mutate: eval set %s has no rag case", set.ID))
		}
		p, err := grading.OfflineRAG(ctx, cpath, nil)
		if err != nil {
			return err
		}
		var opts mutation.Options
		if *semantic || set.Semantic {
			opts.Semantic = &grader.Semantic{Model: &llm.Stub{}}
		}
		rep, err := mutation.RunWith(ctx, set, corpus, p, opts)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := writeJSON(stdout, rep); err != nil {
				return err
			}
		} else {
			printMutate(stdout, rep)
		}
		if rep.Survived > 0 || rep.ControlsFailed > 0 || len(rep.BaseFailures) > 0 || rep.Mutants == 0 || rep.Controls == 0 {
			return failed()
		}
		return nil
	}
	return cmd
}

func printMutate(w io.Writer, rep mutation.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tMUTATION\tTARGET\tRESULT\tFAILED CHECKS")
	for _, r := range rep.BaseFailures {
		fmt.Fprintf(tw, "%s\t(unmutated)\t\tBASE FAILS\t%s\n", r.CaseID, strings.Join(r.FailedChecks, ","))
	}
	for _, r := range rep.Results {
		result := "killed"
		if !r.Killed {
			result = "SURVIVED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.CaseID, r.Mutation, r.Target, result, strings.Join(r.FailedChecks, ","))
	}
	for _, r := range rep.ControlResults {
		result := "passed"
		if !r.Passed {
			result = "CONTROL FAILS"
		}
		fmt.Fprintf(tw, "%s\tcontrol %s\t%s\t%s\t%s\n", r.CaseID, r.Control, r.Target, result, strings.Join(r.FailedChecks, ","))
	}
	tw.Flush()
	fmt.Fprintln(w)
	var parts []string
	for _, name := range append(golden.MutationNames(), mutation.ClassUnsupportedClaim) {
		if c := rep.Classes[name]; c != nil {
			parts = append(parts, fmt.Sprintf("%s %d/%d", name, c["killed"], c["mutants"]))
		}
	}
	fmt.Fprintf(w, "killed by class: %s\n", strings.Join(parts, ", "))
	parts = nil
	for _, name := range golden.ControlNames() {
		if c := rep.ControlClasses[name]; c != nil {
			parts = append(parts, fmt.Sprintf("%s %d/%d", name, c["passed"], c["controls"]))
		}
	}
	fmt.Fprintf(w, "controls passed by class: %s\n", strings.Join(parts, ", "))
	for _, r := range rep.Survivors {
		fmt.Fprintf(w, "survivor: %s %s (%s): %q\n", r.CaseID, r.Mutation, r.Target, r.Answer)
	}
	for _, r := range rep.FailingControls {
		fmt.Fprintf(w, "failing control: %s %s (%s) failed %s: %q\n", r.CaseID, r.Control, r.Target, strings.Join(r.FailedChecks, ","), r.Answer)
	}
	fmt.Fprintf(w, "%s: %d cases, %d mutants: %d killed, %d survived (sensitivity %s); %d controls: %d passed, %d failed (specificity %s); %d cases failing unmutated\n",
		rep.EvalSet, rep.Cases, rep.Mutants, rep.Killed, rep.Survived, percent(rep.Sensitivity, rep.Mutants),
		rep.Controls, rep.ControlsPassed, rep.ControlsFailed, percent(rep.Specificity, rep.Controls), len(rep.BaseFailures))
}

// percent writes a share as a percentage with one decimal, or "n/a" when
// nothing was measured.
func percent(share float64, n int) string {
	if n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*share)
}
