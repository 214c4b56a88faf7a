package envelope

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type chainVectors struct {
	Vectors []struct {
		Event     json.RawMessage `json:"event"`
		Canonical string          `json:"canonical"`
		Hash      string          `json:"hash"`
	} `json:"vectors"`
}

func loadVectors(t *testing.T) chainVectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/chain-vectors.json")
	require.NoError(t, err)
	var v chainVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.Len(t, v.Vectors, 3)
	return v
}

// TestChainVectors reproduces the stack's pinned cross-language vectors byte
// for byte, through the Event type, through LineHash, and as a chain.
func TestChainVectors(t *testing.T) {
	v := loadVectors(t)
	var c Checker
	for i, vec := range v.Vectors {
		var ev Event
		require.NoError(t, json.Unmarshal(vec.Event, &ev), "vector %d", i)
		require.NoError(t, ev.Validate(), "vector %d", i)
		canon, err := ev.Canonical()
		require.NoError(t, err)
		require.Equal(t, vec.Canonical, string(canon), "vector %d canonical", i)
		h, err := ev.Hash()
		require.NoError(t, err)
		require.Equal(t, vec.Hash, h, "vector %d hash", i)

		// Chain it: the vectors' events carry no prev_hash; event N+1 gets
		// vector N's hash, which must not change its own hash.
		if i > 0 {
			ev.PrevHash = v.Vectors[i-1].Hash
		}
		line, err := json.Marshal(ev)
		require.NoError(t, err)
		lh, prev, err := LineHash(line)
		require.NoError(t, err)
		require.Equal(t, vec.Hash, lh, "vector %d line hash", i)
		require.Equal(t, ev.PrevHash, prev)
		link, _, _, err := c.Check(line)
		require.NoError(t, err)
		if i == 0 {
			require.Equal(t, LinkHead, link)
		} else {
			require.Equal(t, LinkChained, link, "vector %d", i)
		}
	}
}

func TestRoundTripKeepsUnknownMembers(t *testing.T) {
	raw, err := os.ReadFile("testdata/canonical/event-unknown-members.json")
	require.NoError(t, err)
	var ev Event
	require.NoError(t, json.Unmarshal(raw, &ev))
	require.Contains(t, ev.Extra, "x-vendor")
	require.Contains(t, ev.Data, "unknown_key")
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	ref, err := CanonicalizeJSON(raw)
	require.NoError(t, err)
	require.Equal(t, string(ref), string(out))
	h1, _, err := LineHash(raw)
	require.NoError(t, err)
	h2, err := ev.Hash()
	require.NoError(t, err)
	require.Equal(t, h1, h2)
}

func validEvent() Event {
	return New(TypeEvalRun, "agent://acme.example/support/bot", "run-1", map[string]any{"model": "stub", "cases": 7}, time.Date(2026, 7, 24, 12, 0, 0, 123e6, time.UTC))
}

func TestNew(t *testing.T) {
	ev := validEvent()
	require.Equal(t, SchemaV02, ev.Schema)
	require.Equal(t, "2026-07-24T12:00:00.123Z", ev.TS)
	require.Equal(t, "verdryx", ev.Source)
	require.Equal(t, "info", ev.Severity)
	require.Equal(t, "high", New(TypeQualityDrift, "", "", nil, time.Now()).Severity)
	require.Equal(t, "high", New(TypeSLOBurn, "", "", nil, time.Now()).Severity)
	require.Equal(t, "info", New("something_new", "", "", nil, time.Now()).Severity)
	require.NoError(t, ev.Validate())
}

func TestValidate(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = "user://u/" + strings.Repeat("x", i+1)
	}
	cases := []struct {
		name  string
		mut   func(*Event)
		field string
	}{
		{"schema", func(e *Event) { e.Schema = "taipanbox.dev/agent-event/v9" }, "schema"},
		{"schema missing", func(e *Event) { e.Schema = "" }, "schema"},
		{"v0.1 accepted", func(e *Event) { e.Schema = SchemaV01 }, ""},
		{"ts not rfc3339", func(e *Event) { e.TS = "2026-07-24 12:00:00" }, "ts"},
		{"ts not utc", func(e *Event) { e.TS = "2026-07-24T12:00:00+02:00" }, "ts"},
		{"ts with +00:00 is utc", func(e *Event) { e.TS = "2026-07-24T12:00:00+00:00" }, ""},
		{"source empty", func(e *Event) { e.Source = "" }, "source"},
		{"type empty", func(e *Event) { e.Type = "" }, "type"},
		{"agent_id pattern", func(e *Event) { e.AgentID = "agent://ACME/bot" }, "agent_id"},
		{"agent_id no path", func(e *Event) { e.AgentID = "agent://acme.example" }, "agent_id"},
		{"agent_id scheme", func(e *Event) { e.AgentID = "user://acme.example/bot" }, "agent_id"},
		{"agent_id too long", func(e *Event) { e.AgentID = "agent://a/" + strings.Repeat("b", 250) }, "agent_id"},
		{"agent_id at limit", func(e *Event) { e.AgentID = "agent://a/" + strings.Repeat("b", 245) }, ""},
		{"severity", func(e *Event) { e.Severity = "urgent" }, "severity"},
		{"obo pattern", func(e *Event) { e.OnBehalfOf = []string{"user://a", "bot://b"} }, "on_behalf_of[1]"},
		{"obo duplicate", func(e *Event) { e.OnBehalfOf = []string{"user://a", "agent://b", "user://a"} }, "on_behalf_of[2]"},
		{"obo too many", func(e *Event) { e.OnBehalfOf = many }, "on_behalf_of"},
		{"obo 32 ok", func(e *Event) { e.OnBehalfOf = many[:32] }, ""},
		{"prev_hash", func(e *Event) { e.PrevHash = "sha256:ABC" }, "prev_hash"},
		{"prev_hash ok", func(e *Event) { e.PrevHash = "sha256:" + strings.Repeat("0a", 32) }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := validEvent()
			c.mut(&ev)
			err := ev.Validate()
			if c.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "want a FieldError, have %v", err)
			require.Equal(t, c.field, fe.Field)
			require.Contains(t, err.Error(), c.field)
		})
	}
}

func TestDecodeErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		`{"schema":1}`:                 "schema",
		`{"ts":["x"]}`:                 "ts",
		`{"data":[1,2]}`:               "data",
		`{"on_behalf_of":"user://a"}`:  "on_behalf_of",
		`{"agent_id":null}`:            "agent_id",
		`{"prev_hash":{"sha256":"x"}}`: "prev_hash",
	}
	for in, field := range cases {
		var ev Event
		err := json.Unmarshal([]byte(in), &ev)
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", in, err)
		require.Equal(t, field, fe.Field, in)
	}
	var ev Event
	require.ErrorIs(t, json.Unmarshal([]byte(`[1]`), &ev), ErrMalformed)
	require.Error(t, json.Unmarshal([]byte(`{"a":`), &ev))
}

// TestMatchAgentIDAgreesWithPattern checks the hand-written matcher against
// the contract's regular expression.
func TestMatchAgentIDAgreesWithPattern(t *testing.T) {
	ids := []string{"agent://a/b", "agent://a/", "agent:///b", "agent://a.b-c/d_e/f.g-h", "agent://A/b", "agent://a/B",
		"agent://a_b/c", "agent://a/b c", "agent:/a/b", "agent://a//", "agent://a/b/", "agent://a", "agent://", "xagent://a/b",
		"agent://é/b", "agent://a/b\n", "agent://1/2"}
	for _, id := range ids {
		require.Equal(t, agentIDPattern.MatchString(id), matchAgentID(id), id)
	}
}
