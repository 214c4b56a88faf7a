package rag

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/verdryx/verdryx/rag/internal/ragtext"
)

// Entry is one corpus chunk.
type Entry struct {
	// ID is the stable chunk id cited as [id].
	ID string `json:"id"`
	// Text is the verbatim evidence text.
	Text string `json:"text"`
	// Metadata holds every other member of the entry. Integers are int64,
	// other numbers float64, strings string, null nil; arrays and objects
	// keep their JSON decoding.
	Metadata map[string]any `json:"metadata"`
}

// Corpus is a validated set of entries and its citation schema.
type Corpus struct {
	// ID names the corpus.
	ID string `json:"id"`
	// LabelFields are the metadata fields of a context block's label.
	LabelFields []string `json:"label_fields"`
	// SourceField is the label field an answer must repeat.
	SourceField string `json:"source_field"`
	// SubjectField optionally names what each entry is about.
	SubjectField string `json:"subject_field,omitempty"`
	// Units optionally declares the corpus's units: canonical name -> the
	// spellings that name it ("pint": ["pt", "pints"]). They add to and
	// override DefaultUnits when answers are read as quantities.
	Units map[string][]string `json:"units,omitempty"`
	// Entries in file order.
	Entries []Entry `json:"entries"`
}

// LoadCorpus reads and validates a corpus file. Errors name the file, the
// entry and the field.
func LoadCorpus(path string) (Corpus, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Corpus{}, fmt.Errorf("read corpus: %w", err)
	}
	c, err := ParseCorpus(b)
	if err != nil {
		return Corpus{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseCorpus decodes and validates corpus JSON.
func ParseCorpus(b []byte) (Corpus, error) {
	var raw struct {
		ID           string              `json:"id"`
		LabelFields  []string            `json:"label_fields"`
		SourceField  string              `json:"source_field"`
		SubjectField string              `json:"subject_field"`
		Units        map[string][]string `json:"units"`
		Entries      []json.RawMessage   `json:"entries"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Corpus{}, fmt.Errorf("decode corpus: %w", err)
	}
	c := Corpus{ID: raw.ID, LabelFields: raw.LabelFields, SourceField: raw.SourceField, SubjectField: raw.SubjectField, Units: raw.Units}
	for canon, aliases := range c.Units {
		if strings.TrimSpace(canon) == "" {
			return Corpus{}, errors.New(`field "units": a unit name must be non-blank`)
		}
		for j, a := range aliases {
			if strings.TrimSpace(a) == "" {
				return Corpus{}, fmt.Errorf(`field "units"[%q][%d]: a unit spelling must be non-blank`, canon, j)
			}
		}
	}
	if len(c.LabelFields) == 0 {
		return Corpus{}, errors.New(`field "label_fields": at least one label field is required`)
	}
	for i, f := range c.LabelFields {
		if strings.TrimSpace(f) == "" || f == "id" || f == "text" || slices.Index(c.LabelFields, f) != i {
			return Corpus{}, fmt.Errorf(`field "label_fields"[%d]: %q must be a non-blank metadata name, not id or text, and not repeated`, i, f)
		}
	}
	if !slices.Contains(c.LabelFields, c.SourceField) {
		return Corpus{}, fmt.Errorf(`field "source_field": %q is not one of label_fields %v`, c.SourceField, c.LabelFields)
	}
	if len(raw.Entries) == 0 {
		return Corpus{}, errors.New(`field "entries": the corpus has no entries`)
	}
	seen := map[string]int{}
	for i, rb := range raw.Entries {
		e, err := parseEntry(rb, c)
		if err != nil {
			return Corpus{}, fmt.Errorf("entries[%d]%s: %w", i, ragtext.IDSuffix(e.ID), err)
		}
		if j, ok := seen[e.ID]; ok {
			return Corpus{}, fmt.Errorf(`entries[%d] (id %q): field "id": repeats entries[%d]`, i, e.ID, j)
		}
		seen[e.ID] = i
		c.Entries = append(c.Entries, e)
	}
	return c, nil
}

func parseEntry(b []byte, c Corpus) (Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	var e Entry
	id, ok := m["id"].(string)
	if !ok || strings.TrimSpace(id) == "" {
		return e, errors.New(`field "id": must be a non-blank string`)
	}
	e.ID = id
	if strings.ContainsAny(id, "[] \t\n'") {
		return e, errors.New(`field "id": must not contain brackets, quotes or whitespace (it is cited as [id])`)
	}
	text, ok := m["text"].(string)
	if !ok || strings.TrimSpace(text) == "" {
		return e, errors.New(`field "text": must be a non-blank string`)
	}
	e.Text = text
	e.Metadata = map[string]any{}
	for k, v := range m {
		if k == "id" || k == "text" {
			continue
		}
		if n, ok := v.(json.Number); ok {
			if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
				v = i
			} else if f, err := n.Float64(); err == nil {
				v = f
			} else {
				return e, fmt.Errorf("field %q: number %s out of range", k, n)
			}
		}
		e.Metadata[k] = v
	}
	present := 0
	for _, f := range c.LabelFields {
		switch v := e.Metadata[f].(type) {
		case nil:
		case int64:
			present++
		case string:
			if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "'\n\r]") {
				return e, fmt.Errorf("field %q: label string %q must be non-blank and free of quotes, newlines and ]", f, v)
			}
			present++
		default:
			return e, fmt.Errorf("field %q: label value must be a string, an integer or null, have %T", f, v)
		}
	}
	if present == 0 {
		return e, fmt.Errorf("at least one of the label fields %v must be non-null", c.LabelFields)
	}
	if c.SubjectField != "" {
		if s, ok := e.Metadata[c.SubjectField].(string); !ok || strings.TrimSpace(s) == "" {
			return e, fmt.Errorf("field %q: the subject field must be a non-blank string", c.SubjectField)
		}
	}
	return e, nil
}

// Digest returns "sha256:<hex>" of the corpus content: the citation schema
// and every entry's id, text and metadata. Formatting of the file does not
// change it; any content change does.
func (c Corpus) Digest() string {
	b, _ := json.Marshal(struct {
		LabelFields  []string            `json:"label_fields"`
		SourceField  string              `json:"source_field"`
		SubjectField string              `json:"subject_field"`
		Units        map[string][]string `json:"units,omitempty"`
		Entries      []Entry             `json:"entries"`
	}{c.LabelFields, c.SourceField, c.SubjectField, c.Units, c.Entries})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Entry returns the entry with id.
func (c Corpus) Entry(id string) (Entry, bool) {
	for _, e := range c.Entries {
		if e.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

// SearchTexts returns what retrieval reads of each entry, in order: the
// texts embedded for the index and ranked by BM25 (searchText).
func (c Corpus) SearchTexts() []string {
	out := make([]string, len(c.Entries))
	for i, e := range c.Entries {
		out[i] = searchText(e)
	}
	return out
}

// searchText is e's text after the path of headings above it (metadata
// "headings", outermost first, joined by " / ") on a line of its own, or
// e's text alone when it has none. A chunk cut from the middle of a
// section still carries the words of its section's titles, which a
// reader's question often uses. Only retrieval reads it: the text cited,
// shown, spanned and given to the generator is e.Text.
func searchText(e Entry) string {
	hs, _ := e.Metadata["headings"].([]any)
	var parts []string
	for _, h := range hs {
		if s, ok := h.(string); ok && strings.TrimSpace(s) != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return e.Text
	}
	return strings.Join(parts, " / ") + "\n" + e.Text
}

// IDs returns the entry ids in order.
func (c Corpus) IDs() []string {
	out := make([]string, len(c.Entries))
	for i, e := range c.Entries {
		out[i] = e.ID
	}
	return out
}

// Source returns the entry's source identifier (its SourceField value as
// text), or "" when it is null.
func (c Corpus) Source(e Entry) string { return ragtext.LabelText(e.Metadata[c.SourceField]) }

// Subject returns the entry's subject, or "" without a subject field.
func (c Corpus) Subject(e Entry) string {
	if c.SubjectField == "" {
		return ""
	}
	s, _ := e.Metadata[c.SubjectField].(string)
	return s
}

// Label returns the opening line of e's context block:
// [CONTEXT id=<id> <field>=<value> ...] with strings single-quoted,
// integers bare and null as null.
func (c Corpus) Label(e Entry) string {
	var sb strings.Builder
	sb.WriteString("[CONTEXT id=")
	sb.WriteString(e.ID)
	for _, f := range c.LabelFields {
		sb.WriteString(" " + f + "=")
		switch v := e.Metadata[f].(type) {
		case string:
			sb.WriteString("'" + v + "'")
		case int64:
			sb.WriteString(strconv.FormatInt(v, 10))
		default:
			sb.WriteString("null")
		}
	}
	sb.WriteString("]")
	return sb.String()
}

// Block returns e's full context block.
func (c Corpus) Block(e Entry) string {
	return c.Label(e) + "\n" + e.Text + "\n[END CONTEXT id=" + e.ID + "]"
}
