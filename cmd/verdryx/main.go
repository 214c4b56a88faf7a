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
	"runtime/pprof"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startProfile(os.Getenv("VERDRYX_CPU_PROFILE"), os.Stderr)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(report(err, os.Stderr))
}

// startProfile writes a CPU profile of the whole process to path (none
// when path is empty) until the returned function is called: for finding
// where a slow run spends its time (go tool pprof).
func startProfile(path string, stderr io.Writer) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "verdryx: VERDRYX_CPU_PROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
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
