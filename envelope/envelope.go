package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Schema identifiers. Producers write SchemaV02; readers accept both (they
// differ only in the source rules).
const (
	SchemaV02 = "taipanbox.dev/agent-event/v0.2"
	SchemaV01 = "taipanbox.dev/agent-event/v0.1"
)

// Source is the source name verdryx writes on its own events.
const Source = "verdryx"

// Event types registered for source "verdryx".
const (
	TypeEvalRun      = "eval_run"
	TypeQualityScore = "quality_score"
	TypeQualityDrift = "quality_drift"
	TypeSLOBurn      = "slo_burn"
)

// Severities, in increasing order.
const (
	SeverityInfo     = "info"
	SeverityLow      = "low"
	SeverityMedium   = "medium"
	SeverityHigh     = "high"
	SeverityCritical = "critical"
)

// maxAgentIDLen is the maximum length of agent_id in bytes.
const maxAgentIDLen = 255

// maxOnBehalfOf is the maximum number of entries in on_behalf_of.
const maxOnBehalfOf = 32

var (
	agentIDPattern    = regexp.MustCompile(`^agent://[a-z0-9.-]+/[a-z0-9._/-]+$`)
	onBehalfOfPattern = regexp.MustCompile(`^(agent|user)://`)
	prevHashPattern   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// typeSeverity returns the fixed severity of a verdryx event type; unknown
// types default to info.
func typeSeverity(typ string) string {
	switch typ {
	case TypeQualityDrift, TypeSLOBurn:
		return SeverityHigh
	default:
		return SeverityInfo
	}
}

// ValidAgentID reports whether id is a canonical agent:// identifier.
func ValidAgentID(id string) bool {
	return len(id) <= maxAgentIDLen && matchAgentID(id)
}

// matchAgentID is agentIDPattern without the regexp engine: it is on the
// hot path of every append.
func matchAgentID(id string) bool {
	const prefix = "agent://"
	if len(id) <= len(prefix) || id[:len(prefix)] != prefix {
		return false
	}
	rest := id[len(prefix):]
	slash := -1
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		lowerDigit := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if slash < 0 {
			switch {
			case lowerDigit || c == '.' || c == '-':
			case c == '/' && i > 0:
				slash = i
			default:
				return false
			}
			continue
		}
		if !(lowerDigit || c == '.' || c == '_' || c == '/' || c == '-') {
			return false
		}
	}
	return slash > 0 && slash < len(rest)-1
}

// Event is one agent-event envelope. The known members are typed fields;
// Extra holds unknown top-level members exactly as they were written, so a
// decoded event re-encodes to the same canonical bytes and the same hash.
//
// An Event is a value: it is safe to copy, but Data and Extra share their
// maps with the copy.
type Event struct {
	Schema     string
	TS         string // RFC 3339, UTC
	Source     string
	Type       string
	AgentID    string
	Severity   string   // optional
	RunID      string   // optional
	OnBehalfOf []string // optional, root first
	Data       map[string]any
	PrevHash   string // optional; empty on the head of a chain

	// Extra holds unknown top-level members as written.
	Extra map[string]json.RawMessage

	// present records which optional members were present when decoded, so
	// an explicit empty string survives a round trip.
	present map[string]bool
}

// New returns a verdryx event of type typ with the registered severity and
// ts formatted in UTC with millisecond precision. data may be nil.
func New(typ, agentID, runID string, data map[string]any, ts time.Time) Event {
	return Event{
		Schema:   SchemaV02,
		TS:       ts.UTC().Format("2006-01-02T15:04:05.000Z"),
		Source:   Source,
		Type:     typ,
		AgentID:  agentID,
		Severity: typeSeverity(typ),
		RunID:    runID,
		Data:     data,
	}
}

// FieldError is a validation failure of one envelope member.
type FieldError struct {
	Field  string // envelope member, e.g. "agent_id" or "on_behalf_of[2]"
	Value  string // the offending value, quoted JSON where it was a string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("field %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("field %s: %s: %s", e.Field, e.Value, e.Reason)
}

// ErrMalformed marks input that is not a JSON object.
var ErrMalformed = errors.New("envelope: malformed")

func quote(s string) string {
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Validate checks every field rule of the v0.2 schema (v0.1 is accepted) and
// returns the first violation as a *FieldError, or nil.
func (e *Event) Validate() error {
	switch e.Schema {
	case SchemaV02, SchemaV01:
	case "":
		return &FieldError{Field: "schema", Reason: "missing"}
	default:
		return &FieldError{Field: "schema", Value: quote(e.Schema), Reason: "want " + quote(SchemaV02) + " or " + quote(SchemaV01)}
	}
	if e.TS == "" {
		return &FieldError{Field: "ts", Reason: "missing"}
	}
	t, err := time.Parse(time.RFC3339Nano, e.TS)
	if err != nil {
		return &FieldError{Field: "ts", Value: quote(e.TS), Reason: "not an RFC 3339 date-time"}
	}
	if _, off := t.Zone(); off != 0 {
		return &FieldError{Field: "ts", Value: quote(e.TS), Reason: "not UTC"}
	}
	if e.Source == "" {
		return &FieldError{Field: "source", Reason: "missing or empty"}
	}
	if e.Type == "" {
		return &FieldError{Field: "type", Reason: "missing or empty"}
	}
	if e.AgentID == "" {
		return &FieldError{Field: "agent_id", Reason: "missing or empty"}
	}
	if len(e.AgentID) > maxAgentIDLen {
		return &FieldError{Field: "agent_id", Value: quote(e.AgentID), Reason: fmt.Sprintf("longer than %d bytes", maxAgentIDLen)}
	}
	if !matchAgentID(e.AgentID) {
		return &FieldError{Field: "agent_id", Value: quote(e.AgentID), Reason: "does not match " + agentIDPattern.String()}
	}
	if e.Severity != "" || e.present["severity"] {
		switch e.Severity {
		case SeverityInfo, SeverityLow, SeverityMedium, SeverityHigh, SeverityCritical:
		default:
			return &FieldError{Field: "severity", Value: quote(e.Severity), Reason: "want one of info, low, medium, high, critical"}
		}
	}
	if err := validateOnBehalfOf(e.OnBehalfOf); err != nil {
		return err
	}
	if e.PrevHash != "" || e.present["prev_hash"] {
		if !prevHashPattern.MatchString(e.PrevHash) {
			return &FieldError{Field: "prev_hash", Value: quote(e.PrevHash), Reason: "does not match " + prevHashPattern.String()}
		}
	}
	return nil
}

// validateOnBehalfOf checks the delegation list: each entry agent:// or
// user://, at most 32 entries, no duplicates.
func validateOnBehalfOf(obo []string) error {
	if len(obo) > maxOnBehalfOf {
		return &FieldError{Field: "on_behalf_of", Reason: fmt.Sprintf("%d entries, at most %d allowed", len(obo), maxOnBehalfOf)}
	}
	seen := make(map[string]int, len(obo))
	for i, s := range obo {
		field := fmt.Sprintf("on_behalf_of[%d]", i)
		if !onBehalfOfPattern.MatchString(s) {
			return &FieldError{Field: field, Value: quote(s), Reason: "does not start with agent:// or user://"}
		}
		if j, dup := seen[s]; dup {
			return &FieldError{Field: field, Value: quote(s), Reason: fmt.Sprintf("duplicate of on_behalf_of[%d]", j)}
		}
		seen[s] = i
	}
	return nil
}

// knownMembers are the envelope members with typed fields.
var knownMembers = [...]string{"schema", "ts", "source", "type", "agent_id", "severity", "run_id", "on_behalf_of", "data", "prev_hash"}

func isKnown(name string) bool {
	for _, k := range knownMembers {
		if k == name {
			return true
		}
	}
	return false
}

// UnmarshalJSON decodes an envelope, keeping unknown top-level members in
// Extra and decoding data with json.Number so number text is kept. A member
// of the wrong JSON type is a *FieldError.
func (e *Event) UnmarshalJSON(b []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if members == nil {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	*e = Event{present: make(map[string]bool, len(members))}
	for name, raw := range members {
		if !isKnown(name) {
			if e.Extra == nil {
				e.Extra = make(map[string]json.RawMessage)
			}
			e.Extra[name] = raw
			continue
		}
		e.present[name] = true
		var err error
		switch name {
		case "schema":
			err = decodeString(raw, &e.Schema)
		case "ts":
			err = decodeString(raw, &e.TS)
		case "source":
			err = decodeString(raw, &e.Source)
		case "type":
			err = decodeString(raw, &e.Type)
		case "agent_id":
			err = decodeString(raw, &e.AgentID)
		case "severity":
			err = decodeString(raw, &e.Severity)
		case "run_id":
			err = decodeString(raw, &e.RunID)
		case "prev_hash":
			err = decodeString(raw, &e.PrevHash)
		case "on_behalf_of":
			if isNull(raw) {
				err = errors.New("want an array of strings, have null")
				break
			}
			err = json.Unmarshal(raw, &e.OnBehalfOf)
			if err != nil {
				err = errors.New("want an array of strings")
			}
		case "data":
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			var v any
			if err = d.Decode(&v); err == nil {
				m, ok := v.(map[string]any)
				if !ok {
					err = errors.New("want an object")
				}
				e.Data = m
			}
		}
		if err != nil {
			return &FieldError{Field: name, Value: truncate(string(raw)), Reason: err.Error()}
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func decodeString(raw json.RawMessage, dst *string) error {
	if len(raw) == 0 || raw[0] != '"' {
		return errors.New("want a string")
	}
	return json.Unmarshal(raw, dst)
}

// members returns the event's members as Go values, prev_hash included only
// when withPrev is set. Optional members are omitted when empty unless they
// were present in the decoded input.
func (e *Event) members(withPrev bool) map[string]any {
	m := make(map[string]any, 10+len(e.Extra))
	for k, v := range e.Extra {
		m[k] = v
	}
	m["schema"] = e.Schema
	m["ts"] = e.TS
	m["source"] = e.Source
	m["type"] = e.Type
	m["agent_id"] = e.AgentID
	if e.Severity != "" || e.present["severity"] {
		m["severity"] = e.Severity
	}
	if e.RunID != "" || e.present["run_id"] {
		m["run_id"] = e.RunID
	}
	if e.OnBehalfOf != nil || e.present["on_behalf_of"] {
		obo := make([]any, len(e.OnBehalfOf))
		for i, s := range e.OnBehalfOf {
			obo[i] = s
		}
		m["on_behalf_of"] = obo
	}
	if e.Data != nil || e.present["data"] {
		if e.Data == nil {
			m["data"] = map[string]any{}
		} else {
			m["data"] = e.Data
		}
	}
	if withPrev && (e.PrevHash != "" || e.present["prev_hash"]) {
		m["prev_hash"] = e.PrevHash
	}
	return m
}

// MarshalJSON encodes the event in canonical (JCS) form, prev_hash included.
func (e Event) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := appendEvent(&buf, &e, true); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Canonical returns the JCS canonical bytes of the event without its
// prev_hash: the bytes its successor's prev_hash is computed over.
func (e *Event) Canonical() ([]byte, error) {
	var buf bytes.Buffer
	if err := appendEvent(&buf, e, false); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Hash returns the chain hash of the event: "sha256:" + hex of SHA-256 over
// Canonical().
func (e *Event) Hash() (string, error) {
	c, err := e.Canonical()
	if err != nil {
		return "", err
	}
	return hashBytes(c), nil
}

// LogValue implements slog.LogValuer: it logs the envelope's identity, never
// its data payload, which may carry agent output.
func (e Event) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("type", e.Type),
		slog.String("agent_id", e.AgentID),
		slog.String("run_id", e.RunID),
		slog.Int("data_keys", len(e.Data)),
	)
}

// sortedKeys returns the keys of m sorted by UTF-16 code units.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if a == b {
			return 0
		}
		if lessUTF16(a, b) {
			return -1
		}
		return 1
	})
	return keys
}

// typeName is used in errors about unsupported data values.
func typeName(v any) string { return strings.TrimPrefix(fmt.Sprintf("%T", v), "*") }
