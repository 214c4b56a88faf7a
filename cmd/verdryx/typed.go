package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/provider/typryx"
	"github.com/verdryx/verdryx/redact"
)

// typedFlags enable the typed grader (eval and serve). --typed-url is the
// only switch: no environment variable turns typryx on. The key comes
// only from a file, never from the command line.
type typedFlags struct {
	url, keyFile, template *string
	timeout                *time.Duration
}

func addTypedFlags(fs *pflag.FlagSet) typedFlags {
	return typedFlags{
		url: fs.String("typed-url", "", "typryx root URL: enables typed cases (off when empty; no variable enables it)"),
		keyFile: fs.String("typed-key-file", envOr(typryx.EnvKeyFile, ""),
			"file holding the typryx key sent as X-Typryx-Key ($"+typryx.EnvKeyFile+"; never on the command line)"),
		template: fs.String("typed-template", typryx.DefaultTemplate, "typryx template typed cases ask (a noul or score template)"),
		timeout:  fs.Duration("typed-timeout", typryx.DefaultTimeout, "timeout per typryx call (never retried)"),
	}
}

// typedSetup is what the typed flags give a command: the grader (nil
// without --typed-url), its output writers and a log handler wrapper that
// redact the key, and redact for the error the command returns.
type typedSetup struct {
	typed          *grading.Typed
	stdout, stderr io.Writer
	wrapLog        func(slog.Handler) slog.Handler
	redact         func(error) error
}

// setup builds the typed grader and, with a key, wraps stdout and stderr
// so that the key never leaves the process: not in output, logs or errors.
func (f typedFlags) setup(stdout, stderr io.Writer) (typedSetup, error) {
	typed, r, err := f.build()
	if err != nil {
		return typedSetup{}, err
	}
	ts := typedSetup{typed: typed, stdout: stdout, stderr: stderr, redact: func(err error) error { return err }}
	if r != nil {
		ts.stdout, ts.stderr, ts.wrapLog, ts.redact = r.Writer(stdout), r.Writer(stderr), r.Handler, r.Error
	}
	return ts, nil
}

// build returns the typed grader the flags name and a redactor for its key,
// or nil and nil when --typed-url is empty. Bad flags and an unreadable key
// file are usage errors (exit 2) that never quote the key.
func (f typedFlags) build() (*grading.Typed, *redact.Redactor, error) {
	if *f.url == "" {
		return nil, nil, nil
	}
	if err := checkURL("--typed-url", *f.url, "http", "https"); err != nil {
		return nil, nil, err
	}
	if *f.keyFile == "" {
		return nil, nil, usageErrorf("--typed-url needs the typryx key: give --typed-key-file FILE or set $%s", typryx.EnvKeyFile)
	}
	if *f.template == "" {
		return nil, nil, usageErrorf("--typed-template is empty")
	}
	if *f.timeout <= 0 {
		return nil, nil, usageErrorf("--typed-timeout must be positive")
	}
	key, err := typryx.ReadKeyFile(*f.keyFile)
	if err != nil {
		return nil, nil, inputError(fmt.Errorf("--typed-key-file ($%s): %w", typryx.EnvKeyFile, err))
	}
	c, err := typryx.New(typryx.Options{BaseURL: *f.url, Key: key, Timeout: *f.timeout})
	if err != nil {
		return nil, nil, inputError(fmt.Errorf("--typed-url: %w", err))
	}
	return &grading.Typed{Client: c, Template: *f.template}, c.Redactor(), nil
}
