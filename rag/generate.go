package rag

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/index/hashembed"
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
	// terms are the corpus's term statistics, when the pipeline has them:
	// the extractive generator weighs focus terms by their rarity.
	terms *termStats
}

// termStats counts, per term (termsOf), the corpus entries that hold it:
// in df, or in a pipeline's BM25 statistics (table). Read-only once built.
type termStats struct {
	df    map[string]int
	table *bm25
	n     int
}

// newTermStats counts the terms of texts.
func newTermStats(texts []string) *termStats {
	s := &termStats{df: map[string]int{}, n: len(texts)}
	seen := map[string]bool{}
	for _, t := range texts {
		clear(seen)
		for _, w := range termsOf(t) {
			if !seen[w] {
				seen[w] = true
				s.df[w]++
			}
		}
	}
	return s
}

// weight is a term's inverse document frequency, ln(1 + n/(1 + df)), df
// being the most entries any term it matches (termMatch) is in: a term no
// entry holds weighs most, one every entry holds least.
func (s *termStats) weight(t string) float64 {
	if s.table != nil {
		return math.Log(1 + float64(s.n)/float64(1+s.table.maxMatchDF(t)))
	}
	df, ok := s.df[t]
	if !ok {
		for k, d := range s.df {
			if d > df && termMatch(t, k) {
				df = d
			}
		}
	}
	return math.Log(1 + float64(s.n)/float64(1+df))
}

// Generator produces an answer. Implementations must be safe for concurrent
// use and return the answer verbatim (the record keeps it unchanged).
type Generator interface {
	// Name identifies the generator and its model.
	Name() string
	// Generate answers req; it may block on the network and honours ctx.
	Generate(ctx context.Context, req Request) (string, error)
}

// defaultSupportThreshold is the share of the weight of the question's
// focus terms a chunk must contain for the extractive generator to answer
// from it (see Extractive).
const defaultSupportThreshold = 0.3

// Extractive is the offline deterministic generator. It answers only with
// sentences copied from one retrieved chunk, followed by the chunk's
// citation [id] and its source identifier, or returns exactly Abstention.
//
// It picks the chunk like this: if the question names the source identifier
// of some retrieved chunks, only those are candidates; of the candidates,
// those whose subject terms all occur in the question are preferred. The
// question's focus terms are its content words (function words dropped,
// light suffix stemming) minus the chunk's subject and source terms; the
// chunk's support is the share of their weight found in its text, a term
// weighing its rarity in the corpus, ln(1 + N/(1 + df)) over the N entries
// of which df hold it (over the retrieved chunks when the request carries
// no corpus; a pipeline's requests carry theirs). A word every entry uses
// counts little, one no entry uses counts most. Below the
// threshold, or with no focus terms at all, it abstains: a chunk about the
// right subject that does not speak to what was asked is no support. It
// then copies, verbatim and in order, the sentences of that chunk sharing a
// focus or subject term with the question.
//
// A question asking for an amount ("how long", "how many", "when", "what
// time", or naming a minimum, maximum, limit, deadline, cost, price,
// amount or number) is answered only from a chunk stating a number, and
// light words ("get", "each", "kind", ...) are no focus terms. A stated
// number matches an amount noun. When the only focus terms left are the
// words after "how" (how long is <subject>?), the number is the support and
// the sentences stating a number are the answer.
//
// Its failure modes are real: synonyms that share no word stem with the
// evidence lower support, and a question whose focus words happen to occur
// in an unrelated sentence of the subject's chunk is answered.
type Extractive struct {
	threshold float64
}

var _ Generator = (*Extractive)(nil)

// NewExtractive returns the extractive generator with the given support
// threshold in (0, 1]; zero or less means defaultSupportThreshold.
func NewExtractive(threshold float64) *Extractive {
	if threshold <= 0 || threshold > 1 {
		threshold = defaultSupportThreshold
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
	q, cues, amount := questionTerms(req.Question)
	nouns := map[string]bool{} // amount nouns: a stated number matches them
	for _, w := range hashembed.Tokenize(req.Question) {
		if amountNouns[w] {
			nouns[stem(w)] = true
		}
	}
	if (len(q) == 0 && !amount) || len(req.Chunks) == 0 {
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
	stats := req.terms
	if stats == nil {
		texts := make([]string, len(req.Chunks))
		for i, c := range req.Chunks {
			texts[i] = c.Text
		}
		stats = newTermStats(texts)
	}
	weights := map[string]float64{}
	weight := func(t string) float64 {
		w, ok := weights[t]
		if !ok {
			w = stats.weight(t)
			weights[t] = w
		}
		return w
	}
	best, bestSupport := -1, 0.0
	var bestFocus []string
	for i, c := range cands {
		focus := focusTerms(q, c, req)
		if amount && !hasDigit(c.Text) {
			continue // asked for an amount, states none
		}
		if len(focus) == 0 && !amount {
			continue
		}
		text := termSet(c.Text)
		matched, total, onlyCues := 0.0, 0.0, true
		for _, f := range focus {
			w := weight(f)
			total += w
			if matchesAny(f, text) || (nouns[f] && hasDigit(c.Text)) {
				matched += w
			}
			onlyCues = onlyCues && slices.Contains(cues, f)
		}
		s := 1.0 // only the amount of the subject was asked, and it is stated
		if !onlyCues {
			s = matched / total
		}
		if s > bestSupport {
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
		// A question asking only for an amount is answered by the
		// sentences stating one.
		if amount && containsAll(cues, bestFocus) {
			hit = hit || hasDigit(s)
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

// amountCues are the words after "how" that ask for a quantity (how long,
// how many, ...), and the nouns that name one (the minimum, the deadline):
// no evidence repeats them, it states a number.
var amountCues = map[string]bool{
	"long": true, "many": true, "much": true, "far": true, "soon": true, "often": true,
	"quickly": true, "old": true, "big": true, "large": true, "high": true, "late": true,
	"early": true, "frequently": true,
}

// amountNouns name a quantity wherever they stand in a question; a chunk
// stating a number matches them.
var amountNouns = map[string]bool{
	"minimum": true, "maximum": true, "limit": true, "deadline": true, "cost": true,
	"price": true, "amount": true, "number": true,
}

// lightWords are question words that carry no topic and that evidence
// rarely repeats (what a reader does to the fact, not the fact).
var lightWords = map[string]bool{
	"get": true, "gets": true, "got": true, "need": true, "needs": true, "happen": true,
	"happens": true, "kind": true, "type": true, "each": true, "every": true, "also": true,
	"tell": true, "know": true, "m": true, "ll": true, "ve": true, "s": true, "t": true,
}

// questionTerms returns the question's content terms (termSet, minus
// light words) and those of them that are amount cues: a cue word after
// "how" (how long, how many), an amount noun (the minimum, the deadline)
// or "time" after "what"; amount also reports "when". A question asking
// for an amount is answered only from a chunk stating a number, and when
// its cues are all that is left to match (how long is <subject>?), the
// number is the match.
func questionTerms(question string) (terms, cues []string, amount bool) {
	words := hashembed.Tokenize(question)
	for i, w := range words {
		if hashembed.IsStopword(w) || lightWords[w] {
			amount = amount || w == "when"
			continue
		}
		t := stem(w)
		cue := amountNouns[w] || (amountCues[w] && i > 0 && words[i-1] == "how") || (w == "time" && i > 0 && words[i-1] == "what")
		if cue {
			amount = true
			if !slices.Contains(cues, t) {
				cues = append(cues, t)
			}
		}
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	}
	return terms, cues, amount
}

// hasDigit reports whether s holds a decimal digit.
func hasDigit(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
}

// termSet returns the distinct stemmed content terms of s, in order.
func termSet(s string) []string {
	var out []string
	for _, w := range hashembed.Tokenize(s) {
		if hashembed.IsStopword(w) {
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
