package grading

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/rag"
)

// RAGAsker answers a rag case's question (rag.Pipeline implements it).
type RAGAsker interface {
	Ask(ctx context.Context, question string) (rag.Record, error)
	// Generation is the index generation id answers come from.
	Generation() string
}

var _ RAGAsker = (*rag.Pipeline)(nil)

// ragSet is the resolved rag part of an eval set.
type ragSet struct {
	corpus       rag.Corpus
	corpusDigest string
	golden       map[string]rag.GoldenCase // by eval case id
	goldenBytes  map[string][]byte         // canonical JSON of each, for digests
}

// loadRAGSet loads the corpus and every golden case the set's rag cases
// name ("<file>#<case_id>", relative to the set), and checks the cases
// against the corpus. Errors are *FieldError naming file, case and field.
func loadRAGSet(set *EvalSet, file string, read ReadFileFunc) (*ragSet, []error) {
	var errs []error
	corpus, err := loadCorpusWith(read, set.resolve(set.Corpus))
	if err != nil {
		return nil, []error{&FieldError{File: file, Index: -1, Field: "corpus", Msg: err.Error()}}
	}
	rs := &ragSet{corpus: corpus, corpusDigest: corpus.Digest(), golden: map[string]rag.GoldenCase{}, goldenBytes: map[string][]byte{}}
	files := map[string][]rag.GoldenCase{}
	var picked []rag.GoldenCase
	for i := range set.Cases {
		c := &set.Cases[i]
		if c.Kind() != GraderRAG || c.Golden == "" {
			continue
		}
		gfile, gid, ok := strings.Cut(c.Golden, "#")
		if !ok || gfile == "" || gid == "" {
			errs = append(errs, &FieldError{File: file, Index: i, Case: c.ID, Field: "golden", Msg: fmt.Sprintf("%q, want \"<file>#<case_id>\"", c.Golden)})
			continue
		}
		gpath := set.resolve(gfile)
		cases, ok := files[gpath]
		if !ok {
			cases, err = loadGoldenWith(read, gpath)
			if err != nil {
				errs = append(errs, &FieldError{File: file, Index: i, Case: c.ID, Field: "golden", Msg: err.Error()})
				files[gpath] = nil
				continue
			}
			files[gpath] = cases
		}
		k := slices.IndexFunc(cases, func(gc rag.GoldenCase) bool { return gc.CaseID == gid })
		if k < 0 {
			if cases != nil {
				errs = append(errs, &FieldError{File: file, Index: i, Case: c.ID, Field: "golden", Msg: fmt.Sprintf("no case %q in %s", gid, filepath.Base(gpath))})
			}
			continue
		}
		gc := cases[k]
		if c.Prompt != "" && c.Prompt != gc.Question {
			errs = append(errs, &FieldError{File: file, Index: i, Case: c.ID, Field: "prompt", Msg: "differs from the golden question; leave it out for rag cases"})
		}
		b, _ := json.Marshal(gc) // a decoded golden case always marshals
		rs.golden[c.ID] = gc
		rs.goldenBytes[c.ID] = b
		picked = append(picked, gc)
	}
	if len(errs) == 0 {
		if err := rag.Validate(picked, corpus); err != nil {
			errs = append(errs, &FieldError{File: file, Index: -1, Field: "cases", Msg: err.Error()})
		}
	}
	return rs, errs
}

// OfflineRAG builds the pipeline for a set's corpus: the offline hashing
// embedder and, for the stub model, the offline extractive generator; for
// any other model the model itself generates from the retrieved context.
// It makes no network call for the stub.
func OfflineRAG(ctx context.Context, corpusPath string, model Model) (RAGAsker, error) {
	if model == nil || model.ID() == StubID {
		return rag.NewOffline(ctx, corpusPath, rag.Options{})
	}
	c, err := rag.LoadCorpus(corpusPath)
	if err != nil {
		return nil, err
	}
	return rag.Build(ctx, c, index.NewHashEmbedder(0), modelGenerator{model}, rag.Options{})
}

// usage collects the tokens a model generator spent on one ask; gradeRAG
// puts it in the ask's context.
type usage struct{ in, out int64 }

type usageKey struct{}

// modelGenerator lets a Model generate rag answers from the pipeline's
// messages, adding its usage to the ask's *usage when there is one.
type modelGenerator struct{ m Model }

func (g modelGenerator) Name() string { return g.m.ID() }

func (g modelGenerator) Generate(ctx context.Context, req rag.Request) (string, error) {
	var call Call
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
		return "", fmt.Errorf("%s: %w: empty answer", g.m.ID(), ErrMalformed)
	}
	return c.Text, nil
}

// gradeRAG asks the pipeline the golden question and runs every golden
// check of rag.CheckGolden (ranked ids, collision siblings in context,
// expected value, must_contain, forbidden, source cited, abstention,
// qualifiers, numeric grounding). The score is strict: 1 when every check
// passes, else 0 (an answer with the wrong source's number is wrong, not
// nine-tenths right); the checks say which failed.
func (r *Runner) gradeRAG(ctx context.Context, set *EvalSet, c *Case, s Score) Score {
	gc := set.rag.golden[c.ID]
	u := &usage{}
	rec, err := r.RAG.Ask(context.WithValue(ctx, usageKey{}, u), gc.Question)
	s.Tokens = u.in + u.out
	prices := r.Prices
	if prices == nil {
		prices = DefaultPriceBook()
	}
	s.CostUSD, _ = prices.Cost(r.Model.ID(), u.in, u.out)
	if err != nil {
		s.Unmeasured = fmt.Sprintf("rag ask: %v", err)
		return s
	}
	s.Output = rec.Answer
	for _, ch := range rag.CheckGolden(gc, rec) {
		s.Checks = append(s.Checks, Check{Name: ch.Name, OK: ch.OK, Detail: ch.Detail})
	}
	s.Value = 0
	if len(s.Checks) > 0 && !slices.ContainsFunc(s.Checks, func(ch Check) bool { return !ch.OK }) {
		s.Value = 1
	}
	return s
}
