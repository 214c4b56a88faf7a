package worker

import (
	"encoding/json"
	"errors"
	"github.com/verdryx/verdryx/calls"
	"testing"

	"github.com/verdryx/verdryx/grading"
)

// Fuzz targets for every decoder that takes outside bytes. Run one for a
// minute with, for example:
//
//	go test ./worker -run '^$' -fuzz '^FuzzDecodeCallRecord$' -fuzztime 1m
//
// Crashers land in testdata/fuzz/<Target>/ and are replayed by go test.

// FuzzDecodeCallRecord: a trace message (and a tailed record line) never
// panics the decoder, and an accepted record has a valid agent_id and
// converts to a call.
func FuzzDecodeCallRecord(f *testing.F) {
	b, _ := json.Marshal(RecordOf(calls.Call{RunID: "r", HasRunID: true, Step: 1, HasStep: true, Decision: "allow", CostMicroUSD: 5, AgentID: "agent://a.b/c"}))
	f.Add(b)
	f.Add([]byte(`{"segment":"x.parquet"}`))
	f.Add([]byte(`{"run_id":"r","cost_micro_usd":1}`))
	f.Add([]byte(`{"decision":"allow"} trailing`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := DecodeCallRecord(data)
		if err != nil {
			return
		}
		if rec.Segment == "" {
			_, _ = rec.Call()
		}
	})
}

// FuzzDecodeEvalRequest: an eval request never panics, an accepted one has
// a canonical agent_id, and its reply_to check never panics.
func FuzzDecodeEvalRequest(f *testing.F) {
	f.Add([]byte(`{"request_id":"r","eval_set_path":"grimoire/evalset.json","agent_id":"agent://a.b/c","reply_to":"_INBOX.x"}`))
	f.Add([]byte(`{"request_id":"r","eval_set":{"id":"s","cases":[]},"reply_to":"verdryx.traces"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeEvalRequest(data)
		if err != nil {
			return
		}
		if CheckAgentID(req.AgentID) != nil {
			t.Fatalf("accepted agent id %q", req.AgentID)
		}
		if err := (ReplyPolicy{}).Check(req.ReplyTo); err == nil && SubjectMatches("verdryx.traces", req.ReplyTo) {
			t.Fatalf("reply to a stream subject allowed: %q", req.ReplyTo)
		}
	})
}

// FuzzParseQuestion: an ask request never panics and an accepted question
// is non-empty and within the size bound.
func FuzzParseQuestion(f *testing.F) {
	f.Add([]byte(`{"question":"what is the dose?"}`))
	f.Add([]byte(`plain question`))
	f.Add([]byte(`{"question":"q","extra":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := parseQuestion(data)
		if err == nil && (q == "" || len(q) > MaxQuestionBytes) {
			t.Fatalf("accepted question %q", q)
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
