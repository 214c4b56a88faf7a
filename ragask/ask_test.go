package ragask

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/rag"
	"github.com/verdryx/verdryx/testkit/jstest"
)

func TestAskRoundTrip(t *testing.T) {
	e := newEnv(t)
	pipe, err := rag.NewOffline(context.Background(), "../testdata/grimoire/corpus.json", rag.Options{})
	require.NoError(t, err)
	srv := NewServer(e.NC, e.Subjects.RAGAsk, pipe, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	jstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error { return e.NC.Flush() })

	var rep Reply
	jstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		m, err := e.NC.Request(e.Subjects.RAGAsk, []byte(`{"question":"How many grains of pearl salt does moonpetal need for silver sleep vapor?"}`), 5*time.Second)
		if err != nil {
			return err
		}
		return json.Unmarshal(m.Data, &rep)
	})
	require.Empty(t, rep.Error)
	require.NotNil(t, rep.Record)
	require.NotEmpty(t, rep.Record.Answer)
	m, err := e.NC.Request(e.Subjects.RAGAsk, []byte(`{"question":""}`), 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(m.Data, &rep))
	require.Contains(t, rep.Error, "question")

	// A reply subject bound to a verdryx stream is never published to: a
	// client cannot make the worker write into its own streams.
	for _, target := range []string{e.Subjects.Events + ".inst1", e.Subjects.Traces, e.Subjects.EvalRequests} {
		require.NoError(t, e.NC.PublishRequest(e.Subjects.RAGAsk, target, []byte(`{"question":"How many grains of pearl salt for moonpetal?"}`)))
	}
	// A proper ask after them is answered, so the refused ones were handled.
	_, err = e.NC.Request(e.Subjects.RAGAsk, []byte(`{"question":"How many grains of pearl salt for moonpetal?"}`), 5*time.Second)
	require.NoError(t, err)
	for _, st := range []string{e.Subjects.EventsStream, e.Subjects.TracesStream, e.Subjects.EvalStream} {
		s, err := e.JS.Stream(context.Background(), st)
		require.NoError(t, err)
		info, err := s.Info(context.Background())
		require.NoError(t, err)
		require.Zero(t, info.State.Msgs, "stream %s", st)
	}
}

// TestAskTopKAndDeadLetter: top_k comes in the ask (1-20, default 2), and
// an ask whose reply subject is refused is dead-lettered with the reason.
func TestAskTopKAndDeadLetter(t *testing.T) {
	e := newEnv(t)
	pipe, err := rag.NewOffline(context.Background(), "../testdata/grimoire/corpus.json", rag.Options{})
	require.NoError(t, err)
	type dead struct{ subject, reason string }
	deads := make(chan dead, 4)
	srv := NewServer(e.NC, e.Subjects.RAGAsk, pipe, Options{DeadLetter: func(_ context.Context, subject string, _ []byte, _ nats.Header, reason string) error {
		deads <- dead{subject, reason}
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ask := func(body string) Reply {
		t.Helper()
		var rep Reply
		jstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
			m, err := e.NC.Request(e.Subjects.RAGAsk, []byte(body), 5*time.Second)
			if err != nil {
				return err
			}
			return json.Unmarshal(m.Data, &rep)
		})
		return rep
	}
	const q = `"question":"How many grains of pearl salt for moonpetal?"`
	for _, tc := range []struct {
		body string
		n    int
		err  string
	}{
		{`{` + q + `}`, rag.DefaultTopK, ""},
		{`{` + q + `,"top_k":1}`, 1, ""},
		{`{` + q + `,"top_k":5}`, 5, ""},
		{`{` + q + `,"top_k":21}`, 0, "field top_k: 21, want a whole number from 1 to 20"},
		{`{` + q + `,"top_k":-1}`, 0, "field top_k"},
		{`{` + q + `,"top_k":3,"filter":{"grimoire_id":"GRIM-NOCTURNE"}}`, 1, ""},
		{`{` + q + `,"filter":{"colour":"red"}}`, 0, `key "colour": no chunk has it`},
		{`{` + q + `,"filter":{"grimoire_id":""}}`, 0, "field filter"},
		{`{` + q + `,"filter":["grimoire_id"]}`, 0, "malformed ask"},
	} {
		rep := ask(tc.body)
		if tc.err != "" {
			require.Contains(t, rep.Error, tc.err, tc.body)
			continue
		}
		require.Empty(t, rep.Error, tc.body)
		require.Len(t, rep.Record.RetrievedIDs, tc.n, tc.body)
		if strings.Contains(tc.body, "filter") {
			for _, c := range rep.Record.Chunks {
				require.Equal(t, "GRIM-NOCTURNE", c.Metadata["grimoire_id"], tc.body)
			}
		}
	}

	require.NoError(t, e.NC.PublishRequest(e.Subjects.RAGAsk, "my.inbox", []byte(`{`+q+`}`)))
	select {
	case d := <-deads:
		require.Equal(t, e.Subjects.RAGAsk, d.subject)
		require.Contains(t, d.reason, "reply_to refused")
		require.Contains(t, d.reason, "my.inbox")
	case <-time.After(10 * time.Second):
		t.Fatal("the refused ask was not dead-lettered")
	}
}

// TestParseQuestion: top_k 0 is refused like -1, with the range; 2.5 and
// "3" are refused as not whole numbers (not with int64's range); the
// 8 KiB limit applies to the question, not to the message holding it.
func TestParseQuestion(t *testing.T) {
	q8k := strings.Repeat("q", maxQuestionBytes)
	for _, tc := range []struct {
		body string
		topK int
		err  string
	}{
		{`{"question":"a?"}`, rag.DefaultTopK, ""},
		{`{"question":"a?","top_k":null}`, rag.DefaultTopK, ""},
		{`{"question":"a?","top_k":20}`, 20, ""},
		{`{"question":"a?","top_k":0}`, 0, "field top_k: 0, want a whole number from 1 to 20"},
		{`{"question":"a?","top_k":-1}`, 0, "field top_k: -1, want a whole number from 1 to 20"},
		{`{"question":"a?","top_k":2.5}`, 0, "field top_k: 2.5, want a whole number from 1 to 20"},
		{`{"question":"a?","top_k":"3"}`, 0, `field top_k: "3", want a whole number from 1 to 20`},
		{`{"question":"a?","top_k":99999999999999999999}`, 0, "field top_k: 99999999999999999999, want a whole number from 1 to 20"},
		{`{"question":"` + q8k + `","top_k":3}`, 3, ""},
		{q8k, rag.DefaultTopK, ""},
		{"  " + q8k + "\n", rag.DefaultTopK, ""},
		{q8k + "q", 0, "question of 8193 bytes: longer than 8 KiB (8192 bytes)"},
		{`{"question":"` + q8k + `q"}`, 0, "question of 8193 bytes: longer than 8 KiB (8192 bytes)"},
	} {
		name := tc.body
		if len(name) > 60 {
			name = name[:60]
		}
		q, o, err := parseQuestion([]byte(tc.body))
		if tc.err != "" {
			require.EqualError(t, err, tc.err, name)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, tc.topK, o.TopK, name)
		require.NotEmpty(t, q)
	}
}
