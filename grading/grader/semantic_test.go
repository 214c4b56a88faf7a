package grader

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading/llm"
)

// The verdant source as the context block shows it.
const verdant = "[verdigris-dose-verdant] grimoire_id=GRIM-VERDANT folio=21\n" +
	"Per GRIM-VERDANT, for tarnish fever the verdigris blossom elixir dose is 3 drams, when distilled in copper and administered after dusk.\n"

func TestStubFaithfulnessSourceAndParaphrases(t *testing.T) {
	for name, answer := range map[string]string{
		"source sentence":  "Per GRIM-VERDANT, for tarnish fever the verdigris blossom elixir dose is 3 drams, when distilled in copper and administered after dusk [verdigris-dose-verdant].",
		"reordered":        "When distilled in copper and administered after dusk, the verdigris blossom elixir dose for tarnish fever is 3 drams (GRIM-VERDANT) [verdigris-dose-verdant].",
		"possessive":       "The verdigris blossom elixir's dose for tarnish fever is 3 drams when distilled in copper and administered after dusk, per GRIM-VERDANT [verdigris-dose-verdant].",
		"plural, split":    "Verdigris blossom elixirs treat tarnish fever at 3 drams per GRIM-VERDANT [verdigris-dose-verdant]. The elixir must be distilled in copper and administered after dusk.",
		"number as a word": "GRIM-VERDANT gives three drams of verdigris blossom elixir for tarnish fever, distilled in copper and administered after dusk [verdigris-dose-verdant].",
	} {
		t.Run(name, func(t *testing.T) {
			claims := StubFaithfulness(answer, verdant)
			require.NotEmpty(t, claims)
			for _, c := range claims {
				assert.True(t, c.Supported, "claim %q", c.Claim)
			}
		})
	}
}

func TestStubFaithfulnessFailsPadding(t *testing.T) {
	s := &Semantic{Model: &llm.Stub{}}
	src := "Per GRIM-VERDANT, the verdigris blossom elixir dose for tarnish fever is 3 drams [verdigris-dose-verdant]."
	res, err := s.Faithfulness(context.Background(), "q", src+" The keepers also repaint the lantern gallery vermilion every Michaelmas.", verdant)
	require.NoError(t, err)
	assert.False(t, res.Pass)
	assert.Equal(t, 0.5, res.Score)
	require.Len(t, res.Claims, 2)
	assert.True(t, res.Claims[0].Supported)
	assert.False(t, res.Claims[1].Supported)
	res, err = s.Faithfulness(context.Background(), "q", src, verdant)
	require.NoError(t, err)
	assert.True(t, res.Pass)
	assert.Equal(t, 1.0, res.Score)
}

func TestSemanticParseFaithfulness(t *testing.T) {
	claims, err := ParseFaithfulness("```json\n{\"claims\":[{\"claim\":\"a\",\"supported\":true},{\"claim\":\"b\",\"supported\":false}]}\n```")
	require.NoError(t, err)
	assert.Equal(t, []Claim{{"a", true}, {"b", false}}, claims)
	for name, bad := range map[string]string{
		"prose":           "Yes, faithful.",
		"empty":           "",
		"no claims":       `{"claims":[]}`,
		"null claims":     `{"claims":null}`,
		"missing verdict": `{"claims":[{"claim":"a"}]}`,
		"empty claim":     `{"claims":[{"claim":" ","supported":true}]}`,
		"string verdict":  `{"claims":[{"claim":"a","supported":"true"}]}`,
		"extra member":    `{"claims":[{"claim":"a","supported":true,"why":"x"}]}`,
		"trailing":        `{"claims":[{"claim":"a","supported":true}]}{}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFaithfulness(bad)
			require.ErrorIs(t, err, ErrSemanticUnparseable)
		})
	}
}

func TestSemanticParseRelevance(t *testing.T) {
	v, reason, err := ParseRelevance(`{"score":0.75,"reason":"on topic"}`)
	require.NoError(t, err)
	assert.Equal(t, 0.75, v)
	assert.Equal(t, "on topic", reason)
	for name, bad := range map[string]string{
		"number only":  `0.9`,
		"no reason":    `{"score":0.9}`,
		"no score":     `{"reason":"r"}`,
		"above one":    `{"score":1.2,"reason":"r"}`,
		"negative":     `{"score":-0.1,"reason":"r"}`,
		"string score": `{"score":"0.9","reason":"r"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParseRelevance(bad)
			require.ErrorIs(t, err, ErrSemanticUnparseable)
		})
	}
}

// failing is a judge whose calls fail.
type failing struct{}

func (failing) ID() string { return "openai:down" }
func (failing) Complete(context.Context, llm.Call) (llm.Completion, error) {
	return llm.Completion{}, errors.New("HTTP 503")
}

func TestSemanticJudgeFailureIsAnError(t *testing.T) {
	s := &Semantic{Model: failing{}}
	_, err := s.Faithfulness(context.Background(), "q", "An answer.", verdant)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTP 503")
	res, err := s.Faithfulness(context.Background(), "q", Abstention, verdant)
	require.NoError(t, err, "an abstention asks no judge")
	assert.True(t, res.Pass)
}
