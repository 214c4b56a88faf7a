package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/outcome/window"
)

// logFlags are --log-format and --log-level, on every long-running command.
type logFlags struct {
	format, level string
	verbose       bool
}

func addLogFlags(fs *pflag.FlagSet, defLevel string) *logFlags {
	l := &logFlags{}
	fs.StringVar(&l.format, "log-format", envOr("VERDRYX_LOG_FORMAT", "text"), "log format on stderr: text or json ($VERDRYX_LOG_FORMAT)")
	fs.StringVar(&l.level, "log-level", envOr("VERDRYX_LOG_LEVEL", defLevel), "lowest level logged: debug, info, warn or error ($VERDRYX_LOG_LEVEL)")
	fs.BoolVarP(&l.verbose, "verbose", "v", false, "shorthand for --log-level debug")
	return l
}

// logger returns the slog logger the flags name, writing to w; wrap (when
// not nil) wraps its handler, e.g. with the redactor.
func (l *logFlags) logger(w io.Writer, wrap func(slog.Handler) slog.Handler) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	if l.verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch l.format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, usageErrorf("--log-format %q: want text or json", l.format)
	}
	if wrap != nil {
		h = wrap(h)
	}
	return slog.New(h), nil
}

// otlpFlagName names --otlp and the variables its default comes from, in
// errors.
const otlpFlagName = "--otlp ($VERDRYX_OTLP_ENDPOINT, $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, $OTEL_EXPORTER_OTLP_ENDPOINT)"

// addOTLPFlag defines --otlp: a collector root (`http://host:4318`, to
// which /v1/traces is appended) or a full traces URL (any other path is
// used as given). Its default is the first set of $VERDRYX_OTLP_ENDPOINT
// (read like the flag), $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a full URL,
// used as given) and $OTEL_EXPORTER_OTLP_ENDPOINT (a base URL, possibly
// with a path prefix: /v1/traces is appended to it), as the OpenTelemetry
// SDK reads them. The exporter itself honours $OTEL_EXPORTER_OTLP_HEADERS
// and $OTEL_EXPORTER_OTLP_TRACES_HEADERS.
func addOTLPFlag(fs *pflag.FlagSet) *string {
	def := envFirst("", "VERDRYX_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if def == "" {
		if base := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			def = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	return fs.String("otlp", def,
		"OTLP/HTTP collector for spans: a root URL (/v1/traces is appended) or a full traces URL; off when empty ($VERDRYX_OTLP_ENDPOINT, $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, $OTEL_EXPORTER_OTLP_ENDPOINT)")
}

// checkURL refuses a value of the flag name that is not an absolute URL
// with one of the schemes (exit 2), before any work starts. An empty value
// is accepted: it means off or the default.
func checkURL(name, value string, schemes ...string) error {
	if value == "" {
		return nil
	}
	u, err := url.Parse(value)
	if err == nil && u.Host == "" {
		err = fmt.Errorf("no host")
	}
	if err == nil {
		ok := false
		for _, s := range schemes {
			ok = ok || strings.EqualFold(u.Scheme, s)
		}
		if !ok {
			err = fmt.Errorf("scheme %q, want %s", u.Scheme, strings.Join(schemes, " or "))
		}
	}
	if err != nil {
		return usageErrorf("%s %q is not a valid URL: %v", name, value, err)
	}
	return nil
}

// checkNATSURL checks a --nats value: a comma-separated list of URLs as
// nats.Connect takes it.
func checkNATSURL(value string) error {
	for _, u := range strings.Split(value, ",") {
		u = strings.TrimSpace(u)
		if u != "" && !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		if err := checkURL("--nats ($NATS_URL)", u, "nats", "tls", "ws", "wss"); err != nil {
			return err
		}
	}
	return nil
}

// checkNotEmpty refuses a file with nothing but white space in it, naming
// what it should have held: an empty input is an input error (exit 2),
// never an empty result or "decode: EOF".
func checkNotEmpty(path, what string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // the loader says why it cannot be read
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		c, err := r.ReadByte()
		if err != nil {
			if err == io.EOF {
				return usageErrorf("%s %s is empty", what, path)
			}
			return nil // the loader says why it cannot be read
		}
		if !bytes.ContainsRune([]byte(" \t\r\n\v\f"), rune(c)) {
			return nil // reads up to the first byte that is not white space
		}
	}
}

// writeJSON prints v as indented JSON without HTML escaping: every --json
// output goes through it.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints v as one line of JSON without HTML escaping, for
// outputs of one object per line (NDJSON).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// daysValue is a duration flag that also reads days and weeks (7d, 2w), as
// the docs and --last write windows (window.Last).
type daysValue struct {
	d    *time.Duration
	name string
}

// daysVar defines a duration flag of fs reading days and weeks too.
func daysVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&daysValue{d: p, name: "--" + name}, name, usage)
}

func (v *daysValue) Set(s string) error {
	d, err := window.Last(v.name, s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// String writes whole weeks and days as such, anything else as
// time.Duration does.
func (v *daysValue) String() string {
	const day, week = 24 * time.Hour, 7 * 24 * time.Hour
	switch d := *v.d; {
	case d > 0 && d%week == 0:
		return strconv.FormatInt(int64(d/week), 10) + "w"
	case d > 0 && d%day == 0:
		return strconv.FormatInt(int64(d/day), 10) + "d"
	default:
		return d.String()
	}
}

func (v *daysValue) Type() string { return "duration" }

// Duration is the value, for the range check.
func (v *daysValue) Duration() time.Duration { return *v.d }
