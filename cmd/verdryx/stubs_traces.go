package main

import (
	"context"
	"errors"
	"io"
)

// Owned by the traces work (issue 3): replace this file.

func cmdCostPerCorrect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("cost-per-correct: not implemented yet")
}

func cmdSLO(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("slo: not implemented yet")
}

func benchTraces(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench traces: not implemented yet")
}
