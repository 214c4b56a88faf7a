package grading

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Grader names accepted in a case's "grader" field.
const (
	GraderExact      = "exact"
	GraderRegex      = "regex"
	GraderOutcomeTag = "outcome_tag"
	GraderToolTrace  = "tool_trace"
	GraderLLMJudge   = "llm_judge"
	GraderRAG        = "rag"
)

// graderNames lists the graders in the order they are documented.
func graderNames() []string {
	return []string{GraderExact, GraderRegex, GraderOutcomeTag, GraderToolTrace, GraderLLMJudge, GraderRAG, GraderTyped}
}

// Case is one eval case as written in an eval set file.
type Case struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt,omitempty"`
	// Expected is the literal (exact), the pattern (regex) or the human
	// label (typed: "true"/"false" for a noul template, a decimal level
	// for a score template). Nil when absent.
	Expected *string `json:"expected,omitempty"`
	Rubric   string  `json:"rubric,omitempty"`
	// Grader is one of the Grader* names; empty means exact.
	Grader string `json:"grader,omitempty"`
	// Tools are provider-shape tool definitions passed to the model
	// verbatim (tool_trace only).
	Tools []json.RawMessage `json:"tools,omitempty"`
	// ExpectedTools is the ordered list of tool names a correct answer
	// calls (tool_trace only). Nil when absent; empty means "call no tools".
	ExpectedTools *[]string `json:"expected_tools,omitempty"`
	// Golden names the golden case a rag case is checked against, as
	// "<file>#<case_id>" with file relative to the eval set.
	Golden string `json:"golden,omitempty"`

	re *regexp.Regexp
}

// Kind returns the case's grader, defaulting to exact.
func (c *Case) Kind() string {
	if c.Grader == "" {
		return GraderExact
	}
	return c.Grader
}

// EvalSet is a validated eval set. Build one with LoadEvalSet or
// ParseEvalSet; the zero value is not usable.
type EvalSet struct {
	ID    string `json:"id"`
	Cases []Case `json:"cases"`
	// OutcomeScores overrides the outcome_tag table for this set.
	OutcomeScores map[string]float64 `json:"outcome_scores,omitempty"`
	// Corpus is the path (relative to the eval set file) of the RAG
	// corpus; required when a case uses rag.
	Corpus string `json:"corpus,omitempty"`
	// Semantic adds the faithfulness and answer_relevance checks to every
	// rag case (as eval --semantic does); it is part of the set's digest.
	Semantic bool `json:"semantic,omitempty"`

	// Path is where the set was read from ("" for inline bytes).
	Path string `json:"-"`
	// Digest is the content digest of the set: "sha256:" + hex over the
	// set id, each case's digest and the set-level settings. Whitespace and
	// key order in the file do not change it.
	Digest string `json:"-"`
	// CaseDigests maps a case id to the digest of that case (for rag: its
	// golden case and the corpus chunks it references), so changed cases
	// can be named.
	CaseDigests map[string]string `json:"-"`

	rag *ragSet
}

// ErrBadRequest marks a request that can never succeed as sent (bad eval
// set, unknown model, unknown baseline, changed set): do not retry it.
var ErrBadRequest = errors.New("grading: bad eval request")

// fieldError is one problem in an eval set: where it is and what is wrong.
type fieldError struct {
	File  string // the file, or "<inline>"
	Index int    // case index, -1 for the set itself
	Case  string // case id, may be empty
	Field string
	Msg   string
}

func (e *fieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Index >= 0 {
		fmt.Fprintf(&b, ": case #%d", e.Index)
		if e.Case != "" {
			fmt.Fprintf(&b, " %q", e.Case)
		}
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// LoadEvalSet reads and validates the eval set at path. All problems are
// reported at once (errors.Join of *fieldError), each naming the file, the
// case and the field.
func LoadEvalSet(path string) (*EvalSet, error) {
	return LoadEvalSetWith(path, nil)
}

// ParseEvalSet validates raw as an eval set. path names it in errors and
// anchors relative corpus/golden paths; "" means inline bytes, whose
// relative paths resolve against the working directory.
func ParseEvalSet(raw []byte, path string) (*EvalSet, error) {
	return ParseEvalSetWith(raw, path, nil)
}

// ParseEvalSetWith is ParseEvalSet reading the corpus and golden files the
// set references through read (nil reads them with os.ReadFile).
func ParseEvalSetWith(raw []byte, path string, read ReadFileFunc) (*EvalSet, error) {
	file := path
	if file == "" {
		file = "<inline>"
	}
	// Decode the set with its cases raw first, so an unknown field in a
	// case names that case; every unknown field and wrong type is
	// reported, not only the first.
	var top struct {
		EvalSet
		Cases []json.RawMessage `json:"cases"`
	}
	var errs []error
	add := func(i int, id, field, format string, args ...any) {
		errs = append(errs, &fieldError{File: file, Index: i, Case: id, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if !decodeLenient(raw, &top, func(field, msg string) { add(-1, "", field, "%s", msg) }) {
		return nil, errors.Join(errs...)
	}
	set := top.EvalSet
	set.Path = path
	set.Cases = make([]Case, len(top.Cases))
	badCase := make([]bool, len(top.Cases))
	for i, rc := range top.Cases {
		var probe struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(rc, &probe)
		n := len(errs)
		decodeLenient(rc, &set.Cases[i], func(field, msg string) { add(i, probe.ID, field, "%s", msg) })
		badCase[i] = len(errs) > n
	}
	if strings.TrimSpace(set.ID) == "" {
		add(-1, "", "id", "required: a stable id for the set")
	}
	if len(set.Cases) == 0 {
		add(-1, "", "cases", "at least one case is required")
	}
	for tag, v := range set.OutcomeScores {
		if math.IsNaN(v) || v < 0 || v > 1 {
			add(-1, "", "outcome_scores", "score of %q is %v, want a number in [0, 1]", tag, v)
		}
	}
	seen := map[string]int{}
	needRAG := false
	for i := range set.Cases {
		c := &set.Cases[i]
		if strings.TrimSpace(c.ID) == "" {
			add(i, "", "id", "required")
		} else if j, dup := seen[c.ID]; dup {
			add(i, c.ID, "id", "duplicate case id (first used by case #%d)", j)
		} else {
			seen[c.ID] = i
		}
		if badCase[i] {
			// Its decode problems are reported; checks of its half-decoded
			// fields would only echo them.
			continue
		}
		kind := c.Kind()
		known := false
		for _, g := range graderNames() {
			known = known || g == kind
		}
		if !known {
			add(i, c.ID, "grader", "unknown grader %q (want one of %s)", c.Grader, strings.Join(graderNames(), ", "))
			continue
		}
		if kind != GraderToolTrace {
			if c.Tools != nil {
				add(i, c.ID, "tools", "only a tool_trace case takes tools (grader is %s)", kind)
			}
			if c.ExpectedTools != nil {
				add(i, c.ID, "expected_tools", "only a tool_trace case takes expected_tools (grader is %s)", kind)
			}
		}
		if kind != GraderRAG && c.Golden != "" {
			add(i, c.ID, "golden", "only a rag case takes golden (grader is %s)", kind)
		}
		switch kind {
		case GraderExact:
			if c.Expected == nil {
				add(i, c.ID, "expected", "required for grader exact")
			}
		case GraderRegex:
			if c.Expected == nil {
				add(i, c.ID, "expected", "required for grader regex")
			} else if re, err := regexp.Compile(*c.Expected); err != nil {
				add(i, c.ID, "expected", "bad regex: %v", err)
			} else {
				c.re = re
			}
		case GraderOutcomeTag:
			if strings.TrimSpace(c.Prompt) == "" {
				add(i, c.ID, "prompt", "required for grader outcome_tag: the prompt is the recorded outcome tag")
			}
		case GraderToolTrace:
			if c.Tools == nil {
				add(i, c.ID, "tools", "required for grader tool_trace")
			}
			for j, t := range c.Tools {
				var probe struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(t, &probe); err != nil || probe.Name == "" {
					add(i, c.ID, "tools", "tool #%d has no name", j)
				}
			}
			if c.ExpectedTools == nil {
				add(i, c.ID, "expected_tools", "required for grader tool_trace ([] means: call no tools)")
			}
			if strings.TrimSpace(c.Prompt) == "" {
				add(i, c.ID, "prompt", "required for grader tool_trace")
			}
		case GraderLLMJudge:
			if strings.TrimSpace(c.Rubric) == "" {
				add(i, c.ID, "rubric", "required for grader llm_judge")
			}
			if strings.TrimSpace(c.Prompt) == "" {
				add(i, c.ID, "prompt", "required for grader llm_judge")
			}
		case GraderTyped:
			if strings.TrimSpace(c.Prompt) == "" {
				add(i, c.ID, "prompt", "required for grader typed: it is the task typryx is asked about")
			}
			if c.Expected != nil && !labelRE.MatchString(*c.Expected) {
				add(i, c.ID, "expected", "a typed label is \"true\" or \"false\" (noul) or a decimal level (score), have %q", *c.Expected)
			}
			if c.Rubric != "" {
				add(i, c.ID, "rubric", "a typed case takes no rubric: typryx's template is the question")
			}
		case GraderRAG:
			needRAG = true
			if c.Golden == "" {
				add(i, c.ID, "golden", "required for grader rag: \"<golden file>#<case_id>\"")
			}
		}
	}
	if needRAG {
		if set.Corpus == "" {
			add(-1, "", "corpus", "required when a case uses grader rag")
		}
		if set.Corpus != "" {
			rs, ragErrs := loadRAGSet(&set, file, read)
			errs = append(errs, ragErrs...)
			set.rag = rs
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	set.digest()
	return &set, nil
}

// resolve returns p relative to the eval set file's directory.
func (s *EvalSet) resolve(p string) string {
	if filepath.IsAbs(p) || s.Path == "" {
		return p
	}
	return filepath.Join(filepath.Dir(s.Path), p)
}

// digest fills Digest and CaseDigests.
func (s *EvalSet) digest() {
	s.CaseDigests = make(map[string]string, len(s.Cases))
	h := sha256.New()
	fmt.Fprintf(h, "evalset\x00%s\x00", s.ID)
	for i := range s.Cases {
		c := &s.Cases[i]
		b, _ := json.Marshal(c) // a decoded Case always marshals
		ch := sha256.New()
		ch.Write(compactJSON(b))
		if c.Kind() == GraderRAG && s.rag != nil {
			ch.Write([]byte{0})
			ch.Write(s.rag.goldenBytes[c.ID])
		}
		d := "sha256:" + hex.EncodeToString(ch.Sum(nil))
		s.CaseDigests[c.ID] = d
		fmt.Fprintf(h, "%s=%s\x00", c.ID, d)
	}
	tags := make([]string, 0, len(s.OutcomeScores))
	for t := range s.OutcomeScores {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	for _, t := range tags {
		fmt.Fprintf(h, "outcome:%s=%v\x00", t, s.OutcomeScores[t])
	}
	if s.rag != nil {
		fmt.Fprintf(h, "corpus=%s\x00", s.rag.corpusDigest)
	}
	if s.Semantic {
		fmt.Fprintf(h, "semantic=true\x00")
	}
	s.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ChangedCases compares two case-digest maps and returns the ids of cases
// added, removed or changed, sorted.
func ChangedCases(a, b map[string]string) []string {
	var out []string
	for id, d := range a {
		if b[id] != d {
			out = append(out, id)
		}
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// describeJSONError adds a line number to a JSON syntax or type error.
func describeJSONError(raw []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(raw)) {
		return err.Error()
	}
	line := 1 + bytes.Count(raw[:off], []byte{'\n'})
	return fmt.Sprintf("line %d: %v", line, err)
}
