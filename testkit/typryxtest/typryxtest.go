// Package typryxtest is a fake typryx for tests: an httptest server that
// speaks the documented wire shapes (POST /v1/ask, POST /v1/outcome, GET
// /v1/templates, GET /healthz), checks the key and records what it was
// sent.
package typryxtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"unicode"

	"github.com/verdryx/verdryx/provider/typryx"
)

// Templates the fake lists unless Options.Templates says otherwise.
const (
	// Noul is DefaultTemplate: a yes/no question.
	Noul = typryx.DefaultTemplate
	// Score is a five-level score template (levels 0..4).
	Score = "eval.quality"
	// Choice is a choice template (no order: verdryx refuses it).
	Choice = "eval.category"
)

// DefaultTemplates lists Noul, Score and Choice.
func DefaultTemplates() []map[string]any {
	return []map[string]any{
		{"id": Noul, "version": "3f9a1c2e", "type": typryx.TypeNoul, "fields": []string{"task", "final_answer"},
			"instructions": "Did the final answer meet the task?"},
		{"id": Score, "version": "b71d04aa", "type": typryx.TypeScore, "fields": []string{"task", "final_answer"},
			"instructions": "How good is the final answer?", "levels": []string{"useless", "poor", "fair", "good", "excellent"}},
		{"id": Choice, "version": "5c0e9d13", "type": typryx.TypeChoice, "fields": []string{"task", "final_answer"},
			"instructions": "Which kind of answer is it?", "options": []string{"refusal", "answer", "question"}},
	}
}

// Ask is one ask the fake received.
type Ask struct {
	Template string            `json:"template"`
	State    map[string]string `json:"state"`
	RunID    string            `json:"run_id"`
}

// Outcome is one outcome the fake received; Truth is kept raw.
type Outcome struct {
	AnswerID string          `json:"answer_id"`
	Truth    json.RawMessage `json:"truth"`
	Source   string          `json:"source"`
}

// Reply is how the fake answers one ask.
type Reply struct {
	// Status, when neither 0 nor 200, refuses the ask with {"error": Code}.
	Status int
	Code   string
	// Unanswered, when set, is the reason of an unanswered verdict.
	Unanswered string
	// Probabilities of an answered verdict: "true"/"false" (noul), levels
	// "0".."n-1" (score) or options (choice).
	Probabilities map[string]float64
	// CostUSD is sent when not 0.
	CostUSD float64
	// HeldBack is sent as held_back_fields (the count of state keys the
	// egress filter dropped), on answered and unanswered results alike.
	HeldBack int
	// OmitBackend leaves backend and model out of an answered result (an
	// unanswered one never has them), as typryx does when they are empty.
	OmitBackend bool
	// Raw, when set, is sent as the 200 body verbatim.
	Raw string
	// Hang holds the answer until the request is abandoned or the server
	// closes.
	Hang bool
}

// Noulp is an answered noul reply with p(true) = p.
func Noulp(p float64) Reply {
	return Reply{Probabilities: map[string]float64{"true": p, "false": 1 - p}}
}

// Options configure a Server.
type Options struct {
	// Key is the only key accepted; required.
	Key string
	// Templates listed; nil means DefaultTemplates.
	Templates []map[string]any
	// Answer decides the reply to each ask of a listed template; nil
	// answers Noulp(0.5).
	Answer func(Ask) Reply
	// OutcomeStatus, when neither 0 nor 200, refuses every outcome.
	OutcomeStatus int
	// TemplatesStatus, when neither 0 nor 200, refuses GET /v1/templates.
	TemplatesStatus int
}

// Server is a running fake typryx. Close it when done.
type Server struct {
	URL  string
	opts Options
	srv  *httptest.Server
	stop chan struct{}
	once sync.Once

	mu       sync.Mutex
	next     int
	asks     []Ask
	outcomes []Outcome
	answers  map[string]string // answer id -> template
	bodies   [][]byte
	headers  []http.Header
}

// New starts a fake typryx.
func New(opts Options) *Server {
	if opts.Templates == nil {
		opts.Templates = DefaultTemplates()
	}
	if opts.Answer == nil {
		opts.Answer = func(Ask) Reply { return Noulp(0.5) }
	}
	s := &Server{opts: opts, stop: make(chan struct{}), answers: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close releases hanging answers and stops the server.
func (s *Server) Close() {
	s.once.Do(func() { close(s.stop) })
	s.srv.Close()
}

// Asks returns the asks received, in arrival order.
func (s *Server) Asks() []Ask {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asks)
}

// Outcomes returns the outcomes received, in arrival order.
func (s *Server) Outcomes() []Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.outcomes)
}

// Requests returns the body and headers of every request received (the
// key travels only in the headers).
func (s *Server) Requests() (bodies [][]byte, headers []http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies), slices.Clone(s.headers)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func refuse(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, typryx.MaxBody+1))
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	if r.URL.Path == "/healthz" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	if r.Header.Get(typryx.HeaderKey) != s.opts.Key {
		refuse(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	if len(body) > typryx.MaxBody {
		refuse(w, http.StatusRequestEntityTooLarge, "state_too_large")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/templates":
		if st := s.opts.TemplatesStatus; st != 0 && st != http.StatusOK {
			refuse(w, st, "unavailable")
			return
		}
		writeJSON(w, http.StatusOK, s.opts.Templates)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/ask":
		s.ask(w, r, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/outcome":
		s.outcome(w, body)
	default:
		refuse(w, http.StatusNotFound, "not_found")
	}
}

func (s *Server) template(id string) (map[string]any, bool) {
	for _, t := range s.opts.Templates {
		if t["id"] == id {
			return t, true
		}
	}
	return nil, false
}

func (s *Server) ask(w http.ResponseWriter, r *http.Request, body []byte) {
	var a Ask
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || a.State == nil {
		refuse(w, http.StatusBadRequest, "bad_state")
		return
	}
	if len(a.RunID) > typryx.MaxRunID || slices.ContainsFunc([]rune(a.RunID), unicode.IsControl) {
		refuse(w, http.StatusBadRequest, "bad_run_id")
		return
	}
	t, ok := s.template(a.Template)
	if !ok {
		refuse(w, http.StatusNotFound, "unknown_template")
		return
	}
	s.mu.Lock()
	s.asks = append(s.asks, a)
	s.next++
	id := AnswerID(s.next)
	s.answers[id] = a.Template
	s.mu.Unlock()
	rep := s.opts.Answer(a)
	if rep.Hang {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		refuse(w, rep.Status, rep.Code)
		return
	}
	if rep.Raw != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, rep.Raw)
		return
	}
	out := map[string]any{
		"answer_id": id, "template": a.Template, "template_version": t["version"], "type": t["type"],
		"latency_ms": 3, "held_back_fields": rep.HeldBack,
	}
	// typryx omits an empty backend and model: an unanswered result has
	// none here, and OmitBackend drops them from an answer too.
	if rep.Unanswered == "" && !rep.OmitBackend {
		out["backend"], out["model"] = "fake", "fake-1"
	}
	if rep.CostUSD != 0 {
		out["cost_usd"] = rep.CostUSD
	}
	if rep.Unanswered != "" {
		out["unanswered"] = true
		out["reason"] = rep.Unanswered
		writeJSON(w, http.StatusOK, out)
		return
	}
	out["probabilities"] = rep.Probabilities
	switch t["type"] {
	case typryx.TypeNoul:
		out["answer"] = rep.Probabilities["true"]
	default:
		best, bestP := "", -1.0
		for k, p := range rep.Probabilities {
			if p > bestP || (p == bestP && k < best) {
				best, bestP = k, p
			}
		}
		if t["type"] == typryx.TypeScore {
			n, _ := strconv.Atoi(best)
			out["answer"] = n
		} else {
			out["answer"] = best
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) outcome(w http.ResponseWriter, body []byte) {
	if st := s.opts.OutcomeStatus; st != 0 && st != http.StatusOK {
		refuse(w, st, "unavailable")
		return
	}
	var o Outcome
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.AnswerID == "" || len(o.Truth) == 0 {
		refuse(w, http.StatusBadRequest, "bad_request")
		return
	}
	s.mu.Lock()
	tmpl, ok := s.answers[o.AnswerID]
	if ok {
		s.outcomes = append(s.outcomes, o)
	}
	s.mu.Unlock()
	if !ok {
		refuse(w, http.StatusNotFound, "unknown_answer")
		return
	}
	t, _ := s.template(tmpl)
	writeJSON(w, http.StatusOK, map[string]any{"answer_id": o.AnswerID, "template": tmpl, "template_version": t["version"]})
}

// AnswerID is the answer_id the fake mints for its n-th ask (from 1): 32
// lowercase hex digits, as typryx's are.
func AnswerID(n int) string { return fmt.Sprintf("%032x", n) }

// String names the server.
func (s *Server) String() string { return fmt.Sprintf("fake typryx at %s", s.URL) }
