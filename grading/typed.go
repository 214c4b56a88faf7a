package grading

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/provider/typryx"
)

// GraderTyped is the typed grader: typryx answers a typed question about
// the model's output with a probability.
const GraderTyped = "typed"

// TypedLabelSource is the source of every label a typed case posts.
const TypedLabelSource = "verdryx:evalset"

// ErrTypedService marks a run that typryx failed: it refused a call (any
// non-200 status, named with typryx's code), could not be reached, or
// answered a body that does not decode. Nothing of such a run is saved; it
// is an outside service failing, not a verdict. Test the cause with
// errors.As(err, **typryx.RefusalError) and errors.Is(err,
// typryx.ErrUnreachable).
var ErrTypedService = errors.New("grading: typryx failed the run")

// Typed configures the typed grader: the typryx client and the template
// asked. Enabled only when the caller sets evalrun.Deps.Typed (the CLI: --typed-url)
// or calls Runner.UseTyped.
type Typed struct {
	Client *typryx.Client
	// Template is the template id asked; "" means typryx.DefaultTemplate.
	Template string
}

// templateID returns the template asked.
func (t *Typed) templateID() string {
	if t.Template == "" {
		return typryx.DefaultTemplate
	}
	return t.Template
}

// TypedVerdict is typryx's answer to one typed case, kept with its score
// and in the store. An unanswered verdict scores nothing: its Score is
// unmeasured with the reason, counted apart from other unmeasured cases.
type TypedVerdict struct {
	AnswerID        string `json:"answer_id"`
	Template        string `json:"template"`
	TemplateVersion string `json:"template_version,omitempty"`
	Type            string `json:"type"`
	Unanswered      bool   `json:"unanswered,omitempty"`
	Reason          string `json:"reason,omitempty"`
	// Probabilities are typryx's distribution (nil when unanswered).
	Probabilities map[string]float64 `json:"probabilities,omitempty"`
	Backend       string             `json:"backend,omitempty"`
	Model         string             `json:"model,omitempty"`
	// Label is the case's human label (its expected), "" when it has none.
	// LabelPosted is true once typryx recorded it for AnswerID; LabelError
	// says why posting failed (the score is the same either way).
	Label       string `json:"label,omitempty"`
	LabelPosted bool   `json:"label_posted,omitempty"`
	LabelError  string `json:"label_error,omitempty"`
}

// typedPlan is the typed grader resolved for one run: the template as
// typryx lists it.
type typedPlan struct {
	typed  *Typed
	tmpl   typryx.Template
	levels int // score templates: the number of levels (keys "0".."n-1")
}

// labelRE is the syntax of a typed case's label: a noul "true"/"false" or
// a score level in decimal.
var labelRE = regexp.MustCompile(`^(true|false|0|[1-9][0-9]{0,8})$`)

// HasTyped reports whether set has a typed case: grading one needs a
// Typed (Runner.UseTyped); without it the case is left unmeasured.
func (s *EvalSet) HasTyped() bool {
	return slices.ContainsFunc(s.Cases, func(c Case) bool { return c.Kind() == GraderTyped })
}

// UseTyped has r grade set's typed cases with t: it lists t's template
// from typryx and checks every typed case's label against its type (see
// resolve), asking no question. Errors wrap ErrBadRequest (a choice
// template, a score template with fewer than two levels, a label that does
// not fit) or ErrTypedService (typryx failed); r is then unchanged. Call it
// before Run, not while r runs.
func (r *Runner) UseTyped(ctx context.Context, t *Typed, set *EvalSet) error {
	p, err := t.resolve(ctx, set)
	if err != nil {
		return err
	}
	r.typed = p
	return nil
}

// resolve fetches the template from typryx and checks every typed case's
// label against its type. It sends no question. A choice template, a score
// template with fewer than two levels and a label that does not fit wrap
// ErrBadRequest; typryx failing wraps ErrTypedService.
func (t *Typed) resolve(ctx context.Context, set *EvalSet) (*typedPlan, error) {
	id := t.templateID()
	tmpl, err := t.Client.Template(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTypedService, err)
	}
	p := &typedPlan{typed: t, tmpl: tmpl}
	switch tmpl.Type {
	case typryx.TypeChoice:
		return nil, fmt.Errorf("%w: typed template %s is a choice: its options have no order, so it cannot be a score (pick a noul or score template with --typed-template)", ErrBadRequest, id)
	case typryx.TypeScore:
		p.levels = len(tmpl.Levels)
		if p.levels < 2 {
			return nil, fmt.Errorf("%w: typed template %s is a score with %d levels: at least 2 are needed to scale it to [0, 1]", ErrBadRequest, id, p.levels)
		}
	}
	file := set.Path
	if file == "" {
		file = "<inline>"
	}
	var errs []error
	for i := range set.Cases {
		c := &set.Cases[i]
		if c.Kind() != GraderTyped || c.Expected == nil {
			continue
		}
		if _, err := p.truth(*c.Expected); err != nil {
			errs = append(errs, &fieldError{File: file, Index: i, Case: c.ID, Field: "expected", Msg: err.Error()})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, errors.Join(errs...))
	}
	return p, nil
}

// truth converts a label to the value posted as an outcome: a bool for a
// noul template, an integer level for a score template.
func (p *typedPlan) truth(label string) (any, error) {
	switch p.tmpl.Type {
	case typryx.TypeNoul:
		switch label {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("label %q does not fit template %s (noul): want \"true\" or \"false\"", label, p.tmpl.ID)
	case typryx.TypeScore:
		n, err := strconv.Atoi(label)
		if err != nil || !labelRE.MatchString(label) || n < 0 || n >= p.levels {
			return nil, fmt.Errorf("label %q does not fit template %s (score): want a level 0..%d in decimal", label, p.tmpl.ID, p.levels-1)
		}
		return n, nil
	}
	return nil, fmt.Errorf("template %s (%s) takes no label", p.tmpl.ID, p.tmpl.Type)
}

// config is the typed grader's entry in a run's provenance.
func (p *typedPlan) config() map[string]any {
	cfg := map[string]any{
		"template":         p.tmpl.ID,
		"template_version": string(p.tmpl.Version),
		"type":             p.tmpl.Type,
		"unanswered":       "counted apart with typryx's answer_id and reason, never scored",
		"labels":           "posted to /v1/outcome with source " + TypedLabelSource,
	}
	switch p.tmpl.Type {
	case typryx.TypeNoul:
		cfg["score"] = "p(true)"
	case typryx.TypeScore:
		cfg["score"] = "probability-weighted mean level / top level"
		cfg["levels"] = p.levels
	}
	return cfg
}

// grade asks typryx about one case's output and turns the answer into the
// case's score: a noul template's p(true), a score template's expected
// level over the top level. An unanswered verdict makes the case
// unmeasured, counted apart. A refusal, no answer or an answer that does
// not fit the template is returned as an error wrapping ErrTypedService:
// the run fails.
func (p *typedPlan) grade(ctx context.Context, c *Case, output, runID string, s Score) (Score, error) {
	ans, err := p.typed.Client.Ask(ctx, typryx.AskRequest{
		Template: p.tmpl.ID,
		State:    map[string]any{"task": c.Prompt, "final_answer": output},
		RunID:    runID,
	})
	if err != nil {
		return s, fmt.Errorf("%w: case %s: %w", ErrTypedService, c.ID, err)
	}
	if ans.Type != p.tmpl.Type {
		return s, fmt.Errorf("%w: case %s: typryx answered a %s for template %s, listed as %s", ErrTypedService, c.ID, ans.Type, p.tmpl.ID, p.tmpl.Type)
	}
	v := TypedVerdict{
		AnswerID: ans.AnswerID, Template: ans.Template, TemplateVersion: ans.TemplateVersion, Type: ans.Type,
		Unanswered: ans.Unanswered, Reason: ans.Reason, Probabilities: ans.Probabilities,
		Backend: ans.Backend, Model: ans.Model,
	}
	if c.Expected != nil {
		v.Label = *c.Expected
	}
	s.Typed = &v
	s.CostUSD += ans.CostUSD
	if ans.Unanswered {
		s.Reason, s.Unmeasured = ans.Reason, "typryx unanswered: "+ans.Reason
		if s.Reason == "" {
			s.Reason = ReasonUnanswered
		}
		s.Value = 0
		return s, nil
	}
	var detail string
	switch ans.Type {
	case typryx.TypeNoul:
		s.Value = ans.Probabilities["true"]
		detail = fmt.Sprintf("p(true) %.3f", s.Value)
	case typryx.TypeScore:
		if len(ans.Probabilities) != p.levels {
			return s, fmt.Errorf("%w: case %s: typryx answered %d levels, template %s lists %d", ErrTypedService, c.ID, len(ans.Probabilities), p.tmpl.ID, p.levels)
		}
		mean := 0.0
		for k, pr := range ans.Probabilities {
			lvl, _ := strconv.Atoi(k) // the client checked the keys are 0..n-1
			mean += float64(lvl) * pr
		}
		s.Value = min(max(mean/float64(p.levels-1), 0), 1)
		detail = fmt.Sprintf("expected level %.3f of %d", mean, p.levels-1)
	}
	s.Checks = []grader.Check{{Name: GraderTyped, OK: s.Value >= 0.5,
		Detail: fmt.Sprintf("typryx %s v%s (%s): %s, answer %s", ans.Template, ans.TemplateVersion, ans.Type, detail, ans.AnswerID)}}
	return s, nil
}

// postLabels posts the label of every answered, labelled typed case of
// run to /v1/outcome for its answer id, in case order, after the whole
// run was graded (a run that fails posts nothing). A failed post is
// recorded on the case's verdict and logged; the score does not change.
func (p *typedPlan) postLabels(ctx context.Context, run *Run, logf func(caseID string, err error)) {
	for i := range run.Scores {
		sc := &run.Scores[i]
		v := sc.Typed
		if v == nil || v.Unanswered || v.Label == "" {
			continue
		}
		truth, err := p.truth(v.Label)
		if err == nil {
			_, err = p.typed.Client.Outcome(ctx, typryx.OutcomeRequest{AnswerID: v.AnswerID, Truth: truth, Source: TypedLabelSource})
		}
		if err != nil {
			v.LabelError = err.Error()
			logf(sc.CaseID, err)
			continue
		}
		v.LabelPosted = true
	}
}

// TypedSummary counts a run's typed cases: those asked (answered or not),
// the unanswered ones with their reasons, and the labels posted.
type TypedSummary struct {
	Template        string `json:"template"`
	TemplateVersion string `json:"template_version,omitempty"`
	Asked           int    `json:"asked"`
	Answered        int    `json:"answered"`
	Unanswered      int    `json:"unanswered"`
	// Reasons counts the unanswered cases by typryx's reason.
	Reasons map[string]int `json:"reasons,omitempty"`
	// UnansweredCases lists each unanswered case with typryx's answer id.
	UnansweredCases []TypedUnanswered `json:"unanswered_cases,omitempty"`
	LabelsPosted    int               `json:"labels_posted"`
	LabelsFailed    int               `json:"labels_failed"`
}

// TypedUnanswered is one case typryx did not answer.
type TypedUnanswered struct {
	CaseID   string `json:"case_id"`
	AnswerID string `json:"answer_id"`
	Reason   string `json:"reason"`
}

// summarizeTyped returns the typed summary of scores; nil when no typed
// case was asked.
func summarizeTyped(scores []Score) *TypedSummary {
	var ts *TypedSummary
	for _, s := range scores {
		v := s.Typed
		if v == nil {
			continue
		}
		if ts == nil {
			ts = &TypedSummary{Template: v.Template, TemplateVersion: v.TemplateVersion}
		}
		ts.Asked++
		switch {
		case v.Unanswered:
			ts.Unanswered++
			if ts.Reasons == nil {
				ts.Reasons = map[string]int{}
			}
			ts.Reasons[v.Reason]++
			ts.UnansweredCases = append(ts.UnansweredCases, TypedUnanswered{CaseID: s.CaseID, AnswerID: v.AnswerID, Reason: v.Reason})
		default:
			ts.Answered++
		}
		switch {
		case v.LabelPosted:
			ts.LabelsPosted++
		case v.LabelError != "":
			ts.LabelsFailed++
		}
	}
	return ts
}

// ReasonsText is "reason: count, ..." in reason order.
func (t *TypedSummary) ReasonsText() string {
	out := ""
	for i, r := range slices.Sorted(maps.Keys(t.Reasons)) {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s: %d", r, t.Reasons[r])
	}
	return out
}
