package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStringRedactsPatternsAndSecrets(t *testing.T) {
	r := New("sk-MARKER-123456")
	cases := map[string]string{
		"connect to nats://admin:PW@host:4222 failed":               "connect to nats://[REDACTED]@host:4222 failed",
		"https://user@api.example/v1":                               "https://[REDACTED]@api.example/v1",
		`401 {"error":"bad key","authorization":"Bearer abcdefgh"}`: `401 {"error":"bad key","authorization":"Bearer [REDACTED]"}`,
		"Authorization: Basic dXNlcjpwdw==":                         "Authorization: Basic [REDACTED]",
		"x-api-key: anthropic-secret-value":                         "x-api-key: [REDACTED]",
		"X-Typryx-Key: tpx-secret-value":                            "X-Typryx-Key: [REDACTED]",
		"map[X-Typryx-Key:[tpx-secret-value]]":                      "map[X-Typryx-Key:[REDACTED]",
		"echo sk-MARKER-123456 back":                                "echo [REDACTED] back",
		"token is Bearer zzzzzzzzzz":                                "token is Bearer [REDACTED]",
		"nothing secret at https://api.example/v1 here":             "nothing secret at https://api.example/v1 here",
	}
	for in, want := range cases {
		require.Equal(t, want, r.String(in), in)
	}
}

func TestErrorKeepsChainAndHandlerRedacts(t *testing.T) {
	base := errors.New("x-api-key: supersecret")
	err := (*Redactor)(nil).Error(base) // the fixed patterns only
	require.ErrorIs(t, err, base)
	require.NotContains(t, err.Error(), "supersecret")

	var buf bytes.Buffer
	log := slog.New(New("MARKER-SECRET").Handler(slog.NewTextHandler(&buf, nil)))
	log.With("url", "nats://u:MARKER-SECRET@h").Info("got MARKER-SECRET", "err", errors.New("Bearer MARKER-SECRET"), slog.Group("g", "k", "MARKER-SECRET"))
	require.NotContains(t, buf.String(), "MARKER-SECRET")
	require.Contains(t, buf.String(), Mark)
}

func TestArgSecretsCatchMalformedURLs(t *testing.T) {
	args := []string{"replay", "--nats", "nats://u:SECRET PW6@127.0.0.1:1", "--nats=nats://u:SEC/RET9@h:1",
		"u:SECRETPW2@127.0.0.1:1", "--openai-base-url", "https://u:SEC RETB4@127.0.0.1:1", "nats://TOKENVALUE1@h",
		"agent://acme.example/bot", "someone@example.com"}
	r := New().WithArgs(append(args, `nats://u:SEC"RET12@h`))
	msg := `connect to NATS at nats://u:SECRET PW6@127.0.0.1:1: parse "nats://u:SEC/RET9@h:1": invalid port ":SEC" after host; u:SECRETPW2@127.0.0.1:1; https://u:SEC RETB4@127.0.0.1:1; nats://TOKENVALUE1@h; parse "nats://u:SEC\"RET12@h"; agent://acme.example/bot someone@example.com`
	got := r.String(msg)
	for _, leak := range []string{"SECRET PW6", "SEC/RET9", ":SEC", "SECRETPW2", "SEC RETB4", "TOKENVALUE1", "RET12"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q leaks %q", got, leak)
		}
	}
	for _, keep := range []string{"agent://acme.example/bot", "someone@example.com"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q lost %q", got, keep)
		}
	}
}
