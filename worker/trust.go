package worker

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading"
)

// DefaultReplyPrefixes are the subject patterns an eval reply may be
// published to when none are configured: NATS inboxes and verdryx.reply.>.
func DefaultReplyPrefixes() []string { return []string{"_INBOX.>", "verdryx.reply.>"} }

// ReplyPolicy decides where eval replies may go: a literal subject that
// matches one of Allowed and none of Forbidden. The zero value allows
// DefaultReplyPrefixes and forbids every subject of DefaultSubjects'
// streams.
type ReplyPolicy struct {
	// Allowed are NATS subject patterns ("*" one token, ">" the rest).
	Allowed []string
	// Forbidden are the subjects bound to verdryx streams; a reply
	// matching one is refused even when Allowed matches it.
	Forbidden []string
}

// StreamSubjects returns every subject bound to a verdryx stream.
func (s Subjects) StreamSubjects() []string {
	return []string{s.Traces, s.Traces + ".*", s.EvalRequests, s.Events + ".>", s.Tail, s.DeadLetter}
}

// Check returns nil when subject may receive a reply, else an error
// naming the subject and the rule it broke.
func (p ReplyPolicy) Check(subject string) error {
	toks := strings.Split(subject, ".")
	for _, t := range toks {
		if t == "" || t == "*" || t == ">" || strings.ContainsAny(t, " \t\r\n") {
			return fmt.Errorf("field reply_to: %q is not a literal NATS subject", subject)
		}
	}
	forbidden := p.Forbidden
	if forbidden == nil {
		forbidden = DefaultSubjects().StreamSubjects()
	}
	for _, f := range forbidden {
		if SubjectMatches(f, subject) {
			return fmt.Errorf("field reply_to: %q is bound to a verdryx stream (%s)", subject, f)
		}
	}
	allowed := p.Allowed
	if allowed == nil {
		allowed = DefaultReplyPrefixes()
	}
	for _, a := range allowed {
		if SubjectMatches(a, subject) {
			return nil
		}
	}
	return fmt.Errorf("field reply_to: %q matches none of the reply subjects %s", subject, strings.Join(allowed, ", "))
}

// SubjectMatches reports whether the literal subject matches the NATS
// pattern ("*" matches one token, a final ">" one or more).
func SubjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		if p == ">" && i == len(pt)-1 {
			return len(st) > i
		}
		if i >= len(st) || (p != "*" && p != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// CheckAgentID validates an agent_id where it enters: empty (unset) or the
// contract's canonical agent:// form.
func CheckAgentID(id string) error {
	if id == "" || envelope.ValidAgentID(id) {
		return nil
	}
	return fmt.Errorf("field agent_id: %q does not match ^agent://[a-z0-9.-]+/[a-z0-9._/-]+$ (max 255 bytes)", id)
}

// DecodeEvalRequest decodes an eval-request message strictly: unknown
// fields and trailing data are errors, agent_id must be canonical.
func DecodeEvalRequest(data []byte) (EvalRequest, error) {
	var req EvalRequest
	if err := calls.DecodeStrict(data, &req); err != nil {
		return req, err
	}
	return req, CheckAgentID(req.AgentID)
}

// DecodeCallRecord decodes a trace message strictly: unknown fields and
// trailing data are errors; free-form data goes in "attributes". It is the
// record decoder of cost-per-correct --input (calls.DecodeRecordInto), with
// DecodeStrict's errors.
func DecodeCallRecord(data []byte) (CallRecord, error) {
	var rec CallRecord
	if err := calls.DecodeRecordInto(data, &rec, &rec.CallRecord,
		calls.Ext{Key: "call_id", Dst: &rec.CallID}, calls.Ext{Key: "segment", Dst: &rec.Segment}); err != nil {
		return rec, err
	}
	// A call's agent_id is data, not an identity verdryx acts for: TokenFuse
	// writes whatever its gateway was given, cost-per-correct counts every
	// such call, and the SLO report leaves a non-canonical subject out of
	// slo_burn events. Refusing it here would make the worker's report
	// differ from the direct reduction of the same rows.
	return rec, nil
}

// files returns the confined reader of an eval handler: Files, or one over
// Roots with the default limits.
func (h *EvalHandler) files() *confine.Reader {
	if h.opts.Files != nil {
		return h.opts.Files
	}
	return &confine.Reader{Roots: h.opts.Roots}
}

// confinedDeps returns the grading deps with every file read confined.
func (h *EvalHandler) confinedDeps() grading.Deps {
	d := h.deps
	d.ReadFile = h.files().ReadFile
	return d
}

// ErrOverflow marks a record whose cost or tokens would overflow the
// stored totals.
var ErrOverflow = errors.New("sum overflows int64")

// addInt64 returns a+b and whether it did not overflow.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}
