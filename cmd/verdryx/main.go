// Command verdryx is the quality-and-cost plane of an agent stack: it grades
// agent outputs, computes drift and cost per outcome, and publishes
// hash-chained agent-event envelopes. main only wires the process to run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// report prints err once to stderr and returns the process exit code.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		// Print err, not ee.err: err is what the redactor made of it.
		if ee.err != nil {
			fmt.Fprintf(stderr, "verdryx: %v\n", err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "verdryx: %v\n", err)
	return 1
}
