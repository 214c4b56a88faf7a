package mutation

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/golden"
)

// MutantResult is one graded mutant of a golden case's correct answer.
type MutantResult struct {
	CaseID       string   `json:"case_id"`
	Mutation     string   `json:"mutation"`
	Target       string   `json:"target"`
	Killed       bool     `json:"killed"`
	FailedChecks []string `json:"failed_checks"`
	Answer       string   `json:"answer"`
}

// ControlResult is one graded control: a rephrasing of the case's
// reference answer that must pass.
type ControlResult struct {
	CaseID       string   `json:"case_id"`
	Control      string   `json:"control"`
	Target       string   `json:"target"`
	Passed       bool     `json:"passed"`
	FailedChecks []string `json:"failed_checks"`
	Answer       string   `json:"answer"`
}

// Report is the outcome of Run (verdryx mutate --json). Sensitivity is
// killed/mutants and Specificity passed/controls, both in [0, 1] (0 when
// there is nothing to measure, which fails the run).
type Report struct {
	EvalSet         string                    `json:"eval_set"`
	Cases           int                       `json:"cases"`
	Mutants         int                       `json:"mutants"`
	Killed          int                       `json:"killed"`
	Survived        int                       `json:"survived"`
	Sensitivity     float64                   `json:"sensitivity"`
	Controls        int                       `json:"controls"`
	ControlsPassed  int                       `json:"controls_passed"`
	ControlsFailed  int                       `json:"controls_failed"`
	Specificity     float64                   `json:"specificity"`
	BaseFailures    []MutantResult            `json:"base_failures"`
	Classes         map[string]map[string]int `json:"classes"`
	ControlClasses  map[string]map[string]int `json:"control_classes"`
	Survivors       []MutantResult            `json:"survivors"`
	FailingControls []ControlResult           `json:"failing_controls"`
	Results         []MutantResult            `json:"results"`
	ControlResults  []ControlResult           `json:"control_results"`
}

// Options configure RunWith.
type Options struct {
	// Semantic, when set, grades every answer (unmutated, mutant,
	// control) with the faithfulness and answer_relevance checks too, as
	// eval --semantic does, and adds the class ClassUnsupportedClaim.
	Semantic *grader.Semantic
}

// ClassUnsupportedClaim is the mutation that appends to the correct answer
// a sentence its context does not support; only the semantic checks can
// kill it.
const ClassUnsupportedClaim = "unsupported claim appended"

// unsupportedClaim is the sentence ClassUnsupportedClaim appends: about
// nothing a corpus of sources is likely to say.
const unsupportedClaim = "The keepers also repaint the lantern gallery vermilion every Michaelmas."

// RunWith grades every golden case of set unmutated, under each
// named mutation and under each control of its reference answer, answered
// (retrieval and context) by p over corpus, with the graders eval uses. A
// case that fails unmutated is listed in BaseFailures and not mutated. The
// report's slices are never nil. An error of p names the case; the report
// so far is returned with it.
func RunWith(ctx context.Context, set *grading.EvalSet, corpus rag.Corpus, p grading.RAGAsker, opts Options) (Report, error) {
	grade := func(id string, rec rag.Record) (float64, []grader.Check) {
		v, checks := set.GradeRAGRecord(id, rec)
		if opts.Semantic == nil {
			return v, checks
		}
		f, err := opts.Semantic.Faithfulness(ctx, rec.Question, rec.Answer, grading.CitedContext(rec))
		if err != nil {
			return 0, append(checks, grader.Check{Name: grader.CheckFaithfulness, Detail: "unmeasured: " + err.Error()})
		}
		r, err := opts.Semantic.AnswerRelevance(ctx, rec.Question, rec.Answer)
		if err != nil {
			return 0, append(checks, f.Check(), grader.Check{Name: grader.CheckAnswerRelevance, Detail: "unmeasured: " + err.Error()})
		}
		if !f.Pass || !r.Pass {
			v = 0
		}
		return v, append(checks, f.Check(), r.Check())
	}
	rep := Report{EvalSet: set.ID, Classes: map[string]map[string]int{}, ControlClasses: map[string]map[string]int{},
		BaseFailures: []MutantResult{}, Survivors: []MutantResult{}, FailingControls: []ControlResult{}}
	for _, c := range set.Cases {
		gc, ok := set.RAGGolden(c.ID)
		if !ok {
			continue
		}
		rep.Cases++
		rec, err := p.Ask(ctx, gc.Question)
		if err != nil {
			return rep, fmt.Errorf("case %s: %w", c.ID, err)
		}
		if v, checks := grade(c.ID, rec); v < 1 {
			rep.BaseFailures = append(rep.BaseFailures, MutantResult{CaseID: c.ID, Mutation: "(unmutated)", FailedChecks: failedNames(checks), Answer: rec.Answer})
			continue
		}
		mutants := golden.Mutations(gc, rec, corpus)
		if opts.Semantic != nil && !gc.ExpectAbstention {
			mutants = append(mutants, golden.Mutation{Name: ClassUnsupportedClaim, Target: unsupportedClaim, Answer: rec.Answer + " " + unsupportedClaim})
		}
		for _, m := range mutants {
			mutated := rec
			mutated.Answer = m.Answer
			v, checks := grade(c.ID, mutated)
			r := MutantResult{CaseID: c.ID, Mutation: m.Name, Target: m.Target, Killed: v < 1, FailedChecks: failedNames(checks), Answer: m.Answer}
			rep.Results = append(rep.Results, r)
			rep.Mutants++
			cls := rep.Classes[m.Name]
			if cls == nil {
				cls = map[string]int{"mutants": 0, "killed": 0}
				rep.Classes[m.Name] = cls
			}
			cls["mutants"]++
			if r.Killed {
				rep.Killed++
				cls["killed"]++
			} else {
				rep.Survived++
				rep.Survivors = append(rep.Survivors, r)
			}
		}
		for _, ctl := range golden.Controls(gc, corpus) {
			controlled := rec
			controlled.Answer = ctl.Answer
			v, checks := grade(c.ID, controlled)
			r := ControlResult{CaseID: c.ID, Control: ctl.Name, Target: ctl.Target, Passed: v == 1, FailedChecks: failedNames(checks), Answer: ctl.Answer}
			rep.ControlResults = append(rep.ControlResults, r)
			rep.Controls++
			cls := rep.ControlClasses[ctl.Name]
			if cls == nil {
				cls = map[string]int{"controls": 0, "passed": 0}
				rep.ControlClasses[ctl.Name] = cls
			}
			cls["controls"]++
			if r.Passed {
				rep.ControlsPassed++
				cls["passed"]++
			} else {
				rep.ControlsFailed++
				rep.FailingControls = append(rep.FailingControls, r)
			}
		}
	}
	if rep.Mutants > 0 {
		rep.Sensitivity = float64(rep.Killed) / float64(rep.Mutants)
	}
	if rep.Controls > 0 {
		rep.Specificity = float64(rep.ControlsPassed) / float64(rep.Controls)
	}
	return rep, nil
}

// InlineRAGSet builds an eval set ("mutate:" + the golden file's name) with
// one rag case per case of the golden file at goldenPath, over the corpus
// at corpusPath. Errors name the file they come from.
func InlineRAGSet(corpusPath, goldenPath string) (*grading.EvalSet, error) {
	cases, err := golden.Load(goldenPath)
	if err != nil {
		return nil, err
	}
	cabs, err := filepath.Abs(corpusPath)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", corpusPath, err)
	}
	gabs, err := filepath.Abs(goldenPath)
	if err != nil {
		return nil, fmt.Errorf("golden %s: %w", goldenPath, err)
	}
	type rc struct {
		ID     string `json:"id"`
		Grader string `json:"grader"`
		Golden string `json:"golden"`
	}
	raw := struct {
		ID     string `json:"id"`
		Corpus string `json:"corpus"`
		Cases  []rc   `json:"cases"`
	}{ID: "mutate:" + filepath.Base(goldenPath), Corpus: cabs}
	for _, gc := range cases {
		raw.Cases = append(raw.Cases, rc{ID: gc.CaseID, Grader: grading.GraderRAG, Golden: gabs + "#" + gc.CaseID})
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("build eval set: %w", err)
	}
	return grading.ParseEvalSet(b, "")
}

func failedNames(checks []grader.Check) []string {
	names := []string{}
	for _, c := range checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return names
}
