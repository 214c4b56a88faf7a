package main

import (
	"context"
	"fmt"
	"io"
)

// cmdBench dispatches to the benchmark commands. Each prints its figures and
// the ratio to the reference it measures in the same run.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"traces":  benchTraces,
		"index":   benchIndex,
		"worker":  benchWorker,
		"chain":   benchChain,
		"chaos":   benchChaos,
		"cluster": benchCluster,
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: verdryx bench traces|index|worker|chain|chaos|cluster [flags]")
		if len(args) == 0 {
			return &exitError{code: exitUsage}
		}
		return nil
	}
	f, ok := subs[args[0]]
	if !ok {
		return usageErrorf("bench: unknown benchmark %q (want traces, index, worker, chain, chaos or cluster)", args[0])
	}
	return f(ctx, args[1:], stdout, stderr)
}
