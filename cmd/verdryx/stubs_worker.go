package main

import (
	"context"
	"errors"
	"io"
)

// Owned by the worker work (issue 6): replace this file.

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("serve: not implemented yet")
}

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("replay: not implemented yet")
}

func benchWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench worker: not implemented yet")
}
