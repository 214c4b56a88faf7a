package streams

import (
	"fmt"
	"strings"
)

// defaultReplyPrefixes are the subject patterns an eval reply may be
// published to when none are configured: NATS inboxes and verdryx.reply.>.
func defaultReplyPrefixes() []string { return []string{"_INBOX.>", "verdryx.reply.>"} }

// ReplyPolicy decides where eval replies may go: a literal subject that
// matches one of Allowed and none of Forbidden. The zero value allows
// defaultReplyPrefixes and forbids every subject of DefaultSubjects'
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
		allowed = defaultReplyPrefixes()
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
