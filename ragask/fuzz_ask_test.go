package ragask

import (
	"testing"
)

// FuzzParseQuestion: an ask request never panics and an accepted question
// is non-empty and within the size bound.
func FuzzParseQuestion(f *testing.F) {
	f.Add([]byte(`{"question":"what is the dose?"}`))
	f.Add([]byte(`plain question`))
	f.Add([]byte(`{"question":"q","extra":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		q, _, err := parseQuestion(data)
		if err == nil && (q == "" || len(q) > maxQuestionBytes) {
			t.Fatalf("accepted question %q", q)
		}
	})
}
