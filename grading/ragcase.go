package grading

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// RAGAsker answers a rag case's question (rag.Pipeline implements it).
type RAGAsker interface {
	Ask(ctx context.Context, question string) (rag.Record, error)
	// Generation is the index generation id answers come from.
	Generation() string
}

var (
	_ RAGAsker          = (*rag.Pipeline)(nil)
	_ settingsDescriber = (*rag.Pipeline)(nil)
)

// ragSet is the resolved rag part of an eval set.
type ragSet struct {
	corpusDigest string
	corpusPath   string
	corpus       rag.Corpus
	checker      *golden.Checker
	golden       map[string]golden.Case // by eval case id
	// goldenBytes holds, by eval case id, the canonical JSON of the golden
	// case and of every corpus chunk it references (expected, ranked and
	// sibling ids): what the case digest covers.
	goldenBytes map[string][]byte
}

// caseProvenance returns the canonical bytes a rag case's digest covers:
// its golden case and the corpus entries it names.
func caseProvenance(gc golden.Case, c rag.Corpus) []byte {
	var ids []string
	for _, id := range append(append([]string{gc.ExpectedRetrievedID}, gc.ExpectedRankedIDs...), gc.CollisionSiblingIDs...) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	var chunks []rag.Entry
	for _, id := range ids {
		if e, ok := c.Entry(id); ok {
			chunks = append(chunks, e)
		}
	}
	b, _ := json.Marshal(struct { // a decoded case and entries always marshal
		Golden golden.Case `json:"golden"`
		Chunks []rag.Entry `json:"chunks"`
	}{gc, chunks})
	return b
}

// loadRAGSet loads the corpus and every golden case the set's rag cases
// name ("<file>#<case_id>", relative to the set), and checks the cases
// against the corpus. Errors are *fieldError naming file, case and field.
func loadRAGSet(set *EvalSet, file string, read ReadFileFunc) (*ragSet, []error) {
	var errs []error
	corpus, err := loadCorpusWith(read, set.resolve(set.Corpus))
	if err != nil {
		return nil, []error{&fieldError{File: file, Index: -1, Field: "corpus", Msg: err.Error()}}
	}
	rs := &ragSet{corpusDigest: corpus.Digest(), corpusPath: set.resolve(set.Corpus), corpus: corpus, checker: golden.NewChecker(corpus), golden: map[string]golden.Case{}, goldenBytes: map[string][]byte{}}
	files := map[string][]golden.Case{}
	var picked []golden.Case
	var pickedIDs []string
	for i := range set.Cases {
		c := &set.Cases[i]
		if c.Kind() != GraderRAG || c.Golden == "" {
			continue
		}
		gfile, gid, ok := strings.Cut(c.Golden, "#")
		if !ok || gfile == "" || gid == "" {
			errs = append(errs, &fieldError{File: file, Index: i, Case: c.ID, Field: "golden", Msg: fmt.Sprintf("%q, want \"<file>#<case_id>\"", c.Golden)})
			continue
		}
		gpath := set.resolve(gfile)
		cases, ok := files[gpath]
		if !ok {
			cases, err = loadGoldenWith(read, gpath)
			if err != nil {
				errs = append(errs, &fieldError{File: file, Index: i, Case: c.ID, Field: "golden", Msg: err.Error()})
				files[gpath] = nil
				continue
			}
			files[gpath] = cases
		}
		k := slices.IndexFunc(cases, func(gc golden.Case) bool { return gc.CaseID == gid })
		if k < 0 {
			if cases != nil {
				errs = append(errs, &fieldError{File: file, Index: i, Case: c.ID, Field: "golden", Msg: fmt.Sprintf("no case %q in %s", gid, filepath.Base(gpath))})
			}
			continue
		}
		gc := cases[k]
		if c.Prompt != "" && c.Prompt != gc.Question {
			errs = append(errs, &fieldError{File: file, Index: i, Case: c.ID, Field: "prompt", Msg: "differs from the golden question; leave it out for rag cases"})
		}
		picked = append(picked, gc)
		pickedIDs = append(pickedIDs, c.ID)
	}
	if len(errs) == 0 {
		// Validate derives each case's subjects from the corpus in place.
		if err := golden.Validate(picked, corpus); err != nil {
			errs = append(errs, &fieldError{File: file, Index: -1, Field: "cases", Msg: err.Error()})
		}
	}
	for i, gc := range picked {
		rs.golden[pickedIDs[i]] = gc
		rs.goldenBytes[pickedIDs[i]] = caseProvenance(gc, corpus)
	}
	return rs, errs
}

// OfflineRAG builds the pipeline for a set's corpus: the offline hashing
// embedder and, for the stub model, the offline extractive generator; for
// any other model the model itself generates from the retrieved context.
// It makes no network call for the stub.
func OfflineRAG(ctx context.Context, corpusPath string, model llm.Model) (RAGAsker, error) {
	if model == nil || model.ID() == llm.StubID {
		return rag.NewOffline(ctx, corpusPath, rag.Options{})
	}
	c, err := rag.LoadCorpus(corpusPath)
	if err != nil {
		return nil, err
	}
	return rag.Build(ctx, c, hashembed.New(0), modelGenerator{model}, rag.Options{})
}

// usage collects the tokens a model generator spent on one ask; gradeRAG
// puts it in the ask's context.
type usage struct{ in, out int64 }

type usageKey struct{}

// modelGenerator lets a Model generate rag answers from the pipeline's
// messages, adding its usage to the ask's *usage when there is one.
type modelGenerator struct{ m llm.Model }

func (g modelGenerator) Name() string { return g.m.ID() }

func (g modelGenerator) Generate(ctx context.Context, req rag.Request) (string, error) {
	var call llm.Call
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			call.System = m.Content
		default:
			call.Prompt = m.Content
		}
	}
	c, err := g.m.Complete(ctx, call)
	if u, ok := ctx.Value(usageKey{}).(*usage); ok {
		u.in += c.InputTokens
		u.out += c.OutputTokens
	}
	if err != nil {
		return "", err
	}
	if c.Text == "" {
		return "", fmt.Errorf("%s: %w: empty answer", g.m.ID(), llm.ErrMalformed)
	}
	return c.Text, nil
}

// gradeRAG asks the pipeline the golden question and runs every golden
// check of golden.Checker.Check (ranked-id prefix, collision siblings in
// context, expected value, must_contain, forbidden, source cited,
// abstention, qualifiers and their negation, subject, numeric attribution,
// citations known and retrieved, sibling cited, mixed script). The score is strict: 1 when every check
// passes, else 0 (an answer with the wrong source's number is wrong, not
// nine-tenths right); the checks say which failed.
func (r *Runner) gradeRAG(ctx context.Context, set *EvalSet, c *Case, s Score) Score {
	gc := set.rag.golden[c.ID]
	u := &usage{}
	rec, err := r.RAG.Ask(context.WithValue(ctx, usageKey{}, u), gc.Question)
	s.Tokens = u.in + u.out
	prices := r.Prices
	if prices == nil {
		prices = llm.DefaultPriceBook()
	}
	s.CostUSD, _ = prices.Cost(r.Model.ID(), u.in, u.out)
	if errors.Is(err, llm.ErrCostLimit) {
		s.Reason, s.Unmeasured = llm.ReasonCostLimit, llm.ReasonCostLimit
		return s
	}
	if err != nil {
		s.Reason, s.Unmeasured = ReasonRAGError, fmt.Sprintf("rag ask: %v", err)
		return s
	}
	s.Output = rec.Answer
	s.Value, s.Checks = set.GradeRAGRecord(c.ID, rec)
	if r.Semantic != nil && (r.SemanticAll || set.Semantic) {
		return r.gradeSemantic(ctx, rec, s)
	}
	return s
}

// gradeSemantic adds the faithfulness and answer_relevance checks to a
// graded rag case. The case passes (value 1) only when its golden checks
// and both semantic checks pass. A semantic check that could not be made
// (the judge call failed, its answer did not parse, the cost cap) makes
// the case unmeasured with that reason, never 0; the golden checks stay
// listed.
func (r *Runner) gradeSemantic(ctx context.Context, rec rag.Record, s Score) Score {
	retrieved := CitedContext(rec)
	faith, ferr := r.Semantic.Faithfulness(ctx, rec.Question, rec.Answer, retrieved)
	s.Tokens += faith.Tokens
	s.CostUSD += faith.CostUSD
	var rel grader.SemanticResult
	var rerr error
	if ferr == nil {
		rel, rerr = r.Semantic.AnswerRelevance(ctx, rec.Question, rec.Answer)
		s.Tokens += rel.Tokens
		s.CostUSD += rel.CostUSD
	}
	for _, err := range []error{ferr, rerr} {
		switch {
		case err == nil:
		case errors.Is(err, llm.ErrCostLimit):
			s.Unmeasured, s.Value = llm.ReasonCostLimit, 0
			return s
		default:
			s.Unmeasured, s.Value = err.Error(), 0
			return s
		}
	}
	s.Checks = append(s.Checks, faith.Check(), rel.Check())
	if !faith.Pass || !rel.Pass {
		s.Value = 0
	}
	return s
}

// CitedContext is the context a rag answer's faithfulness is judged
// against: the retrieved chunks the answer cites ("[id]"), with their
// metadata; every retrieved chunk when it cites none of them.
func CitedContext(rec rag.Record) string {
	var cited []rag.Chunk
	for _, ch := range rec.Chunks {
		if strings.Contains(rec.Answer, "["+ch.ID+"]") {
			cited = append(cited, ch)
		}
	}
	if len(cited) == 0 {
		cited = rec.Chunks
	}
	var b strings.Builder
	for _, ch := range cited {
		fmt.Fprintf(&b, "[%s]", ch.ID)
		keys := make([]string, 0, len(ch.Metadata))
		for k := range ch.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, ch.Metadata[k])
		}
		b.WriteString("\n" + ch.Text + "\n\n")
	}
	return b.String()
}

// RAGGolden returns the golden case of the set's rag case id, with its
// corpus-derived subjects; ok is false for an unknown id or a case of
// another grader.
func (s *EvalSet) RAGGolden(id string) (gc golden.Case, ok bool) {
	if s.rag == nil {
		return golden.Case{}, false
	}
	gc, ok = s.rag.golden[id]
	return gc, ok
}

// RAGCorpus returns the set's corpus and its resolved path; ok is false
// when the set has no rag case.
func (s *EvalSet) RAGCorpus() (c rag.Corpus, path string, ok bool) {
	if s.rag == nil {
		return rag.Corpus{}, "", false
	}
	return s.rag.corpus, s.rag.corpusPath, true
}

// GradeRAGRecord grades rec against the golden case of rag case id exactly
// as eval does: every check of golden.Checker.Check, value 1 when all pass,
// else 0 (strict: an answer with the wrong source's number is wrong, not
// nine-tenths right). An unknown id grades 0 with one failed check.
func (s *EvalSet) GradeRAGRecord(id string, rec rag.Record) (float64, []grader.Check) {
	gc, ok := s.RAGGolden(id)
	if !ok {
		return 0, []grader.Check{{Name: "golden", OK: false, Detail: fmt.Sprintf("no rag case %q in set %s", id, s.ID)}}
	}
	var checks []grader.Check
	for _, ch := range s.rag.checker.Check(gc, rec) {
		checks = append(checks, grader.Check{Name: ch.Name, OK: ch.OK, Detail: ch.Detail})
	}
	if len(checks) > 0 && !slices.ContainsFunc(checks, func(ch grader.Check) bool { return !ch.OK }) {
		return 1, checks
	}
	return 0, checks
}
