package main

import (
	"context"
	"errors"
	"io"
)

// Owned by the eval work (issue 5): replace this file.

func cmdEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("eval: not implemented yet")
}

func cmdBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("baseline: not implemented yet")
}

func cmdDrift(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("drift: not implemented yet")
}

func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("runs: not implemented yet")
}
