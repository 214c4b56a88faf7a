package main

import (
	"github.com/spf13/cobra"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/verdryx/verdryx/consumer/tail"
	"github.com/verdryx/verdryx/envelope"
)

// newTailCmd makes the tail command, which follows an NDJSON file and prints
// one line per record: events with their validation and chain verdict,
// call/outcome records with their key fields. Exit 0 when no event was
// invalid or broke its chain, 1 otherwise, 2 for usage errors and unreadable
// files.
func newTailCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tail FILE",
		Short: "follow an NDJSON events file",
		Long: "Follow an NDJSON file like tail -F (partial lines wait for their newline; truncation and rotation are followed).\n" +
			"Agent-event envelopes are validated and their prev_hash chain checked as they arrive; call and outcome\n" +
			"records are printed with their key fields. With --offset-file the position is saved after each line\n" +
			"and a restart resumes there. Exit 0: no invalid event, malformed line or chain break; 1: some; 2: usage.",
	}
	fs := cmd.Flags()
	offsetFile := fs.String("offset-file", "", "save and resume the position in this file (written atomically)")
	fromStart := fs.Bool("from-start", false, "with no saved position, read the file from its first byte (default: only new lines)")
	once := fs.Bool("once", false, "exit when the file is read to its end instead of following it")
	asJSON := fs.Bool("json", false, "print one JSON object per line read")
	maxLine := fs.Int("max-line", tail.DefaultMaxLineBytes, "longest line in bytes; a longer one is reported and skipped")
	poll := fs.Duration("poll", tail.DefaultPollInterval, "how often to check the file for new data, truncation and rotation")
	commitEvery := fs.Int("commit-every", tail.DefaultCommitEvery, "save the position every N lines (a crash may repeat up to N lines)")
	lf := addLogFlags(fs, "info")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if len(pos) != 1 {
			return usageErrorf("tail: want exactly one FILE, have %d arguments", len(pos))
		}
		if *maxLine <= 0 || *poll <= 0 || *commitEvery <= 0 {
			return usageErrorf("tail: --max-line, --poll and --commit-every must be positive")
		}
		logger, err := lf.logger(stderr, nil)
		if err != nil {
			return err
		}
		tl, err := tail.New(pos[0], tail.Options{
			StatePath: *offsetFile, FromStart: *fromStart, Once: *once,
			PollInterval: *poll, MaxLineBytes: *maxLine, CommitEvery: *commitEvery, Logger: logger,
		})
		if err != nil {
			return inputError(err)
		}
		p := &tailPrinter{w: stdout, json: *asJSON}
		if err := tl.Run(ctx, p.handle); err != nil {
			if p.writeErr != nil {
				return err
			}
			return inputError(err)
		}
		st := tl.Stats()
		fmt.Fprintf(stderr, "tail: %d lines: %d events (%d chained, %d heads, %d unverifiable, %d breaks, %d invalid), %d records, %d other, %d malformed, %d skipped\n",
			st.Lines, p.events, p.links[envelope.LinkChained], p.links[envelope.LinkHead], p.links[envelope.LinkUnverifiable],
			p.links[envelope.LinkBreak], p.invalid, p.records, p.other, p.malformed, st.Oversize)
		if *once && st.PartialBytes > 0 {
			fmt.Fprintf(stderr, "tail: the last %d bytes are a partial line (no newline yet): not read\n", st.PartialBytes)
		}
		if p.invalid > 0 || p.malformed > 0 || p.links[envelope.LinkBreak] > 0 {
			return failed()
		}
		return nil
	}
	return cmd
}

// tailPrinter prints each tailed line and counts verdicts.
type tailPrinter struct {
	w        io.Writer
	json     bool
	chk      tail.LineChecker
	writeErr error

	events, invalid, records, other, malformed int
	links                                      [envelope.LinkMalformed + 1]int
}

// tailOut is the --json form of one line.
type tailOut struct {
	Line     int64           `json:"line"`
	Offset   int64           `json:"offset"`
	Kind     string          `json:"kind"`
	Type     string          `json:"type,omitempty"`
	AgentID  string          `json:"agent_id,omitempty"`
	RunID    string          `json:"run_id,omitempty"`
	Chain    string          `json:"chain,omitempty"`
	Expected string          `json:"expected,omitempty"`
	Found    string          `json:"found,omitempty"`
	Error    string          `json:"error,omitempty"`
	Bytes    int64           `json:"bytes,omitempty"`
	Record   json.RawMessage `json:"record,omitempty"`
}

func (p *tailPrinter) handle(_ context.Context, ln tail.Line) error {
	c := p.chk.Check(ln)
	out := tailOut{Line: ln.Number, Offset: ln.Offset, Kind: c.Kind.String()}
	if c.Err != nil {
		out.Error = c.Err.Error()
	}
	switch c.Kind {
	case tail.KindBlank:
		return nil
	case tail.KindEvent:
		p.events++
		p.links[c.Link]++
		if c.Err != nil {
			p.invalid++
		}
		out.Type, out.AgentID, out.RunID = c.Event.Type, c.Event.AgentID, c.Event.RunID
		out.Chain, out.Expected, out.Found = c.Link.String(), c.Expected, c.Found
	case tail.KindRecord:
		p.records++
		out.Record = c.Record
	case tail.KindOther:
		p.other++
	case tail.KindMalformed:
		p.malformed++
	case tail.KindOversize:
		out.Bytes = ln.Oversize
	}
	var err error
	if p.json {
		err = writeJSONLine(p.w, out)
	} else {
		_, err = fmt.Fprintln(p.w, tailText(out, c))
	}
	if err != nil {
		p.writeErr = err
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// tailText is the human form of one line.
func tailText(o tailOut, c tail.Classified) string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d %s", o.Line, o.Kind)
	switch c.Kind {
	case tail.KindEvent:
		fmt.Fprintf(&b, " %s %s", orDash(o.Type), orDash(o.AgentID))
		switch c.Link {
		case envelope.LinkBreak:
			fmt.Fprintf(&b, " BREAK expected %s found %s", orNone(o.Expected), orNone(o.Found))
		case envelope.LinkUnverifiable:
			b.WriteString(" unverifiable")
		case envelope.LinkMalformed:
			// the error says why
		default:
			b.WriteString(" " + c.Link.String())
		}
		if c.Err != nil {
			fmt.Fprintf(&b, " invalid: %v", c.Err)
		}
	case tail.KindRecord:
		b.WriteString(recordSummary(c.Record))
	case tail.KindOversize:
		fmt.Fprintf(&b, " at offset %d: %d bytes, over --max-line: skipped", o.Offset, o.Bytes)
	case tail.KindMalformed:
		fmt.Fprintf(&b, ": %v", c.Err)
	case tail.KindOther:
		b.WriteString(": a JSON object with neither an event schema nor run_id/outcome/cost fields")
	}
	return b.String()
}

// recordSummary prints a record's key members, in a fixed order.
func recordSummary(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var b strings.Builder
	for _, k := range [...]string{"run_id", "step", "model", "decision", "agent_id", "outcome",
		"input_tokens", "output_tokens", "cost_microusd", "cost_usd"} {
		if v, ok := m[k]; ok {
			var s string
			if json.Unmarshal(v, &s) != nil {
				s = string(v)
			}
			fmt.Fprintf(&b, " %s=%s", k, s)
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
