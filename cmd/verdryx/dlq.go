package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/verdryx/verdryx/deadletter"
	"github.com/verdryx/verdryx/streams"
)

// newDLQCmd lists and re-drives dead letters.
func newDLQCmd() *cobra.Command {
	return newGroupCmd("dlq", "list (ls) and re-drive (redrive) dead letters",
		newDLQSubCmd("ls", "list dead letters with their reasons",
			"List the dead-letter stream: sequence, time, the subject each message came from and why it was terminated."),
		newDLQSubCmd("redrive", "re-drive dead letters to where they came from",
			"Re-drive dead letters to the subject they came from (each once), then delete them from the dead-letter stream."))
}

func newDLQSubCmd(sub, short, long string) *cobra.Command {
	cmd := &cobra.Command{Use: sub, Short: short, Long: long}
	fs := cmd.Flags()
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", "NATS server URL (default: the embedded server of a local verdryx serve; $NATS_URL, $VERDRYX_NATS_URL)")
	filter := fs.String("filter", "", "only dead letters whose reason, subject or body contains this text")
	asJSON := fs.Bool("json", false, "print JSON")
	subjects := addSubjectFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("dlq %s: unexpected argument %q", sub, pos[0])
		}
		return runDLQ(ctx, stdout, sub, nf, *filter, *asJSON, subjects)
	}
	return cmd
}

func runDLQ(ctx context.Context, stdout io.Writer, sub string, nf natsFlags, filter string, asJSON bool, subjects *streams.Subjects) error {
	if err := checkNATSURL(*nf.url); err != nil {
		return err
	}
	nc, err := nf.connect(*nf.url, "verdryx-dlq")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dls, err := deadletter.List(cctx, js, *subjects, filter)
	if err != nil {
		return err
	}
	if sub == "ls" {
		if asJSON {
			if dls == nil {
				dls = []deadletter.Message{}
			}
			return writeJSON(stdout, dls)
		}
		for _, d := range dls {
			fmt.Fprintf(stdout, "%d\t%s\t%s\t%s\n", d.Seq, d.Time.UTC().Format(time.RFC3339), d.Subject, d.Reason)
		}
		fmt.Fprintf(stdout, "%d dead letters\n", len(dls))
		return nil
	}
	n, err := deadletter.Redrive(cctx, js, *subjects, dls)
	if asJSON {
		if jerr := writeJSON(stdout, map[string]any{"redriven": n, "matched": len(dls)}); jerr != nil {
			return jerr
		}
	} else {
		fmt.Fprintf(stdout, "re-drove %d of %d dead letters\n", n, len(dls))
	}
	return err
}
