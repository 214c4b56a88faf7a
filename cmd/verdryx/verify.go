package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/envelope"
)

// newVerifyCmd verifies the prev_hash chain of each file. Exit 0 when no
// file has a break, a malformed line or an invalid on_behalf_of; 1 when any
// does; 2 for usage errors and for a file that cannot be read or (unless
// --allow-empty) holds no lines.
func newVerifyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify FILE...",
		Short: "verify the prev_hash chain of agent-event NDJSON files",
		Long:  "Verify the agent-event prev_hash chain of NDJSON files, as agent-conform -chain does.\nExit 0: every chain verifies; 1: a break, a malformed line or an invalid event; 2: usage, or a file that cannot be read or is empty (unless --allow-empty).",
	}
	fs := cmd.Flags()
	asJSON := fs.Bool("json", false, "print one JSON report per file")
	allowEmpty := fs.Bool("allow-empty", false, "accept a file with no lines (default: exit 2 saying it is empty)")
	cmd.RunE = func(cmd *cobra.Command, files []string) error {
		return runVerify(cmd.OutOrStdout(), cmd.ErrOrStderr(), files, *asJSON, *allowEmpty)
	}
	return cmd
}

func runVerify(stdout, stderr io.Writer, files []string, asJSON, allowEmpty bool) error {
	if len(files) == 0 {
		return usageErrorf("verify: no files given")
	}
	bad, unusable := false, 0
	for _, path := range files {
		rep, err := envelope.VerifyFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: cannot verify: %v\n", path, err)
			unusable++
			continue
		}
		if rep.Events == 0 && len(rep.Malformed) == 0 && !allowEmpty {
			fmt.Fprintf(stderr, "%s: empty: no events to verify (give --allow-empty to accept it)\n", path)
			unusable++
			continue
		}
		if !rep.OK() {
			bad = true
		}
		if asJSON {
			if err := printVerifyJSON(stdout, path, rep); err != nil {
				return err
			}
			continue
		}
		printVerify(stdout, path, rep)
	}
	if unusable > 0 {
		return usageErrorf("verify: %d of %d files could not be verified (unreadable or empty)", unusable, len(files))
	}
	if bad {
		return failed()
	}
	return nil
}

func printVerify(w io.Writer, path string, rep envelope.Report) {
	verdict := "OK"
	if !rep.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s: %s: %d events, %d chained, %d heads, %d unverifiable, %d breaks, %d malformed, %d invalid\n",
		path, verdict, rep.Events, rep.Chained, rep.Heads, rep.Unverifiable, len(rep.Breaks), len(rep.Malformed), len(rep.Invalid))
	for _, b := range rep.Breaks {
		expected := b.Expected
		if expected == "" {
			expected = "(no previous event)"
		}
		fmt.Fprintf(w, "  line %d: break: expected prev_hash %s, found %s\n", b.Line, expected, b.Found)
	}
	for _, p := range rep.Malformed {
		fmt.Fprintf(w, "  line %d: malformed: %v\n", p.Line, p.Err)
	}
	for _, p := range rep.Invalid {
		fmt.Fprintf(w, "  line %d: invalid: %v\n", p.Line, p.Err)
	}
}

func printVerifyJSON(w io.Writer, path string, rep envelope.Report) error {
	type problem struct {
		Line  int    `json:"line"`
		Error string `json:"error"`
	}
	out := struct {
		File         string           `json:"file"`
		OK           bool             `json:"ok"`
		Events       int              `json:"events"`
		Chained      int              `json:"chained"`
		Heads        int              `json:"heads"`
		Unverifiable int              `json:"unverifiable"`
		Breaks       []envelope.Break `json:"breaks"`
		Malformed    []problem        `json:"malformed"`
		Invalid      []problem        `json:"invalid"`
	}{File: path, OK: rep.OK(), Events: rep.Events, Chained: rep.Chained, Heads: rep.Heads, Unverifiable: rep.Unverifiable,
		Breaks: rep.Breaks, Malformed: []problem{}, Invalid: []problem{}}
	if out.Breaks == nil {
		out.Breaks = []envelope.Break{}
	}
	for _, p := range rep.Malformed {
		out.Malformed = append(out.Malformed, problem{p.Line, p.Err.Error()})
	}
	for _, p := range rep.Invalid {
		out.Invalid = append(out.Invalid, problem{p.Line, p.Err.Error()})
	}
	return writeJSONLine(w, out)
}
