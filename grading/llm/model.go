package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verdryx/verdryx/provider"
)

// Model is anything that answers a prompt: the model under evaluation or a
// judge. Implementations must be safe for concurrent use; the runner calls
// Complete from several goroutines. Complete blocks until the answer
// arrives, ctx is done or the adapter's per-call timeout passes. Adapters
// never retry.
type Model interface {
	// ID names the model as stored with a run ("stub", a provider model id).
	ID() string
	Complete(ctx context.Context, req Call) (Completion, error)
}

// Call is one prompt to a model.
type Call struct {
	System string
	Prompt string
	// Tools are provider-shape tool definitions, passed verbatim.
	Tools []json.RawMessage
	// MaxTokens caps the answer; 0 means the adapter's default.
	MaxTokens int
	// Judge carries the structured judge inputs beside the prompt. Real
	// adapters send only System and Prompt; the stub reads Judge instead
	// of parsing its own prompt.
	Judge *JudgeInput
}

// JudgeInput is what an llm_judge call grades.
type JudgeInput struct {
	Rubric string
	Output string
}

// Completion is one answer.
type Completion struct {
	Text string
	// ToolCalls are the names of the tools the model called, in order.
	ToolCalls    []string
	InputTokens  int64
	OutputTokens int64
	// ResponseModel is the model that answered as the provider named it;
	// "" when it did not say.
	ResponseModel string
}

// Errors an adapter returns, wrapped with detail; test with errors.Is.
var (
	ErrStatus    = errors.New("grading: provider answered an error status")
	ErrMalformed = errors.New("grading: malformed provider answer")
	ErrNoKey     = errors.New("grading: no api key in the environment")
)

// Stub is the deterministic, network-free model and judge. It is the
// default everywhere and is labelled "stub" in every stored run.
//
// As a model it answers with Canned[prompt] when present, else echoes the
// prompt; it calls no tools unless Canned says so. As a judge (a Call
// with Judge set) it answers the fraction of the rubric's content words
// (four letters or more) that appear in the output, formatted "%.4f": a
// lexical stand-in, not a judgement.
// Stub is safe for concurrent use.
type Stub struct {
	Canned map[string]Completion
}

var _ Model = (*Stub)(nil)

// StubID is the model id of the stub.
const StubID = "stub"

// ID returns "stub".
func (s *Stub) ID() string { return StubID }

// Complete answers deterministically; it never fails unless ctx is done.
// Like every adapter it records a GenAI chat span under the span in ctx
// (provider "verdryx.stub", model "stub"), with the token counts of the
// completion: those of a Canned answer, else 0 (the stub reports no usage
// and none is estimated).
func (s *Stub) Complete(ctx context.Context, req Call) (c Completion, err error) {
	ctx, span := provider.Start(ctx, provider.Call{Operation: provider.OpChat, Provider: provider.Stub, Model: StubID})
	defer func() {
		span.End(provider.Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, ResponseModel: StubID}, err)
	}()
	if err := ctx.Err(); err != nil {
		return Completion{}, err
	}
	if req.Judge != nil {
		return Completion{Text: fmt.Sprintf("%.4f", rubricCoverage(req.Judge.Rubric, req.Judge.Output))}, nil
	}
	if c, ok := s.Canned[req.Prompt]; ok {
		return c, nil
	}
	return Completion{Text: req.Prompt}, nil
}

// rubricCoverage is the share of distinct rubric words (>= 4 letters) found
// in output, case-insensitively. An empty rubric covers nothing.
func rubricCoverage(rubric, output string) float64 {
	words := map[string]bool{}
	for _, w := range contentWords(rubric) {
		words[w] = true
	}
	if len(words) == 0 {
		return 0
	}
	have := map[string]bool{}
	for _, w := range contentWords(output) {
		have[w] = true
	}
	n := 0
	for w := range words {
		if have[w] {
			n++
		}
	}
	return float64(n) / float64(len(words))
}

// contentWords splits s into lower-cased runs of letters and digits of at
// least four runes.
func contentWords(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	}) {
		if utf8.RuneCountInString(w) >= 4 {
			out = append(out, w)
		}
	}
	return out
}
