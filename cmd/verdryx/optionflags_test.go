package main

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/worker"
)

// TestEveryOptionNameInTheWorkersMessagesMapsToAFlag: each option name
// (Options.X, Subjects.X) a string literal of the worker, fleet or
// evalreq packages holds is replaced by serve's flag for it, so no
// error or log serve prints names a Go field.
func TestEveryOptionNameInTheWorkersMessagesMapsToAFlag(t *testing.T) {
	names := regexp.MustCompile(`\b(Options|Subjects)(\.[A-Z][A-Za-z]*)+`)
	r := serveOptionFlags()
	fset := token.NewFileSet()
	seen := 0
	for _, dir := range []string{"worker", "fleet", "evalreq", "lease"} {
		files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
		require.NoError(t, err)
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				for _, m := range names.FindAllString(lit.Value, -1) {
					seen++
					out := r.Replace(m)
					assert.True(t, strings.HasPrefix(out, "--") && !strings.Contains(out, "Options."),
						"%s: %s in %s maps to %q, not a flag", fset.Position(lit.Pos()), m, lit.Value, out)
				}
				return true
			})
		}
	}
	assert.Greater(t, seen, 10, "the scan found the option names the worker's errors hold")
}

// TestWithFlagNamesKeepsTheErrorsIdentity: the mapped error reads with
// flags and still is (errors.Is, errors.As) what it wraps; a log message
// is mapped likewise, its attributes kept.
func TestWithFlagNamesKeepsTheErrorsIdentity(t *testing.T) {
	base := errors.New("base")
	err := withFlagNames(serveOptionFlags(), errors.Join(base, errors.New("Options.Security.Insecure, Options.Security or Options.HTTPAddr")))
	assert.Equal(t, "base\n--nats-insecure, --nats-user/--nats-password, --nats-token or --nats-config or --http", err.Error())
	assert.ErrorIs(t, err, base)
	assert.Nil(t, withFlagNames(serveOptionFlags(), nil))
	plain := errors.New("no option here")
	assert.Same(t, plain, withFlagNames(serveOptionFlags(), plain))

	var buf bytes.Buffer
	log := slog.New(flagNamesHandler{slog.NewTextHandler(&buf, nil), serveOptionFlags()}).With("a", 1)
	log.Info("no Options.RAGCorpus here", "b", 2)
	assert.Contains(t, buf.String(), `msg="no --rag-corpus here" a=1 b=2`)
}

// TestServeFlagDefaultsAreTheWorkers: each serve flag that sets an option
// with a default shows (and defaults to) worker.Defaults' value.
func TestServeFlagDefaultsAreTheWorkers(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addServeFlags(fs)
	d := worker.Defaults()
	for flag, want := range map[string]string{
		"nats-listen":       d.Listen,
		"http":              d.HTTPAddr,
		"settle":            d.Settle.String(),
		"publish-retry-for": d.PublishRetryFor.String(),
		"slo-every":         d.SLOEvery.String(),
		"catch-up-wait":     d.CatchUpWait.String(),
		"pinned-ttl":        d.PinnedTTL.String(),
		"snapshot-every":    d.SnapshotEvery.String(),
		"fold-after":        d.FoldAfter.String(),
		"start-timeout":     d.StartTimeout.String(),
		"max-record-bytes":  strconv.Itoa(d.MaxRecordBytes),
		"hours-kept":        strconv.Itoa(int(d.HoursKept.Hours())) + "h",
	} {
		f := fs.Lookup(flag)
		require.NotNil(t, f, flag)
		assert.Equal(t, want, f.DefValue, "--%s", flag)
	}
}
