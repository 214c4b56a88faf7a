// Package typryx is verdryx's client of typryx, an optional HTTP service
// that answers a typed question (a choice, a score or a yes/no, "noul")
// with a probability distribution instead of prose.
//
// The wire facts it speaks (docs/eval.md, "The typed grader"):
//
//   - POST /v1/ask with header X-Typryx-Key and {"template", "state",
//     "run_id"}; 200 is an answer (type, answer, probabilities, ...) or an
//     unanswered verdict ({"unanswered": true, "reason"}, no answer and no
//     probabilities); any other status is a refusal {"error": CODE}.
//   - POST /v1/outcome {"answer_id", "truth", "source"} records a human
//     label for an answer; 200 {"answer_id", "template", "template_version"}.
//   - GET /v1/templates lists the templates with their type and options or
//     levels.
//
// Every call is made exactly once (no retry), bounded by a per-call
// timeout, with request and response bodies limited to 1 MiB, and recorded
// as a client span (package provider) under the span in the caller's
// context. Answers are decoded strictly: an unknown member, a missing one,
// probabilities that do not fit the type, or trailing data is ErrMalformed.
// The key is read from a file (ReadKeyFile), sent only in the header, and
// never part of an error (package redact).
package typryx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/verdryx/verdryx/provider"
	"github.com/verdryx/verdryx/redact"
)

// Wire names and limits.
const (
	// HeaderKey carries the key on every call but GET /healthz.
	HeaderKey = "X-Typryx-Key"
	// MaxBody bounds a request body (typryx refuses larger ones with 413)
	// and a response body (a larger answer is malformed).
	MaxBody = 1 << 20
	// MaxRunID bounds the run_id of an ask, in bytes.
	MaxRunID = 128
	// DefaultTimeout bounds each call when Options.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultTemplate is the template verdryx asks by default.
	DefaultTemplate = "eval.outcome_met"
	// EnvKeyFile names the file holding the key when no flag does.
	EnvKeyFile = "VERDRYX_TYPRYX_KEY_FILE"
	// ProviderName is the gen_ai.provider.name of typryx call spans.
	ProviderName = "typryx"
	// OpAsk and OpOutcome are the gen_ai.operation.name of the two calls.
	OpAsk     = "ask"
	OpOutcome = "outcome"
)

// Template types.
const (
	TypeChoice = "choice"
	TypeScore  = "score"
	TypeNoul   = "noul"
)

// Errors of a call, wrapped with the operation and URL; test with
// errors.Is / errors.As.
var (
	// ErrMalformed marks a 200 answer that does not decode strictly or
	// does not fit its own type.
	ErrMalformed = errors.New("typryx: malformed answer")
	// ErrUnreachable marks a call that got no HTTP answer: connection
	// refused, reset, a timeout.
	ErrUnreachable = errors.New("typryx: unreachable")
	// ErrNoKey marks an empty or unusable key.
	ErrNoKey = errors.New("typryx: no key")
)

// RefusalError is a non-200 answer. Code is typryx's {"error": CODE}, ""
// when the body carried none.
type RefusalError struct {
	Status int
	Code   string
}

func (e *RefusalError) Error() string {
	code := e.Code
	if code == "" {
		code = "no error code"
	}
	return fmt.Sprintf("refused: HTTP %d %s", e.Status, code)
}

// ErrorType is the span's error.type: "http_<status>".
func (e *RefusalError) ErrorType() string { return "http_" + strconv.Itoa(e.Status) }

// Options configure a Client.
type Options struct {
	// BaseURL is typryx's root (http:// or https://); calls go to
	// BaseURL + "/v1/...".
	BaseURL string
	// Key is sent as X-Typryx-Key; required.
	Key string
	// Timeout bounds each call; zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient replaces the transport; nil means a plain http.Client.
	// The per-call timeout applies either way; the client must not retry.
	HTTPClient *http.Client
}

// Client calls one typryx. It is safe for concurrent use.
type Client struct {
	base    string
	key     string
	timeout time.Duration
	hc      *http.Client
	red     *redact.Redactor
}

// New validates opts and builds the client; it makes no network call.
func New(opts Options) (*Client, error) {
	if !strings.HasPrefix(opts.BaseURL, "http://") && !strings.HasPrefix(opts.BaseURL, "https://") {
		return nil, fmt.Errorf("typryx: URL %q: want http:// or https://", redact.URL(opts.BaseURL))
	}
	if err := checkKey(opts.Key); err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{
		base:    strings.TrimRight(opts.BaseURL, "/"),
		key:     opts.Key,
		timeout: opts.Timeout,
		hc:      hc,
		red:     redact.New(opts.Key).WithArgs([]string{opts.BaseURL}),
	}, nil
}

// Redactor returns a redactor that hides the key (and any userinfo of the
// URL), for the caller's logs and output.
func (c *Client) Redactor() *redact.Redactor { return c.red }

// minKey is the shortest key accepted: package redact recognises secrets
// of at least 6 bytes, and a shorter key could not be kept out of output.
const minKey = 6

// checkKey refuses an empty or short key, or one with control or non-ASCII
// characters (it could not be sent as a header value).
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrNoKey)
	}
	if len(key) < minKey {
		return fmt.Errorf("%w: the key is shorter than %d bytes", ErrNoKey, minKey)
	}
	for _, r := range key {
		if unicode.IsControl(r) || r > unicode.MaxASCII {
			return fmt.Errorf("%w: the key holds a control or non-ASCII character", ErrNoKey)
		}
	}
	return nil
}

// maxKeyFile bounds a key file.
const maxKeyFile = 4 << 10

// ReadKeyFile reads the key from path: the file's content without
// surrounding whitespace (a trailing newline is usual). Errors name the
// path, never the content.
func ReadKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("typryx key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return "", fmt.Errorf("typryx key file %s: read: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return "", fmt.Errorf("typryx key file %s: more than %d bytes, not a key", path, maxKeyFile)
	}
	key := strings.TrimSpace(string(b))
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("typryx key file %s: %w", path, err)
	}
	return key, nil
}

// Version is a template version in GET /v1/templates: the contract does
// not fix its JSON type there, so a string or a number is kept as text.
// An answer's template_version is a string (Answer.TemplateVersion).
type Version string

// UnmarshalJSON accepts a string or a number.
func (v *Version) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = Version(s)
		return nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return fmt.Errorf("template_version: want a string or a number, have %s", truncate(string(b), 40))
	}
	*v = Version(n.String())
	return nil
}

// Template is one entry of GET /v1/templates. Options (choice) and Levels
// (score) are kept raw: only their count matters to a client, a score
// template of n levels answering keys "0".."n-1".
type Template struct {
	ID           string            `json:"id"`
	Version      Version           `json:"version"`
	Type         string            `json:"type"`
	Fields       json.RawMessage   `json:"fields,omitempty"`
	Instructions string            `json:"instructions,omitempty"`
	Options      []json.RawMessage `json:"options,omitempty"`
	Levels       []json.RawMessage `json:"levels,omitempty"`
}

// AskRequest is one question.
type AskRequest struct {
	Template string         `json:"template"`
	State    map[string]any `json:"state"`
	// RunID is optional: at most MaxRunID bytes, no control characters.
	RunID string `json:"run_id,omitempty"`
}

// Answer is a 200 answer to an ask: answered (Probabilities set) or
// unanswered (Unanswered true, Reason set, no answer, no probabilities).
// Its members have the contract's JSON types exactly: AnswerID is 32
// lowercase hex digits, TemplateVersion a string (a short digest),
// HeldBackFields an integer present on answered and unanswered results.
type Answer struct {
	AnswerID        string `json:"answer_id"`
	Template        string `json:"template"`
	TemplateVersion string `json:"template_version"`
	Type            string `json:"type"`
	// Answer is the raw answer: a string (choice), an integer level
	// (score) or the probability of "true" (noul). Nil when unanswered.
	Answer json.RawMessage `json:"answer,omitempty"`
	// Probabilities maps each option, level ("0".."n-1") or "true"/"false"
	// to its probability. Nil when unanswered.
	Probabilities map[string]float64 `json:"probabilities,omitempty"`
	// Backend, Model and CostUSD may be absent (typryx omits them when
	// empty or 0, as an unanswered result often is): "" and 0, unknown.
	Backend   string  `json:"backend,omitempty"`
	Model     string  `json:"model,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	CostUSD   float64 `json:"cost_usd,omitempty"`
	// HeldBackFields counts the state keys the template's egress filter
	// dropped before asking its backend.
	HeldBackFields int    `json:"held_back_fields"`
	Unanswered     bool   `json:"unanswered,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// OutcomeRequest records a human label (Truth) for an answer.
type OutcomeRequest struct {
	AnswerID string `json:"answer_id"`
	// Truth is the label as the question's type has it: a bool (noul), an
	// integer level (score) or an option string (choice).
	Truth  any    `json:"truth"`
	Source string `json:"source"`
}

// OutcomeAck is typryx's 200 answer to an outcome.
type OutcomeAck struct {
	AnswerID        string `json:"answer_id"`
	Template        string `json:"template"`
	TemplateVersion string `json:"template_version"`
}

// Templates lists the templates (GET /v1/templates). The body may be the
// list itself or {"templates": [...]}.
func (c *Client) Templates(ctx context.Context) (_ []Template, err error) {
	ctx, span := provider.Start(ctx, provider.Call{Operation: "templates", Provider: ProviderName})
	defer func() { span.End(provider.Usage{}, err) }()
	defer func() { err = c.wrap("GET", "/v1/templates", err) }()
	raw, err := c.do(ctx, http.MethodGet, "/v1/templates", nil)
	if err != nil {
		return nil, err
	}
	var list []Template
	if len(bytes.TrimSpace(raw)) > 0 && bytes.TrimSpace(raw)[0] == '{' {
		var wrapped struct {
			Templates []Template `json:"templates"`
		}
		if err := decodeStrict(raw, &wrapped); err != nil {
			return nil, err
		}
		list = wrapped.Templates
	} else if err := decodeStrict(raw, &list); err != nil {
		return nil, err
	}
	for i, t := range list {
		if t.ID == "" || !knownType(t.Type) {
			return nil, fmt.Errorf("%w: template #%d: want an id and a type of choice, score or noul", ErrMalformed, i)
		}
	}
	return list, nil
}

// Template returns the template id from GET /v1/templates; one typryx
// does not list is a *RefusalError 404 unknown_template, as an ask of it
// would be.
func (c *Client) Template(ctx context.Context, id string) (Template, error) {
	list, err := c.Templates(ctx)
	if err != nil {
		return Template{}, err
	}
	for _, t := range list {
		if t.ID == id {
			return t, nil
		}
	}
	return Template{}, c.wrap("GET", "/v1/templates", fmt.Errorf("template %q is not listed: %w", id, &RefusalError{Status: http.StatusNotFound, Code: "unknown_template"}))
}

// Ask asks one question. A refusal is a *RefusalError, a 200 that does not
// decode strictly or fit its type wraps ErrMalformed, no answer at all
// wraps ErrUnreachable. An unanswered verdict is not an error: Answer has
// Unanswered set.
func (c *Client) Ask(ctx context.Context, req AskRequest) (ans Answer, err error) {
	ctx, span := provider.Start(ctx, provider.Call{Operation: OpAsk, Provider: ProviderName, Model: req.Template})
	defer func() { span.End(provider.Usage{ResponseModel: ans.Model}, err) }()
	defer func() { err = c.wrap("POST", "/v1/ask", err) }()
	if len(req.RunID) > MaxRunID || strings.IndexFunc(req.RunID, unicode.IsControl) >= 0 {
		return Answer{}, fmt.Errorf("run_id %q: at most %d bytes, no control characters", truncate(req.RunID, 40), MaxRunID)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Answer{}, fmt.Errorf("encode ask: %w", err)
	}
	raw, err := c.do(ctx, http.MethodPost, "/v1/ask", body)
	if err != nil {
		return Answer{}, err
	}
	if err := decodeStrict(raw, &ans); err != nil {
		return Answer{}, err
	}
	if err := checkAnswer(raw, ans, req.Template); err != nil {
		return Answer{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return ans, nil
}

// Outcome records a label for an answer (POST /v1/outcome). The ack must
// name the same answer.
func (c *Client) Outcome(ctx context.Context, req OutcomeRequest) (ack OutcomeAck, err error) {
	ctx, span := provider.Start(ctx, provider.Call{Operation: OpOutcome, Provider: ProviderName})
	defer func() { span.End(provider.Usage{}, err) }()
	defer func() { err = c.wrap("POST", "/v1/outcome", err) }()
	body, err := json.Marshal(req)
	if err != nil {
		return OutcomeAck{}, fmt.Errorf("encode outcome: %w", err)
	}
	raw, err := c.do(ctx, http.MethodPost, "/v1/outcome", body)
	if err != nil {
		return OutcomeAck{}, err
	}
	if err := decodeStrict(raw, &ack); err != nil {
		return OutcomeAck{}, err
	}
	if ack.AnswerID != req.AnswerID {
		return OutcomeAck{}, fmt.Errorf("%w: the ack names answer %q, not %q", ErrMalformed, truncate(ack.AnswerID, 80), req.AnswerID)
	}
	return ack, nil
}

// do makes one call and returns the 200 body.
func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if len(body) > MaxBody {
		return nil, fmt.Errorf("not sent, the body is %d bytes, over %d: %w", len(body), MaxBody, &RefusalError{Status: http.StatusRequestEntityTooLarge, Code: "state_too_large"})
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	hr.Header.Set(HeaderKey, c.key)
	hr.Header.Set("Accept", "application/json")
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w (timeout %s)", ErrUnreachable, ctx.Err(), c.timeout)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: read answer: %w (timeout %s)", ErrUnreachable, ctx.Err(), c.timeout)
		}
		return nil, fmt.Errorf("%w: read answer: %w", ErrUnreachable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &RefusalError{Status: resp.StatusCode, Code: errorCode(raw)}
	}
	if len(raw) > MaxBody {
		return nil, fmt.Errorf("%w: the answer is over %d bytes", ErrMalformed, MaxBody)
	}
	return raw, nil
}

// isCode reports what an error code looks like; anything else in a refusal body
// is not quoted (it could echo what was sent).
// (^[a-z][a-z0-9_]{0,63}$, checked by hand: the compiled regexp cost
// every start of the binary 0.6 ms).
func isCode(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// errorCode returns the {"error": CODE} of a refusal body, "" when it has
// none that looks like a code.
func errorCode(raw []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || !isCode(e.Error) {
		return ""
	}
	return e.Error
}

// decodeStrict decodes one JSON value into v, refusing unknown members
// and trailing data.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s", ErrMalformed, truncate(strings.TrimPrefix(err.Error(), "json: "), 200))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the answer", ErrMalformed)
	}
	return nil
}

func knownType(t string) bool { return t == TypeChoice || t == TypeScore || t == TypeNoul }

// isAnswerID reports an answer_id as typryx mints it: 32 lower-case hex
// digits.
func isAnswerID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkAnswer checks an ask's answer against the wire facts: every
// required member is present (backend, model and cost_usd are not
// required), answer_id is 32 lowercase hex digits,
// held_back_fields is not negative, it names the template asked, an
// unanswered one has a reason and neither answer nor
// probabilities (not even null), an answered one has probabilities in
// [0, 1] summing to 1 whose keys fit its type and an answer among them.
func checkAnswer(raw []byte, a Answer, template string) error {
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return err
	}
	// The members every 200 answer carries, answered or not (backend,
	// model and cost_usd may be omitted).
	for _, k := range [...]string{"answer_id", "template", "template_version", "type", "latency_ms", "held_back_fields"} {
		if _, ok := present[k]; !ok {
			return fmt.Errorf("no %s", k)
		}
	}
	switch {
	case !isAnswerID(a.AnswerID):
		return fmt.Errorf("answer_id %q: want 32 lowercase hex digits", truncate(a.AnswerID, 40))
	case a.HeldBackFields < 0:
		return fmt.Errorf("held_back_fields %d: want a count, not negative", a.HeldBackFields)
	case a.Template != template:
		return fmt.Errorf("answers template %q, asked %q", truncate(a.Template, 80), template)
	case !knownType(a.Type):
		return fmt.Errorf("type %q: want choice, score or noul", truncate(a.Type, 40))
	}
	_, hasAnswer := present["answer"]
	_, hasProbs := present["probabilities"]
	if a.Unanswered {
		if a.Reason == "" {
			return errors.New("unanswered without a reason")
		}
		if hasAnswer || hasProbs {
			return errors.New("unanswered, yet carries answer or probabilities")
		}
		return nil
	}
	if a.Reason != "" {
		return errors.New("a reason on an answer")
	}
	if !hasAnswer || len(a.Probabilities) == 0 {
		return errors.New("an answer without answer or probabilities")
	}
	sum := 0.0
	for k, p := range a.Probabilities {
		if math.IsNaN(p) || p < 0 || p > 1 {
			return fmt.Errorf("probability of %q is %v, want [0, 1]", truncate(k, 40), p)
		}
		sum += p
	}
	if math.Abs(sum-1) > 1e-6 {
		return fmt.Errorf("probabilities sum to %v, want 1", sum)
	}
	switch a.Type {
	case TypeNoul:
		pt, okT := a.Probabilities["true"]
		_, okF := a.Probabilities["false"]
		if !okT || !okF || len(a.Probabilities) != 2 {
			return errors.New("noul probabilities: want exactly the keys true and false")
		}
		var p float64
		if err := json.Unmarshal(a.Answer, &p); err != nil || math.Abs(p-pt) > 1e-9 {
			return fmt.Errorf("noul answer %s: want the probability of true, %v", truncate(string(a.Answer), 40), pt)
		}
	case TypeScore:
		for i := range len(a.Probabilities) {
			if _, ok := a.Probabilities[strconv.Itoa(i)]; !ok {
				return fmt.Errorf("score probabilities: want the keys 0..%d, %q missing", len(a.Probabilities)-1, strconv.Itoa(i))
			}
		}
		var lvl int
		if err := json.Unmarshal(a.Answer, &lvl); err != nil || lvl < 0 || lvl >= len(a.Probabilities) {
			return fmt.Errorf("score answer %s: want an integer level among the probabilities", truncate(string(a.Answer), 40))
		}
	case TypeChoice:
		var opt string
		if err := json.Unmarshal(a.Answer, &opt); err != nil {
			return fmt.Errorf("choice answer %s: want a string", truncate(string(a.Answer), 40))
		}
		if _, ok := a.Probabilities[opt]; !ok {
			return fmt.Errorf("choice answer %q is not among the probabilities", truncate(opt, 40))
		}
	}
	return nil
}

// wrap prefixes err with the method and URL and redacts it (the key and
// URL userinfo).
func (c *Client) wrap(method, path string, err error) error {
	if err == nil {
		return nil
	}
	return c.red.Error(fmt.Errorf("typryx %s %s%s: %w", method, redact.URL(c.base), path, err))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
