package rag

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/provider"
	"github.com/verdryx/verdryx/rag/internal/ragtext"
)

// Request is what a generator receives for one question.
type Request struct {
	Question string
	// Chunks are the retrieved chunks, best first.
	Chunks []Chunk
	// Messages are the exact generation messages.
	Messages []Message
	// SourceField and SubjectField are the corpus's citation schema.
	SourceField  string
	SubjectField string
}

// Generator produces an answer. Implementations must be safe for concurrent
// use and return the answer verbatim (the record keeps it unchanged).
type Generator interface {
	// Name identifies the generator and its model.
	Name() string
	// Generate answers req; it may block on the network and honours ctx.
	Generate(ctx context.Context, req Request) (string, error)
}

// DefaultSupportThreshold is the share of the question's focus terms a
// chunk must contain for the extractive generator to answer from it.
const DefaultSupportThreshold = 0.5

// Extractive is the offline deterministic generator. It answers only with
// sentences copied from one retrieved chunk, followed by the chunk's
// citation [id] and its source identifier, or returns exactly Abstention.
//
// It picks the chunk like this: if the question names the source identifier
// of some retrieved chunks, only those are candidates; of the candidates,
// those whose subject terms all occur in the question are preferred. The
// question's focus terms are its content words (function words dropped,
// light suffix stemming) minus the chunk's subject and source terms; the
// chunk's support is the share of focus terms found in its text. Below the
// threshold, or with no focus terms at all, it abstains: a chunk about the
// right subject that does not speak to what was asked is no support. It
// then copies, verbatim and in order, the sentences of that chunk sharing a
// focus or subject term with the question.
//
// Its failure modes are real: synonyms that share no word stem with the
// evidence lower support, and a question whose focus words happen to occur
// in an unrelated sentence of the subject's chunk is answered.
type Extractive struct {
	threshold float64
}

var _ Generator = (*Extractive)(nil)

// NewExtractive returns the extractive generator with the given support
// threshold in (0, 1]; zero or less means DefaultSupportThreshold.
func NewExtractive(threshold float64) *Extractive {
	if threshold <= 0 || threshold > 1 {
		threshold = DefaultSupportThreshold
	}
	return &Extractive{threshold: threshold}
}

// Name returns "offline-extractive".
func (g *Extractive) Name() string { return "offline-extractive" }

// Generate answers from req.Chunks or abstains. It never fails. It
// records a GenAI chat span under the span in ctx (provider
// "verdryx.stub", model "offline-extractive", 0 tokens: nothing is
// counted or estimated), so an offline eval shows its model calls too.
func (g *Extractive) Generate(ctx context.Context, req Request) (string, error) {
	_, span := provider.Start(ctx, provider.Call{Operation: provider.OpChat, Provider: provider.Stub, Model: g.Name()})
	answer := g.generate(req)
	span.End(provider.Usage{ResponseModel: g.Name()}, nil)
	return answer, nil
}

func (g *Extractive) generate(req Request) string {
	q := termSet(req.Question)
	if len(q) == 0 || len(req.Chunks) == 0 {
		return Abstention
	}
	cands := req.Chunks
	var named []Chunk
	for _, c := range cands {
		if src := ragtext.LabelText(c.Metadata[req.SourceField]); src != "" && mentions(req.Question, src) {
			named = append(named, c)
		}
	}
	if len(named) > 0 {
		cands = named
	}
	if req.SubjectField != "" {
		var subj []Chunk
		for _, c := range cands {
			st := termSet(ragtext.LabelText(c.Metadata[req.SubjectField]))
			if len(st) > 0 && containsAll(q, st) {
				subj = append(subj, c)
			}
		}
		if len(subj) > 0 {
			cands = subj
		}
	}
	best, bestSupport := -1, 0.0
	var bestFocus []string
	for i, c := range cands {
		focus := focusTerms(q, c, req)
		if len(focus) == 0 {
			continue
		}
		text := termSet(c.Text)
		matched := 0
		for _, f := range focus {
			if matchesAny(f, text) {
				matched++
			}
		}
		if s := float64(matched) / float64(len(focus)); s > bestSupport {
			best, bestSupport, bestFocus = i, s, focus
		}
	}
	if best < 0 || bestSupport < g.threshold {
		return Abstention
	}
	c := cands[best]
	subject := termSet(ragtext.LabelText(c.Metadata[req.SubjectField]))
	var kept []string
	for _, s := range ragtext.SplitSentences(c.Text) {
		st := termSet(s)
		hit := false
		for _, f := range bestFocus {
			hit = hit || matchesAny(f, st)
		}
		for _, f := range subject {
			hit = hit || matchesAny(f, st)
		}
		if hit {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		kept = []string{strings.TrimSpace(c.Text)}
	}
	answer := strings.Join(kept, " ") + " " + Cite(c.ID)
	if src := ragtext.LabelText(c.Metadata[req.SourceField]); src != "" {
		answer += fmt.Sprintf(" (%s: %s)", req.SourceField, src)
	}
	return answer
}

// focusTerms are the question terms that are not the chunk's subject or
// source: what the question asks about the subject.
func focusTerms(q []string, c Chunk, req Request) []string {
	skip := termSet(ragtext.LabelText(c.Metadata[req.SubjectField]) + " " + ragtext.LabelText(c.Metadata[req.SourceField]))
	var out []string
	for _, t := range q {
		if !matchesAny(t, skip) {
			out = append(out, t)
		}
	}
	return out
}

// termSet returns the distinct stemmed content terms of s, in order.
func termSet(s string) []string {
	var out []string
	for _, w := range index.Tokenize(s) {
		if index.IsStopword(w) {
			continue
		}
		if t := stem(w); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// stem strips one common English inflection, keeping at least four letters.
func stem(w string) string {
	for _, suf := range []string{"ings", "ing", "ed", "es", "s"} {
		if len(w)-len(suf) >= 4 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// termMatch reports whether two stemmed terms are the same word: equal, or
// one a prefix of the other of at least four letters (prescrib/prescribe).
func termMatch(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 4 && strings.HasPrefix(b, a)
}

func matchesAny(t string, set []string) bool {
	return slices.ContainsFunc(set, func(s string) bool { return termMatch(t, s) })
}

func containsAll(set, sub []string) bool {
	for _, t := range sub {
		if !matchesAny(t, set) {
			return false
		}
	}
	return true
}

// mentions reports whether text contains id as a whole token: not preceded
// or followed by a letter, digit or hyphen.
func mentions(text, id string) bool {
	for off := 0; ; {
		i := strings.Index(text[off:], id)
		if i < 0 {
			return false
		}
		start, end := off+i, off+i+len(id)
		if (start == 0 || !isIDRune(text[start-1])) && (end == len(text) || !isIDRune(text[end])) {
			return true
		}
		off = start + 1
	}
}

func isIDRune(b byte) bool {
	return b == '-' || b == '_' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}
