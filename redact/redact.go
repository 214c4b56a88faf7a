// Package redact removes secrets from text before it leaves the process:
// errors, log lines, printed URLs and stored reasons. It replaces
//
//   - the userinfo of any URL (scheme://user:password@host),
//   - the value of an Authorization, x-api-key or X-Typryx-Key header, in
//     "Name: value" or JSON "name": "value" form, and a bare "Bearer <token>",
//   - every configured secret value (the values of the environment
//     variables named by SecretEnv, or values given to New),
//
// with Mark. It never needs the secret to recognise the first two, so a
// provider echoing a header is caught even when its value is unknown here.
package redact

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Mark replaces every secret.
const Mark = "[REDACTED]"

// SecretEnv names the environment variables whose values are secrets.
func SecretEnv() []string {
	return []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "VERDRYX_NATS_PASSWORD", "VERDRYX_NATS_TOKEN",
		"NATS_PASSWORD", "NATS_TOKEN", "VERDRYX_NATS_USER_PASSWORD"}
}

// minSecret is the shortest value treated as a secret: shorter values
// would redact ordinary words.
const minSecret = 6

var (
	userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s"']+@`)
	headerRE   = regexp.MustCompile(`(?i)((?:proxy-)?authorization|x-api-key|x-typryx-key|api-key)("?\s*[:=]\s*"?)(?:(bearer|basic|token)\s+)?[^\s",;}]+`)
	bearerRE   = regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{6,}`)
)

// Redactor redacts the fixed patterns and its secret values. The zero
// value and nil redact the fixed patterns only. It is safe for concurrent
// use.
type Redactor struct {
	secrets []string
}

// New returns a redactor for the given secret values (values shorter than
// 6 bytes are ignored).
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// FromEnv returns a redactor for the values of SecretEnv read with getenv
// (nil: os.Getenv) plus extra values.
func FromEnv(getenv func(string) string, extra ...string) *Redactor {
	if getenv == nil {
		getenv = os.Getenv
	}
	vals := append([]string(nil), extra...)
	for _, k := range SecretEnv() {
		vals = append(vals, getenv(k))
	}
	return New(vals...)
}

// String returns s with every secret replaced by Mark.
func (r *Redactor) String(s string) string {
	if r != nil {
		for _, sec := range r.secrets {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Mark)
			}
		}
	}
	if strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllString(s, "${1}"+Mark+"@")
	}
	s = headerRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := headerRE.FindStringSubmatch(m)
		out := sub[1] + sub[2]
		if sub[3] != "" {
			out += sub[3] + " "
		}
		return out + Mark
	})
	return bearerRE.ReplaceAllString(s, "${1} "+Mark)
}

// String redacts the fixed patterns only (no secret values).
func String(s string) string { return (*Redactor)(nil).String(s) }

// URL returns a URL (or a comma-separated list of them) fit to print:
// userinfo replaced by Mark.
func URL(u string) string { return String(u) }

// Error returns err with its message redacted; errors.Is and errors.As
// still see the original chain. Nil stays nil.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := r.String(msg)
	if red == msg {
		return err
	}
	return &redacted{msg: red, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Is lets a caller test for a redacted error.
func (e *redacted) Is(target error) bool { return errors.Is(e.err, target) }

// Writer returns a writer that redacts each Write before passing it on.
// A secret split across two writes is not caught; every writer in verdryx
// writes whole lines or whole values.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &writer{r: r, w: w} }

type writer struct {
	r *Redactor
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	s := string(p)
	red := w.r.String(s)
	if red == s {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, red); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the underlying writer (terminal detection uses it).
func (w *writer) Unwrap() io.Writer { return w.w }

// Handler wraps h so that the message, every string attribute and every
// error attribute of a record are redacted.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &handler{r: r, h: h} }

type handler struct {
	r *Redactor
	h slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = h.attr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.String(err.Error()))
		}
		return slog.String(a.Key, h.r.String(v.String()))
	}
	return a
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return &handler{r: h.r, h: h.h.WithAttrs(out)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, h: h.h.WithGroup(name)}
}

// ArgSecrets returns the credentials written into command-line arguments:
// the userinfo of anything URL-like ("scheme://user:pass@host", or
// "user:pass@host" without a scheme), also in "--flag=value" form and
// whether or not the URL parses. Redacting these values by content catches
// them where a malformed URL defeats the pattern match.
func ArgSecrets(args []string) []string {
	var out []string
	for _, a := range args {
		if i := strings.IndexByte(a, '='); strings.HasPrefix(a, "-") && i > 0 {
			a = a[i+1:]
		}
		at := strings.LastIndexByte(a, '@')
		if at < 0 {
			continue
		}
		start, scheme := 0, false
		if j := strings.Index(a[:at], "://"); j >= 0 {
			start, scheme = j+3, true
		}
		ui := a[start:at]
		var found []string
		c := strings.IndexByte(ui, ':')
		switch {
		case c >= 0:
			found = append(found, ui[c+1:], ui)
		case scheme && ui != "":
			found = append(found, ui) // a token as the user part
		}
		for _, f := range found {
			out = append(out, f)
			// As a parser error quotes it, and the pieces a URL parser
			// splits it into at its delimiters.
			if q := strconv.Quote(f); q[1:len(q)-1] != f {
				out = append(out, q[1:len(q)-1])
			}
			for _, piece := range strings.FieldsFunc(f, func(r rune) bool { return strings.ContainsRune("/?#", r) }) {
				if piece != f {
					out = append(out, piece)
				}
			}
		}
	}
	return out
}

// WithArgs returns a redactor that also redacts ArgSecrets(args), down to
// pieces of 3 bytes (a credential's pieces are worth hiding even when
// short; the user gave them as secrets).
func (r *Redactor) WithArgs(args []string) *Redactor {
	out := &Redactor{}
	if r != nil {
		out.secrets = append(out.secrets, r.secrets...)
	}
	for _, s := range ArgSecrets(args) {
		if len(s) >= 3 {
			out.secrets = append(out.secrets, s)
		}
	}
	// Longest first, so a secret is never half-replaced by its piece.
	slices.SortStableFunc(out.secrets, func(a, b string) int { return len(b) - len(a) })
	return out
}
