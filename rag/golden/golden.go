package golden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/rag"
)

// Case is one golden question with its expectations. Literal checks
// against it compare match keys (see Key: NFKC, case folding, confusable
// skeleton), values compare as quantities, and abstention is byte-for-byte.
type Case struct {
	CaseID   string `json:"case_id"`
	Question string `json:"question"`
	// ExpectedRetrievedID is the chunk that must rank first (and be cited).
	ExpectedRetrievedID string `json:"expected_retrieved_id,omitempty"`
	// ExpectedRankedIDs is a prefix of the retrieved ids: the ranks listed
	// must match in order, more results may follow. Required unless
	// ExpectAbstention; list only ranks the corpus facts decide.
	ExpectedRankedIDs []string `json:"expected_ranked_ids,omitempty"`
	// CollisionSiblingIDs are the trap chunks that collide with the
	// expected one (same fact of another source, or a near-synonym
	// subject); at least one must be in the context.
	CollisionSiblingIDs []string `json:"collision_sibling_ids,omitempty"`
	// ExpectedValue is the number-with-unit (or phrase) the answer states.
	ExpectedValue string `json:"expected_value,omitempty"`
	// ForbiddenValues are the siblings' values that must not leak.
	ForbiddenValues []string `json:"forbidden_values,omitempty"`
	// ExpectedSourceID is the source identifier the answer must repeat
	// (JSON "expected_source_id", or "expected_grimoire_id").
	ExpectedSourceID string `json:"expected_source_id,omitempty"`
	// RequiredQualifiers are conditions the answer must keep.
	RequiredQualifiers []string `json:"required_qualifiers,omitempty"`
	MustContain        []string `json:"must_contain,omitempty"`
	Forbidden          []string `json:"forbidden,omitempty"`
	ExpectedAnswer     string   `json:"expected_answer,omitempty"`
	ExpectAbstention   bool     `json:"expect_abstention"`
	// AllowedSubjects are collision-sibling subjects the answer may name
	// (for a question that compares the two); any other sibling subject in
	// the answer fails sibling_subject_absent.
	AllowedSubjects []string `json:"allowed_subjects,omitempty"`

	// Subject is the expected chunk's subject and SiblingSubjects the
	// distinct subjects of the collision siblings that differ from it,
	// both derived from the corpus by Validate (never read from the file,
	// so a set cannot forget them).
	Subject         string   `json:"-"`
	SiblingSubjects []string `json:"-"`
}

// deriveSubjects fills gc's corpus-derived subjects.
func deriveSubjects(gc Case, c rag.Corpus) Case {
	gc.Subject, gc.SiblingSubjects = "", nil
	if gc.ExpectAbstention || c.SubjectField == "" {
		return gc
	}
	e, ok := c.Entry(gc.ExpectedRetrievedID)
	if !ok {
		return gc
	}
	gc.Subject = c.Subject(e)
	for _, id := range gc.CollisionSiblingIDs {
		sib, ok := c.Entry(id)
		if !ok {
			continue
		}
		s := c.Subject(sib)
		if s == "" || Key(s) == Key(gc.Subject) || slices.Contains(gc.SiblingSubjects, s) {
			continue
		}
		gc.SiblingSubjects = append(gc.SiblingSubjects, s)
	}
	return gc
}

// Load reads a golden file ({"id": ..., "cases": [...]}). Errors name
// the file, the case and the field. It checks each case on its own; Validate
// checks the cases against a corpus.
func Load(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read golden cases: %w", err)
	}
	cases, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// Parse decodes and checks golden-file JSON.
func Parse(b []byte) ([]Case, error) {
	var raw struct {
		ID    string            `json:"id"`
		Cases []json.RawMessage `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode golden file: %w", err)
	}
	if len(raw.Cases) == 0 {
		return nil, errors.New(`field "cases": no cases`)
	}
	var out []Case
	seen := map[string]int{}
	for i, rb := range raw.Cases {
		gc, err := parseCase(rb)
		if err != nil {
			return nil, fmt.Errorf("cases[%d]%s: %w", i, caseSuffix(gc.CaseID), err)
		}
		if j, ok := seen[gc.CaseID]; ok {
			return nil, fmt.Errorf(`cases[%d] (case_id %q): field "case_id": repeats cases[%d]`, i, gc.CaseID, j)
		}
		seen[gc.CaseID] = i
		out = append(out, gc)
	}
	return out, nil
}

func caseSuffix(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf(" (case_id %q)", id)
}

func parseCase(b []byte) (Case, error) {
	var raw struct {
		Case
		ExpectedGrimoireID string `json:"expected_grimoire_id"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		var id struct {
			CaseID string `json:"case_id"`
		}
		_ = json.Unmarshal(b, &id)
		return Case{CaseID: id.CaseID}, fmt.Errorf("decode case: %w", err)
	}
	gc := raw.Case
	if raw.ExpectedGrimoireID != "" {
		if gc.ExpectedSourceID != "" && gc.ExpectedSourceID != raw.ExpectedGrimoireID {
			return gc, errors.New(`fields "expected_source_id" and "expected_grimoire_id" disagree`)
		}
		gc.ExpectedSourceID = raw.ExpectedGrimoireID
	}
	field := func(name, msg string) error { return fmt.Errorf("field %q: %s", name, msg) }
	switch {
	case strings.TrimSpace(gc.CaseID) == "":
		return gc, field("case_id", "must be a non-blank string")
	case strings.TrimSpace(gc.Question) == "":
		return gc, field("question", "must be a non-blank string")
	case strings.Contains(gc.Question, DraftMarker):
		return gc, field("question", fmt.Sprintf("still the placeholder of verdryx golden draft (%s): write the question the case's chunk answers", DraftMarker))
	case len(gc.ExpectedRankedIDs) == 0 && !gc.ExpectAbstention:
		return gc, field("expected_ranked_ids", "must list at least the expected rank-1 id (a prefix of the ranking)")
	case gc.ExpectedRetrievedID != "" && len(gc.ExpectedRankedIDs) > 0 && gc.ExpectedRetrievedID != gc.ExpectedRankedIDs[0]:
		return gc, field("expected_retrieved_id", fmt.Sprintf("%q is not expected_ranked_ids[0] %q", gc.ExpectedRetrievedID, gc.ExpectedRankedIDs[0]))
	}
	for _, list := range []struct {
		name string
		v    []string
	}{
		{"expected_ranked_ids", gc.ExpectedRankedIDs}, {"collision_sibling_ids", gc.CollisionSiblingIDs},
		{"forbidden_values", gc.ForbiddenValues}, {"required_qualifiers", gc.RequiredQualifiers},
		{"must_contain", gc.MustContain}, {"forbidden", gc.Forbidden}, {"allowed_subjects", gc.AllowedSubjects},
	} {
		for j, s := range list.v {
			if s == "" {
				return gc, fmt.Errorf("field %q[%d]: empty string", list.name, j)
			}
		}
	}
	for j, id := range gc.ExpectedRankedIDs {
		if slices.Index(gc.ExpectedRankedIDs, id) != j {
			return gc, fmt.Errorf("field %q[%d]: %q repeats an earlier rank", "expected_ranked_ids", j, id)
		}
	}
	if gc.ExpectAbstention {
		if gc.ExpectedAnswer != rag.Abstention {
			return gc, field("expected_answer", fmt.Sprintf("an abstention case expects exactly %q", rag.Abstention))
		}
		if len(gc.MustContain) > 0 && !slices.Equal(gc.MustContain, []string{rag.Abstention}) {
			return gc, field("must_contain", "an abstention case may only require the abstention string")
		}
		return gc, nil
	}
	switch {
	case gc.ExpectedRetrievedID == "":
		return gc, field("expected_retrieved_id", "required unless expect_abstention")
	case gc.ExpectedSourceID == "":
		return gc, field("expected_source_id", "required unless expect_abstention")
	}
	// must_contain holds the value, the qualifiers, the source id and the
	// citation; a fixture that drops one of them has been softened.
	want := append([]string{gc.ExpectedSourceID, rag.Cite(gc.ExpectedRetrievedID)}, gc.RequiredQualifiers...)
	if gc.ExpectedValue != "" {
		want = append(want, gc.ExpectedValue)
	}
	for _, w := range want {
		if !slices.Contains(gc.MustContain, w) {
			return gc, field("must_contain", fmt.Sprintf("must include %q", w))
		}
	}
	for _, v := range gc.ForbiddenValues {
		if !slices.Contains(gc.Forbidden, v) {
			return gc, field("forbidden", fmt.Sprintf("must include forbidden value %q", v))
		}
	}
	return gc, nil
}

// Validate checks cases against corpus: every referenced id exists, no
// collision sibling is the expected chunk, the expected value and each
// required qualifier occur in the expected chunk's text (so they are
// evidence, not the fixture agreeing with itself), each forbidden value
// occurs in some other chunk's text (so it is a real trap), the expected
// source id is the expected chunk's source, and each allowed subject is a
// collision sibling's subject. Last, the checks must pass their own
// evidence (CheckEvidence: the expected chunk's text with its citation and
// source id passes every check of its case), so a pair that would fail
// correct answers is refused before it grades anything. It fills each
// case's derived Subject and SiblingSubjects in place.
func Validate(cases []Case, c rag.Corpus) error {
	for i := range cases {
		cases[i] = deriveSubjects(cases[i], c)
		gc := cases[i]
		where := fmt.Sprintf("cases[%d] (case_id %q)", i, gc.CaseID)
		for _, list := range []struct {
			name string
			ids  []string
		}{{"expected_ranked_ids", gc.ExpectedRankedIDs}, {"collision_sibling_ids", gc.CollisionSiblingIDs}} {
			for j, id := range list.ids {
				if _, ok := c.Entry(id); !ok {
					return fmt.Errorf("%s: field %q[%d]: id %q is not in corpus %q", where, list.name, j, id, c.ID)
				}
			}
		}
		for j, id := range gc.CollisionSiblingIDs {
			if id == gc.ExpectedRetrievedID {
				return fmt.Errorf("%s: field %q[%d]: %q is the expected chunk, not a sibling", where, "collision_sibling_ids", j, id)
			}
		}
		for j, s := range gc.AllowedSubjects {
			if !slices.ContainsFunc(gc.SiblingSubjects, func(x string) bool { return Key(x) == Key(s) }) {
				return fmt.Errorf("%s: field %q[%d]: %q is no collision sibling's subject (siblings: %q)", where, "allowed_subjects", j, s, gc.SiblingSubjects)
			}
		}
		if gc.ExpectAbstention {
			continue
		}
		e, _ := c.Entry(gc.ExpectedRetrievedID)
		if src := c.Source(e); src != gc.ExpectedSourceID {
			return fmt.Errorf("%s: field %q: %q, but chunk %q has source %q", where, "expected_source_id", gc.ExpectedSourceID, e.ID, src)
		}
		evidence := append([]string{}, gc.RequiredQualifiers...)
		if gc.ExpectedValue != "" {
			evidence = append(evidence, gc.ExpectedValue)
		}
		for _, s := range evidence {
			if !strings.Contains(e.Text, s) {
				return fmt.Errorf("%s: %q does not occur in the text of chunk %q", where, s, e.ID)
			}
		}
		for j, v := range gc.ForbiddenValues {
			found := false
			for _, o := range c.Entries {
				if o.ID != e.ID && strings.Contains(o.Text, v) {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("%s: field %q[%d]: %q occurs in no other chunk, so it is no trap", where, "forbidden_values", j, v)
			}
		}
	}
	return CheckEvidence(cases, c)
}
