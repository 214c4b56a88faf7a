package golden

// What golden's own tests use beyond the production API: the checks of one
// case in one call, their verdict, the numbers an answer leaves
// ungrounded, and an eval set resolved to its corpus and cases.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/rag/internal/ragtext"
)

// CheckGolden grades rec against gc with the checks of NewChecker(c).Check.
func CheckGolden(gc Case, rec rag.Record, c rag.Corpus) []Check {
	return NewChecker(c).Check(gc, rec)
}

// Passed reports whether every check is OK.
func Passed(checks []Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// UngroundedNumbers returns each quantity of rec.Answer (as written,
// folded) that no chunk cited in its sentence, or in the citation that
// closes it, holds. Quantities are compared as values with the default
// unit table; the chunks are the record's. An answer with numbers and no
// citation has every number ungrounded.
func UngroundedNumbers(rec rag.Record) []string {
	c := rag.Corpus{}
	for _, ch := range rec.Chunks {
		c.Entries = append(c.Entries, rag.Entry{ID: ch.ID, Text: ch.Text, Metadata: ch.Metadata})
	}
	k := NewChecker(c)
	return k.ungrounded(k.analyse(rec.Answer), rec)
}

// LoadEvalSet reads an eval-set file of the form documented in the package
// comment, loads the corpus and golden files it names (relative to the
// eval-set file) and validates the cases against the corpus.
func LoadEvalSet(path string) (EvalSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return EvalSet{}, fmt.Errorf("read eval set: %w", err)
	}
	var raw struct {
		ID     string `json:"id"`
		Corpus string `json:"corpus"`
		Cases  []struct {
			ID     string `json:"id"`
			Grader string `json:"grader"`
			Golden string `json:"golden"`
		} `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return EvalSet{}, fmt.Errorf("%s: decode eval set: %w", path, err)
	}
	if raw.ID == "" {
		return EvalSet{}, fmt.Errorf(`%s: field "id": required`, path)
	}
	if raw.Corpus == "" {
		return EvalSet{}, fmt.Errorf(`%s: field "corpus": required`, path)
	}
	if len(raw.Cases) == 0 {
		return EvalSet{}, fmt.Errorf(`%s: field "cases": no cases`, path)
	}
	dir := filepath.Dir(path)
	es := EvalSet{ID: raw.ID, CorpusPath: filepath.Join(dir, raw.Corpus)}
	if es.Corpus, err = rag.LoadCorpus(es.CorpusPath); err != nil {
		return EvalSet{}, err
	}
	goldens := map[string][]Case{}
	for i, rc := range raw.Cases {
		where := fmt.Sprintf("%s: cases[%d]%s", path, i, ragtext.IDSuffix(rc.ID))
		if rc.Grader != "rag" {
			return EvalSet{}, fmt.Errorf(`%s: field "grader": %q, want "rag"`, where, rc.Grader)
		}
		file, caseID, ok := strings.Cut(rc.Golden, "#")
		if !ok || file == "" || caseID == "" {
			return EvalSet{}, fmt.Errorf(`%s: field "golden": %q, want "<file>#<case_id>"`, where, rc.Golden)
		}
		if rc.ID != caseID {
			return EvalSet{}, fmt.Errorf(`%s: field "id": %q differs from the golden case %q`, where, rc.ID, caseID)
		}
		gpath := filepath.Join(dir, file)
		cases, ok := goldens[gpath]
		if !ok {
			if cases, err = Load(gpath); err != nil {
				return EvalSet{}, err
			}
			goldens[gpath] = cases
		}
		k := slices.IndexFunc(cases, func(gc Case) bool { return gc.CaseID == caseID })
		if k < 0 {
			return EvalSet{}, fmt.Errorf(`%s: field "golden": no case %q in %s`, where, caseID, gpath)
		}
		es.Cases = append(es.Cases, cases[k])
	}
	if err := Validate(es.Cases, es.Corpus); err != nil {
		return EvalSet{}, fmt.Errorf("%s: %w", path, err)
	}
	return es, nil
}

// EvalSet is a resolved RAG eval set: its corpus and its golden cases in
// eval-set order.
type EvalSet struct {
	ID         string
	CorpusPath string
	Corpus     rag.Corpus
	Cases      []Case
}
