package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/worker"
)

// cmdDLQ lists and re-drives dead letters.
func cmdDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "replay") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "usage: verdryx dlq ls|replay [--filter TEXT] [--nats URL] [--json]")
			return nil
		}
		return usageErrorf("dlq: want ls or replay")
	}
	sub := args[0]
	fs := newFlagSet("dlq "+sub, "", map[string]string{
		"ls":     "List the dead-letter stream: sequence, time, the subject each message came from and why it was terminated.",
		"replay": "Re-drive dead letters to the subject they came from (each once), then delete them from the dead-letter stream.",
	}[sub], stderr)
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", "NATS server URL (default: the embedded server of a local verdryx serve)")
	filter := fs.String("filter", "", "only dead letters whose reason, subject or body contains this text")
	asJSON := fs.Bool("json", false, "print JSON")
	subjects := addSubjectFlags(fs)
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("dlq %s: unexpected argument %q", sub, pos[0])
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
	dls, err := worker.ListDeadLetters(cctx, js, *subjects, *filter)
	if err != nil {
		return err
	}
	if sub == "ls" {
		if *asJSON {
			return writeJSON(stdout, dls)
		}
		for _, d := range dls {
			fmt.Fprintf(stdout, "%d\t%s\t%s\t%s\n", d.Seq, d.Time.UTC().Format(time.RFC3339), d.Subject, d.Reason)
		}
		fmt.Fprintf(stdout, "%d dead letters\n", len(dls))
		return nil
	}
	n, err := worker.Redrive(cctx, js, *subjects, dls)
	if *asJSON {
		if jerr := writeJSON(stdout, map[string]any{"redriven": n, "matched": len(dls)}); jerr != nil {
			return jerr
		}
	} else {
		fmt.Fprintf(stdout, "re-drove %d of %d dead letters\n", n, len(dls))
	}
	return err
}
