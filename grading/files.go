package grading

import (
	"context"
	"fmt"
	"os"

	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
	"github.com/verdryx/verdryx/redact"
)

// ReadFileFunc reads the whole file name. evalrun.Deps.ReadFile takes one so that a
// caller serving untrusted requests confines every file an eval set names
// (confine.Reader.ReadFile); nil means os.ReadFile, the CLI's behaviour.
type ReadFileFunc func(name string) ([]byte, error)

func (f ReadFileFunc) read(name string) ([]byte, error) {
	if f == nil {
		return os.ReadFile(name)
	}
	return f(name)
}

// LoadEvalSetWith is LoadEvalSet reading the set and every file it
// references through read (nil: os.ReadFile).
func LoadEvalSetWith(path string, read ReadFileFunc) (*EvalSet, error) {
	raw, err := read.read(path)
	if err != nil {
		return nil, fmt.Errorf("read eval set: %w", err)
	}
	return ParseEvalSetWith(raw, path, read)
}

// loadCorpusWith mirrors rag.LoadCorpus, reading through read.
func loadCorpusWith(read ReadFileFunc, path string) (rag.Corpus, error) {
	b, err := read.read(path)
	if err != nil {
		return rag.Corpus{}, fmt.Errorf("read corpus: %w", err)
	}
	c, err := rag.ParseCorpus(b)
	if err != nil {
		return rag.Corpus{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// loadGoldenWith mirrors golden.Load, reading through read.
func loadGoldenWith(read ReadFileFunc, path string) ([]golden.Case, error) {
	b, err := read.read(path)
	if err != nil {
		return nil, fmt.Errorf("read golden cases: %w", err)
	}
	cases, err := golden.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// RAGBuilder returns the default builder of the pipeline that answers the
// set's rag cases (the one evalrun.Deps.RAG == nil means): OfflineRAG, which reads
// the corpus path again, when read is nil; otherwise a builder that uses
// the corpus already read (and confined) with the set, opening nothing. It
// must be called only on a set with rag cases (RAGCorpus ok).
func (s *EvalSet) RAGBuilder(read ReadFileFunc) func(ctx context.Context, corpusPath string, model llm.Model) (RAGAsker, error) {
	return s.rag.offlineBuilder(read)
}

// offlineBuilder is the default RAG builder: OfflineRAG, which reads the
// corpus path again, unless read is set, in which case the corpus already
// read (and confined) with the set is used and nothing is reopened.
func (rs *ragSet) offlineBuilder(read ReadFileFunc) func(ctx context.Context, corpusPath string, model llm.Model) (RAGAsker, error) {
	if read == nil {
		return OfflineRAG
	}
	return func(ctx context.Context, _ string, model llm.Model) (RAGAsker, error) {
		if model == nil || model.ID() == llm.StubID {
			return rag.Build(ctx, rs.corpus, hashembed.New(0), rag.NewExtractive(0), rag.Options{})
		}
		return rag.Build(ctx, rs.corpus, hashembed.New(0), modelGenerator{model}, rag.Options{})
	}
}

// RedactRun removes secrets (redact.FromEnv: URL userinfo, echoed
// Authorization/x-api-key/X-Typryx-Key values, the provider keys in the
// environment; and with extra, the typryx key) from what a run stores and
// prints: unmeasured reasons, outputs, check details and typed verdicts'
// label errors.
func RedactRun(run *Run, extra ...*redact.Redactor) {
	rds := append([]*redact.Redactor{redact.FromEnv(nil)}, extra...)
	for _, rd := range rds {
		for i := range run.Scores {
			s := &run.Scores[i]
			s.Unmeasured = rd.String(s.Unmeasured)
			s.Output = rd.String(s.Output)
			for j := range s.Checks {
				s.Checks[j].Detail = rd.String(s.Checks[j].Detail)
			}
			if s.Typed != nil {
				s.Typed.LabelError = rd.String(s.Typed.LabelError)
			}
		}
	}
}
