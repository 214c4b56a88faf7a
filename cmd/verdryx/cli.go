package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/verdryx/verdryx/redact"
)

// version is set at link time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes shared by every subcommand.
const (
	exitOK      = 0
	exitFailure = 1 // a check failed: a chain break, a regression, a score under the floor
	exitUsage   = 2 // bad flags, bad arguments or unreadable input
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

// failed reports a failed check (exit 1) whose details were already printed.
func failed() error { return &exitError{code: exitFailure} }

// command is one verdryx subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"version", "print the verdryx version", cmdVersion},
		{"verify", "verify the prev_hash chain of agent-event NDJSON files", cmdVerify},
		{"cost-per-correct", "cost per outcome from TokenFuse Parquet traces or outcome records", cmdCostPerCorrect},
		{"slo", "SLO indicators and error budgets from traces", cmdSLO},
		{"index", "build, list and prune vector index generations", cmdIndex},
		{"ask", "ask the RAG pipeline a question and print the full record", cmdAsk},
		{"eval", "grade a model against an eval set and store the run", cmdEval},
		{"baseline", "snapshot a stored run as a baseline", cmdBaseline},
		{"drift", "compare recent runs against a baseline", cmdDrift},
		{"runs", "list stored eval runs", cmdRuns},
		{"report", "write one self-contained HTML page of quality, drift, cost and SLOs", cmdReport},
		{"mutate", "check that the graders catch every named mutation of the golden set", cmdMutate},
		{"serve", "run the worker: NATS consumers, replay, tail and producers", cmdServe},
		{"replay", "publish a Parquet trace directory to the traces subject", cmdReplay},
		{"tail", "follow an NDJSON events file", cmdTail},
		{"dlq", "list (ls) and re-drive (replay) dead letters", cmdDLQ},
		{"bench", "benchmarks: traces, index, worker, chain, chaos", cmdBench},
	}
}

// run dispatches args to a subcommand. It is the whole program minus the
// process: tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// Everything printed and every error returned passes the redactor:
	// URL userinfo, Authorization/x-api-key values, secret env values and
	// credentials written into the arguments (even in a URL that does not
	// parse).
	rd := redact.FromEnv(nil).WithArgs(args)
	stdout, stderr = rd.Writer(stdout), rd.Writer(stderr)
	return rd.Error(dispatch(ctx, args, stdout, stderr))
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printUsage(stderr)
		return &exitError{code: exitUsage}
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		printUsage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	printUsage(stderr)
	return usageErrorf("unknown command %q", name)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "verdryx: the quality-and-cost plane for AI agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: verdryx <command> [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-17s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "run 'verdryx <command> --help' for a command's flags")
}

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", "print the verdryx version", stderr)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "verdryx %s\n", version)
	return nil
}

// newFlagSet returns a flag set that reports errors instead of exiting and
// prints a usage line, a summary and the flags.
func newFlagSet(name, argsUsage, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: verdryx %s [flags] %s\n\n%s\n", name, argsUsage, summary)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(out, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments, and
// returns the positional arguments. --help prints usage to the flag set's
// output and returns an exit-0 error; a bad flag returns an exit-2 error
// (the flag package has already printed why).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &exitError{code: exitOK}
			}
			return nil, &exitError{code: exitUsage}
		}
		rest = fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if rest[0] == "--" {
			return append(positional, rest[1:]...), nil
		}
		positional = append(positional, rest[0])
		rest = rest[1:]
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

// stderrIsTerminal reports whether w is a terminal, for progress bars.
func isTerminal(w io.Writer) bool {
	if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
