package evalreq

import (
	"errors"
	"testing"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/streams"
)

// FuzzDecodeEvalRequest: an eval request never panics, an accepted one has
// a canonical agent_id, and its reply_to check never panics.
func FuzzDecodeEvalRequest(f *testing.F) {
	f.Add([]byte(`{"request_id":"r","eval_set_path":"grimoire/evalset.json","agent_id":"agent://a.b/c","reply_to":"_INBOX.x"}`))
	f.Add([]byte(`{"request_id":"r","eval_set":{"id":"s","cases":[]},"reply_to":"verdryx.traces"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := Decode(data)
		if err != nil {
			return
		}
		if checkAgentID(req.AgentID) != nil {
			t.Fatalf("accepted agent id %q", req.AgentID)
		}
		if err := (streams.ReplyPolicy{}).Check(req.ReplyTo); err == nil && streams.SubjectMatches("verdryx.traces", req.ReplyTo) {
			t.Fatalf("reply to a stream subject allowed: %q", req.ReplyTo)
		}
	})
}

// FuzzEvalSet: an eval set (inline or from a file) never panics the
// parser, and the files it references are only ever asked of the reader
// given (here one that refuses everything: nothing is read from disk).
func FuzzEvalSet(f *testing.F) {
	f.Add([]byte(`{"id":"s","cases":[{"id":"c","prompt":"p","expected":"x"}]}`))
	f.Add([]byte(`{"id":"s","corpus":"/etc/passwd","cases":[{"id":"c","grader":"rag","golden":"g.json#c"}]}`))
	f.Add([]byte(`{"id":"s","cases":[{"id":"c","grader":"regex","expected":"("}]}`))
	refuse := errors.New("refused")
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = grading.ParseEvalSetWith(data, "", func(string) ([]byte, error) { return nil, refuse })
	})
}
