package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/verdryx/verdryx/redact"
)

// Exit codes shared by every subcommand (the README's exit-code table).
const (
	exitOK      = 0
	exitFailure = 1 // a check failed: a chain break, a regression, a score under the floor
	exitUsage   = 2 // bad flags, bad arguments or bad input (missing, empty, malformed)
	exitService = 3 // an outside service failed: a provider, NATS, an OTLP collector
)

// exitError carries a process exit code with an optional message. A nil err
// means the command already printed what it had to say.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports bad flags, arguments or input (exit 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// inputError marks err as an input or usage error (exit 2).
func inputError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitUsage, err: err}
}

// serviceError marks err as the failure of an outside service (exit 3).
func serviceError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitService, err: err}
}

// failed reports a failed check (exit 1) whose details were already printed.
func failed() error { return &exitError{code: exitFailure} }

// run executes one verdryx command line. It is the whole program minus the
// process: tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// Everything printed and every error returned passes the redactor:
	// URL userinfo, Authorization/x-api-key values, secret env values and
	// credentials written into the arguments (even in a URL that does not
	// parse).
	rd := redact.FromEnv(nil).WithArgs(args)
	stdout, stderr = rd.Writer(stdout), rd.Writer(stderr)
	return rd.Error(execute(ctx, args, stdout, stderr))
}

// commandError is what a command's own RunE returned, told apart from
// cobra refusing the command line (an unknown command or flag, bad args).
type commandError struct{ err error }

func (e *commandError) Error() string { return e.err.Error() }

// execute parses args with the command tree and runs the command.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	markCommandErrors(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	var ce *commandError
	if errors.As(err, &ce) {
		return ce.err
	}
	// Cobra refused the command line: one line naming what, and where to
	// look, never a usage dump.
	if cmd == nil {
		cmd = root
	}
	return usageErrorf("%s (see '%s --help')", oneLine(err.Error()), cmd.CommandPath())
}

// oneLine folds cobra's multi-line "Did you mean this?" suggestions into
// the first line.
func oneLine(msg string) string {
	first, rest, ok := strings.Cut(msg, "\n")
	if !ok {
		return msg
	}
	if _, sugg, ok := strings.Cut(rest, "Did you mean this?"); ok {
		if f := strings.Fields(sugg); len(f) > 0 {
			return fmt.Sprintf("%s; did you mean %s?", first, strings.Join(f, " or "))
		}
	}
	return first
}

// markCommandErrors wraps the RunE of every command under c so that the
// errors they return are told apart from cobra's parse errors, and so that
// no command runs with a numeric flag out of its range (exit 2, before
// any work: a configuration error is never retried as an outage).
func markCommandErrors(c *cobra.Command) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := checkFlagRanges(cmd); err != nil {
				return &commandError{err}
			}
			if err := f(cmd, args); err != nil {
				return &commandError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markCommandErrors(sub)
	}
}

// globals are the flags every command has.
type globals struct {
	// data is the data directory: the store (verdryx.db), the index, the
	// embedded NATS store and tail offsets.
	data string
}

// defaultDataDir is the data directory when --data is not given.
func defaultDataDir() string { return envOr("VERDRYX_DATA", ".verdryx") }

// newRoot builds the command tree, printing to stdout and stderr. It holds
// no state beyond one parse.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "verdryx",
		Short: "the quality-and-cost plane for AI agents",
		Long: "verdryx: the quality-and-cost plane for AI agents.\n\n" +
			"Exit codes: 0 ok; 1 a check failed (regressed, mutation survived, chain break, fail-under);\n" +
			"2 usage or input error (missing, empty or malformed input); 3 an outside service failed\n" +
			"(provider, NATS, OTLP collector).",
		Version:       versionLine(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the help, to stderr, as a usage error.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return &exitError{code: exitUsage}
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	// --version without a shorthand: -v is --verbose (--log-level debug)
	// on every command that logs, and means nothing else anywhere.
	root.Flags().Bool("version", false, "print the version, commit and Go version (also: verdryx version)")
	root.PersistentFlags().StringVar(&g.data, "data", defaultDataDir(),
		"data directory: the store (verdryx.db), the index, the embedded NATS store and offsets ($VERDRYX_DATA)")
	root.AddCommand(
		newVersionCmd(),
		newVerifyCmd(),
		newCostPerCorrectCmd(),
		newSLOCmd(g),
		newIndexCmd(g),
		newAskCmd(g),
		newEvalCmd(g),
		newCompareCmd(g),
		newBaselineCmd(g),
		newBaselinesCmd(g),
		newDriftCmd(g),
		newRunsCmd(g),
		newReportCmd(g),
		newStoreCmd(g),
		newMutateCmd(),
		newGoldenCmd(g),
		newServeCmd(g),
		newReplayCmd(),
		newTailCmd(),
		newDLQCmd(),
		newBenchCmd(),
	)
	// help TOPIC: the topic's help on stdout; an unknown topic is a usage
	// error naming it, like an unknown command.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "help about any command",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 || target == nil {
				return usageErrorf("unknown help topic %q", strings.Join(args, " "))
			}
			target.SetOut(cmd.OutOrStdout())
			return target.Help()
		},
	})
	// The completion command is cobra's (its scripts are written to the
	// root's output as it is now: set it first); without a known shell it is a
	// usage error like any other group's.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.NoArgs
			c.RunE = newGroupCmd("", "").RunE
		}
	}
	return root
}

// newGroupCmd returns a command that only holds subcommands: without one
// it prints its help to stderr and exits 2; an unknown one is refused.
func newGroupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return usageErrorf("%s: want a subcommand", cmd.CommandPath())
		},
	}
	c.AddCommand(subs...)
	return c
}

// version is the module version verdryx was built as: the VCS tag or
// pseudo-version the go command stamped, else "devel".
func version() string {
	info, _ := debug.ReadBuildInfo()
	return moduleVersion(info)
}

func moduleVersion(info *debug.BuildInfo) string {
	if info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// versionLine is what --version and version print: the version, the
// commit (vcs.revision, vcs.modified) and the Go version, from the build
// info.
func versionLine() string {
	info, _ := debug.ReadBuildInfo()
	return versionText(info)
}

func versionText(info *debug.BuildInfo) string {
	commit, modified := "unknown (built without VCS stamping)", ""
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (modified)"
				}
			}
		}
	}
	return fmt.Sprintf("verdryx %s\ncommit %s%s\n%s %s/%s", moduleVersion(info), commit, modified, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the verdryx version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}

// envOr returns the environment variable name if it is set and non-empty,
// else def. Flags win over the environment: call it for a flag's default.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envFirst returns the first of the environment variables names that is
// set and non-empty, else def.
func envFirst(def string, names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return def
}

// isTerminal reports whether w is a terminal, for progress bars.
func isTerminal(w io.Writer) bool {
	if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
